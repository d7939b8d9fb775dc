package main

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlxgo/mlxgo/internal/testenv"
	"github.com/mlxgo/mlxgo/native"
)

// TestRenderDigests regenerates a copy of native/release_digests.go: the
// hand-written comment survives, the map holds exactly the given digests in
// sorted order, and the result is valid, gofmt'd Go.
func TestRenderDigests(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "native", "release_digests.go"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		digests map[string]native.Digest
		want    []string
	}{
		{"empty", map[string]native.Digest{}, []string{"var releaseDigests = map[string]Digest{}"}},
		{"two variants", map[string]native.Digest{
			"1-1/linux-amd64-cuda13": {SHA256: strings.Repeat("b", 64), Size: 2},
			"1-1/linux-amd64-cpu":    {SHA256: strings.Repeat("a", 64), Size: 1},
		}, []string{
			`"1-1/linux-amd64-cpu":    {SHA256: "` + strings.Repeat("a", 64) + `", Size: 1},` + "\n\t\"1-1/linux-amd64-cuda13\"",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := filepath.Join(t.TempDir(), "release_digests.go")
			os.WriteFile(name, src, 0o644)
			out, err := renderDigests(name, tc.digests)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := parser.ParseFile(token.NewFileSet(), name, out, parser.ParseComments); err != nil {
				t.Fatalf("generated file does not parse: %v\n%s", err, out)
			}
			head, _, _ := strings.Cut(string(src), "var releaseDigests")
			if !strings.HasPrefix(string(out), head) {
				t.Errorf("header comment not kept:\n%s", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("generated file lacks %q:\n%s", w, out)
				}
			}
		})
	}
	t.Run("file without the variable", func(t *testing.T) {
		name := filepath.Join(t.TempDir(), "x.go")
		os.WriteFile(name, []byte("package native\n"), 0o644)
		if _, err := renderDigests(name, nil); err == nil || !strings.Contains(err.Error(), "no releaseDigests variable") {
			t.Fatalf("renderDigests: %v", err)
		}
	})
}
