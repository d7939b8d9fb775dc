package safetensors

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// file assembles a safetensors file from a header and a data section.
func file(header string, data int) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	b = append(b, header...)
	return append(b, make([]byte, data)...)
}

func TestParse(t *testing.T) {
	hdr := `{"__metadata__":{"format":"pt"},"b":{"dtype":"F16","shape":[2,3],"data_offsets":[16,28]},` +
		`"a":{"dtype":"I64","shape":[2],"data_offsets":[0,16]},"s":{"dtype":"BF16","shape":[],"data_offsets":[28,30]},` +
		`"e":{"dtype":"F32","shape":[0,5],"data_offsets":[30,30]}}   `
	f, err := Parse(file(hdr, 30))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ti := range f.Tensors {
		names = append(names, ti.Name)
	}
	if !reflect.DeepEqual(names, []string{"a", "b", "s", "e"}) {
		t.Errorf("tensor order %v, want data order a b s e", names)
	}
	b, _ := f.Tensor("b")
	if !reflect.DeepEqual(b.Shape, []int{2, 3}) || b.DType != F16 || len(f.Data(b)) != 12 || b.DType.MLX() != "float16" {
		t.Errorf("b = %+v", b)
	}
	if s, _ := f.Tensor("s"); len(s.Shape) != 0 || s.Elements() != 1 {
		t.Errorf("scalar s = %+v", s)
	}
	if f.Metadata["format"] != "pt" {
		t.Errorf("metadata %v", f.Metadata)
	}
}

func TestParseErrors(t *testing.T) {
	entry := func(dtype, shape, offsets string) string {
		return `{"x":{"dtype":"` + dtype + `","shape":` + shape + `,"data_offsets":` + offsets + `}}`
	}
	huge := binary.LittleEndian.AppendUint64(nil, 200<<20)
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"short", []byte{1, 2, 3}, "too short"},
		{"header over limit", append(huge, make([]byte, 16)...), "exceeds the"},
		{"header past end", binary.LittleEndian.AppendUint64(nil, 64), "runs past the end"},
		{"not json", file("hello", 0), "not a JSON object"},
		{"json array", file("[1]", 0), "not a JSON object"},
		{"truncated json", file(`{"x":{"dtype":"F32"`, 0), "invalid header"},
		{"trailing garbage", file(`{}{}`, 0), "after the JSON object"},
		{"unknown dtype", file(entry("F128", "[1]", "[0,16]"), 16), `unknown dtype "F128" in tensor x`},
		{"f4 dtype", file(entry("F4", "[2]", "[0,1]"), 1), `unknown dtype "F4"`},
		{"missing shape", file(`{"x":{"dtype":"F32","data_offsets":[0,4]}}`, 4), "missing shape"},
		{"negative dim", file(entry("F32", "[-1]", "[0,4]"), 4), "negative dimension"},
		{"float dim", file(entry("F32", "[1.5]", "[0,4]"), 4), "bad shape"},
		{"too many elements", file(entry("F32", "[4294967296,4294967296]", "[0,4]"), 4), "too many elements"},
		{"one offset", file(entry("F32", "[1]", "[0]"), 4), "two integers"},
		{"reversed offsets", file(entry("F32", "[1]", "[4,0]"), 4), "bad data_offsets"},
		{"wrong byte count", file(entry("F32", "[2]", "[0,4]"), 8), "needs 8"},
		{"past end", file(entry("F32", "[2]", "[0,8]"), 4), "runs past the end"},
		{"unknown field", file(`{"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"extra":1}}`, 4), `unknown field "extra"`},
		{"entry not object", file(`{"x":[1,2]}`, 0), "entry is not an object"},
		{"duplicate", file(`{"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"x":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`, 2), `"x" appears twice`},
		{"overlap", file(`{"x":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"y":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}}`, 4), "overlaps"},
		{"metadata not strings", file(`{"__metadata__":{"n":1}}`, 0), "is not a string"},
		{"metadata not object", file(`{"__metadata__":"x"}`, 0), "__metadata__ is not an object"},
		{"metadata twice", file(`{"__metadata__":{},"__metadata__":{}}`, 0), "__metadata__ appears twice"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse(tc.data)
			if err == nil {
				t.Fatalf("parsed %d tensors, want an error containing %q", len(f.Tensors), tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

func TestOpenDirErrors(t *testing.T) {
	good := file(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, 4)
	cases := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"empty dir", nil, "no model*.safetensors files"},
		{"missing shard", map[string]string{
			IndexName: `{"weight_map":{"w":"model-00001-of-00002.safetensors"}}`,
		}, "cannot open shard model-00001-of-00002.safetensors"},
		{"escaping shard", map[string]string{IndexName: `{"weight_map":{"w":"../x.safetensors"}}`}, "not a file name"},
		{"bad index", map[string]string{IndexName: `{"weight_map":`}, "cannot parse " + IndexName},
		{"tensor not in shard", map[string]string{
			IndexName: `{"weight_map":{"v":"model.safetensors"}}`, "model.safetensors": string(good),
		}, "tensor v is missing from shard model.safetensors"},
		{"tensor not in index", map[string]string{
			IndexName: `{"weight_map":{"w":"model-a.safetensors"}}`, "model-a.safetensors": string(good),
			"model-b.safetensors": string(good),
		}, ""},
		{"duplicate across files", map[string]string{
			"model-a.safetensors": string(good), "model-b.safetensors": string(good),
		}, "tensor w is in both model-a.safetensors and model-b.safetensors"},
		{"corrupt file", map[string]string{"model.safetensors": "\x05\x00\x00\x00\x00\x00\x00\x00{}"}, "header length 5 runs past"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, body := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			s, err := OpenDir(dir)
			if tc.want == "" {
				// model-b is not in the index and so never opened: that is fine.
				if err != nil || len(s.Files) != 1 {
					t.Fatalf("OpenDir = %v", err)
				}
				s.Close()
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("OpenDir = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestOpenDirSingle(t *testing.T) {
	dir := t.TempDir()
	body := file(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, 4)
	copy(body[len(body)-4:], []byte{0, 0, 0x80, 0x3f}) // 1.0f
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors"), body, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w, ok := s.Tensor("w")
	if !ok || binary.LittleEndian.Uint32(w.Data) != 0x3f800000 {
		t.Errorf("w = %v %x", ok, w.Data)
	}
	if _, ok := s.Tensor("nope"); ok {
		t.Error("found a tensor that does not exist")
	}
}
