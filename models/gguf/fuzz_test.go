package gguf

import (
	"testing"
)

// FuzzParse feeds arbitrary bytes to the header, metadata and tensor
// directory parser and the converters: any input must give an error or a
// consistent File, never a panic or a runaway allocation.
func FuzzParse(f *testing.F) {
	var b builder
	b.header(3, 2, 3)
	b.kv("general.architecture", "llama")
	b.kv("tokenizer.ggml.tokens", arr(TypeString, "a", "b"))
	b.kv("nested", arr(TypeArray, arr(TypeInt8, int8(1))))
	b.tensorInfo("a", F32, 0, 4)
	b.tensorInfo("b", Q4_0, 32, 32)
	b.pad(32)
	b.buf = append(b.buf, make([]byte, 32+18)...)
	f.Add(b.buf)
	f.Add([]byte("GGUF\x02\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data)
		if err != nil {
			return
		}
		for _, ti := range file.Tensors {
			raw := file.Raw(ti)
			if uint64(len(raw)) != ti.Size {
				t.Fatalf("tensor %s: %d raw bytes, size %d", ti.Name, len(raw), ti.Size)
			}
			// Conversion must not panic either; unsupported types error.
			_, _ = file.Load(ti.Name)
		}
	})
}
