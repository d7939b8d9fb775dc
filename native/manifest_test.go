package native

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// goodManifest is a minimal valid manifest; cases below break one thing each.
func goodManifest() Manifest {
	sum := strings.Repeat("0", 64)
	return Manifest{
		Format: manifestFormat, PackVersion: PackVersion, MLXVersion: MLXVersion,
		OS: "linux", Arch: "amd64", Variant: testVariant, Library: packLibrary, Shim: packShim,
		Files: []File{{Path: packLibrary, Size: 1, SHA256: sum}, {Path: packShim, Size: 2, SHA256: sum}},
	}
}

func manifestJSON(t testing.TB, edit func(*Manifest)) []byte {
	m := goodManifest()
	if edit != nil {
		edit(&m)
	}
	b, err := json.Marshal(&m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseManifest(t *testing.T) {
	cases := []struct {
		name    string
		data    []byte
		wantErr string // "" means valid
	}{
		{"valid", manifestJSON(t, nil), ""},
		{"not JSON", []byte("{"), "cannot parse manifest.json"},
		{"unknown field", []byte(strings.Replace(string(manifestJSON(t, nil)), `"format"`, `"extra":1,"format"`, 1)), "unknown field"},
		{"trailing data", append(manifestJSON(t, nil), []byte(" {}")...), "trailing data"},
		{"future format", manifestJSON(t, func(m *Manifest) { m.Format = 9 }), "format 9"},
		{"missing variant", manifestJSON(t, func(m *Manifest) { m.Variant = "" }), "variant is empty"},
		{"no files", manifestJSON(t, func(m *Manifest) { m.Files = nil }), "no files"},
		{"absolute path", manifestJSON(t, func(m *Manifest) { m.Files[0].Path = "/etc/passwd" }), "is absolute"},
		{"dot-dot path", manifestJSON(t, func(m *Manifest) { m.Files[0].Path = "../x" }), "leaves the pack"},
		{"unclean path", manifestJSON(t, func(m *Manifest) { m.Files[0].Path = "mlx//lib" }), "not clean"},
		{"backslash", manifestJSON(t, func(m *Manifest) { m.Files[0].Path = `mlx\lib` }), "backslash"},
		{"duplicate", manifestJSON(t, func(m *Manifest) { m.Files[1].Path = m.Files[0].Path }), "listed twice"},
		{"file under a file", manifestJSON(t, func(m *Manifest) {
			m.Files = append(m.Files, File{Path: packShim + "/x", SHA256: m.Files[0].SHA256})
		}), "is inside file"},
		{"lists itself", manifestJSON(t, func(m *Manifest) { m.Files[0].Path = ManifestName }), "cannot list itself"},
		{"negative size", manifestJSON(t, func(m *Manifest) { m.Files[0].Size = -1 }), "negative size"},
		{"short sha256", manifestJSON(t, func(m *Manifest) { m.Files[0].SHA256 = "abc" }), "not 64 lowercase hex"},
		{"uppercase sha256", manifestJSON(t, func(m *Manifest) { m.Files[0].SHA256 = strings.Repeat("A", 64) }), "not 64 lowercase hex"},
		{"shim not listed", manifestJSON(t, func(m *Manifest) { m.Shim = "mlx/lib/other.so" }), `shim "mlx/lib/other.so" is not among`},
		{"too large", make([]byte, maxManifestSize+1), "more than"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ParseManifest(tc.data)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if m.Variant != testVariant || len(m.Files) != 2 {
					t.Fatalf("parsed %+v", m)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestManifestMarshalIsDeterministic(t *testing.T) {
	m := goodManifest()
	m.Files[0], m.Files[1] = m.Files[1], m.Files[0] // unsorted on purpose
	a, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := m.Marshal()
	if !bytes.Equal(a, b) {
		t.Fatal("two encodings differ")
	}
	back, err := ParseManifest(a)
	if err != nil {
		t.Fatal(err)
	}
	if back.Files[0].Path != packLibrary {
		t.Errorf("files not sorted: first is %s", back.Files[0].Path)
	}
	bad := goodManifest()
	bad.Files[0].Path = "../x"
	if _, err := bad.Marshal(); err == nil {
		t.Error("Marshal accepted an invalid manifest")
	}
}

func TestListFilesRefusesLinks(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a"), []byte("a"), 0o644)
	if err := os.Symlink("a", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	_, err := ListFiles(dir)
	if err == nil || !strings.Contains(err.Error(), "link is not a regular file") {
		t.Fatalf("ListFiles: %v, want a refusal of the symlink", err)
	}
}

// FuzzParseManifest: any bytes give a manifest that passes its own
// validation or an error — never a panic, never a path that leaves the pack.
func FuzzParseManifest(f *testing.F) {
	f.Add(manifestJSON(f, nil))
	f.Add([]byte(`{"format":1,"files":[{"path":"../../etc/passwd","size":1,"sha256":""}]}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"format":1e400}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest(data)
		if err != nil {
			return
		}
		for _, file := range m.Files {
			if checkRelPath(file.Path) != nil || !filepath.IsLocal(file.Path) {
				t.Fatalf("accepted path %q", file.Path)
			}
		}
		if _, err := m.Marshal(); err != nil {
			t.Fatalf("accepted manifest cannot be re-encoded: %v", err)
		}
	})
}
