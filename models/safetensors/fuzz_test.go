package safetensors

import "testing"

// FuzzParse: arbitrary bytes give an error or a File whose every tensor
// slice lies in the data section; never a panic.
func FuzzParse(f *testing.F) {
	f.Add(file(`{"__metadata__":{"a":"b"},"x":{"dtype":"F32","shape":[2,1],"data_offsets":[0,8]}}`, 8))
	f.Add(file(`{"x":{"dtype":"BOOL","shape":[],"data_offsets":[0,1]},"y":{"dtype":"U8","shape":[0],"data_offsets":[1,1]}}  `, 1))
	f.Add(file(`{}`, 0))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data)
		if err != nil {
			return
		}
		for _, ti := range file.Tensors {
			if got, want := int64(len(file.Data(ti))), ti.Elements()*int64(ti.DType.Size()); got != want {
				t.Fatalf("tensor %s: %d bytes, want %d", ti.Name, got, want)
			}
		}
	})
}
