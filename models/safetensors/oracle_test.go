package safetensors

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/mlxgo/mlxgo/internal/testenv"
)

type oracleFile struct {
	Metadata map[string]string
	Tensors  map[string]struct {
		DType  string
		Shape  []int
		SHA256 string
	}
}

// TestOracle writes files with the reference safetensors package and checks
// that every tensor's dtype, shape and bytes, and the metadata, match what
// that package reads back; all-MiniLM-L6-v2's real weights are checked too.
func TestOracle(t *testing.T) {
	py := testenv.Python(t)
	minilm := testenv.DataFile(t, "all-minilm-l6-v2/model.safetensors")
	dir := t.TempDir()
	out, err := exec.Command(py, "testdata/gen.py", dir, minilm).Output()
	if err != nil {
		testenv.Missing(t, "safetensors in .venv ("+err.Error()+")", "make venv")
	}
	var want map[string]oracleFile
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatal(err)
	}
	if len(want) != 5 {
		t.Fatalf("oracle described %d files, want 5", len(want))
	}
	for path, w := range want {
		name, _ := filepath.Rel(dir, path)
		if name == "" || name[0] == '.' {
			name = filepath.Base(filepath.Dir(path))
		}
		t.Run(name, func(t *testing.T) {
			f, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			checkFile(t, f, w)
		})
	}
}

func checkFile(t *testing.T, f *File, w oracleFile) {
	t.Helper()
	if len(w.Metadata) > 0 || len(f.Metadata) > 0 {
		if !reflect.DeepEqual(f.Metadata, w.Metadata) {
			t.Errorf("metadata %v, reference %v", f.Metadata, w.Metadata)
		}
	}
	if len(f.Tensors) != len(w.Tensors) {
		t.Errorf("%d tensors, reference %d", len(f.Tensors), len(w.Tensors))
	}
	for name, wt := range w.Tensors {
		ti, ok := f.Tensor(name)
		if !ok {
			t.Errorf("missing tensor %s", name)
			continue
		}
		if string(ti.DType) != wt.DType || !reflect.DeepEqual(ti.Shape, wt.Shape) {
			t.Errorf("%s: %s %v, reference %s %v", name, ti.DType, ti.Shape, wt.DType, wt.Shape)
		}
		if sum := sha256.Sum256(f.Data(ti)); hex.EncodeToString(sum[:]) != wt.SHA256 {
			t.Errorf("%s: bytes differ from the reference's", name)
		}
	}
}

// TestOpenDirSharded opens the sharded directory the oracle script writes.
func TestOpenDirSharded(t *testing.T) {
	py := testenv.Python(t)
	dir := t.TempDir()
	if err := exec.Command(py, "testdata/gen.py", dir).Run(); err != nil {
		testenv.Missing(t, "safetensors in .venv ("+err.Error()+")", "make venv")
	}
	s, err := OpenDir(filepath.Join(dir, "sharded"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.Names(); !reflect.DeepEqual(got, []string{"a.weight", "b.weight", "c.weight"}) {
		t.Errorf("Names() = %v", got)
	}
	if len(s.Files) != 2 {
		t.Errorf("%d files open, want 2 (each shard once)", len(s.Files))
	}
	c, ok := s.Tensor("c.weight")
	if !ok || !reflect.DeepEqual(c.Shape, []int{3, 2}) || len(c.Data) != 24 {
		t.Errorf("c.weight = %v %v, %d bytes", ok, c.Shape, len(c.Data))
	}
	if s.IndexMetadata["total_size"] != 88.0 {
		t.Errorf("index metadata %v", s.IndexMetadata)
	}
}
