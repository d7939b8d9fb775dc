package safetensors

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Release after copying a tensor out must leave every tensor readable with
// the same bytes (the header puts the data section off any page boundary).
func TestReleaseKeepsData(t *testing.T) {
	page := os.Getpagesize()
	n := 3 * page / 4 // float32 elements per tensor: three pages each
	header := fmt.Sprintf(`{"a":{"dtype":"F32","shape":[%d],"data_offsets":[0,%d]},"b":{"dtype":"F32","shape":[%d],"data_offsets":[%d,%d]}}`,
		n, 4*n, n, 4*n, 8*n)
	raw := file(header, 8*n)
	for i := len(raw) - 8*n; i < len(raw); i++ {
		raw[i] = byte(i * 13)
	}
	path := filepath.Join(t.TempDir(), "model.safetensors")
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := map[string][]byte{}
	for _, ti := range f.Tensors {
		want[ti.Name] = bytes.Clone(f.Data(ti))
	}
	for _, ti := range f.Tensors {
		f.Release(ti)
		for _, tj := range f.Tensors {
			if !bytes.Equal(f.Data(tj), want[tj.Name]) {
				t.Fatalf("after releasing %s, %s reads different bytes", ti.Name, tj.Name)
			}
		}
	}
}
