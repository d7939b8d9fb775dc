package native

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTarballReproducible builds the tarball of the real pack twice, and of
// a synthetic pack laid down twice in different orders, times and umasks:
// each pair must be byte-identical, and the real one must equal the tarball
// `make native` wrote.
func TestTarballReproducible(t *testing.T) {
	t.Run("synthetic pack, different file times and creation order", func(t *testing.T) {
		a, b := t.TempDir(), t.TempDir()
		writeSyntheticPack(t, a, nil)
		writeSyntheticPack(t, b, nil)
		// Same contents, different metadata that must not leak into the tar.
		old := time.Date(2011, 3, 4, 5, 6, 7, 0, time.UTC)
		filepath.Walk(b, func(p string, _ os.FileInfo, _ error) error { return os.Chtimes(p, old, old) })
		os.Chmod(filepath.Join(b, "licenses", "MLX-LICENSE"), 0o600)
		// writeSyntheticPack puts a's dir name into libmlx.so; align it.
		lib := filepath.Join(b, "mlx", "lib", "libmlx.so")
		content, _ := os.ReadFile(filepath.Join(a, "mlx", "lib", "libmlx.so"))
		os.WriteFile(lib, content, 0o644)
		m, _ := os.ReadFile(filepath.Join(a, ManifestName))
		os.WriteFile(filepath.Join(b, ManifestName), m, 0o644)

		var ta, tb bytes.Buffer
		if err := WriteTarball(&ta, a); err != nil {
			t.Fatal(err)
		}
		if err := WriteTarball(&tb, b); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ta.Bytes(), tb.Bytes()) {
			t.Fatalf("tarballs of equal packs differ (%d vs %d bytes)", ta.Len(), tb.Len())
		}
		for _, e := range readTarGz(t, ta.Bytes()) {
			h := e.hdr
			if !h.ModTime.Equal(tarballTime) || h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
				t.Errorf("%s: mtime %v uid %d gid %d uname %q gname %q", h.Name, h.ModTime, h.Uid, h.Gid, h.Uname, h.Gname)
			}
			if h.Mode != 0o644 && h.Mode != 0o755 {
				t.Errorf("%s: mode %o", h.Name, h.Mode)
			}
		}
	})
	t.Run("real pack", func(t *testing.T) {
		dir := realPackDir(t)
		_, built, _ := realTarball(t)
		var x, y bytes.Buffer
		if err := WriteTarball(&x, dir); err != nil {
			t.Fatal(err)
		}
		if err := WriteTarball(&y, dir); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(x.Bytes(), y.Bytes()) {
			t.Fatal("two builds of the real pack's tarball differ")
		}
		if !bytes.Equal(x.Bytes(), built) {
			t.Fatal("rebuilding from the pack directory does not reproduce the tarball make native wrote")
		}
		// Entries are sorted and every directory precedes its contents.
		var prev string
		for _, e := range readTarGz(t, built) {
			if e.hdr.Name <= prev {
				t.Errorf("entry %s after %s", e.hdr.Name, prev)
			}
			prev = e.hdr.Name
		}
	})
}

// fakeWheel lays out an unpacked wheel like mlx-cpu's, small.
func fakeWheel(t *testing.T, version string) string {
	dir := t.TempDir()
	files := map[string]string{
		"mlx/lib/libmlx.so":                                     "libmlx",
		"mlx/include/mlx/mlx.h":                                 "// not in the CPU pack",
		"mlx_cpu.libs/libblas-1.so.3":                           "blas",
		"mlx_cpu-" + MLXVersion + ".dist-info/METADATA":         "Metadata-Version: 2.4\nName: mlx-cpu\nVersion: " + version + "\n\nName: not-a-header\n",
		"mlx_cpu-" + MLXVersion + ".dist-info/licenses/LICENSE": "MIT License",
		"mlx_cpu-" + MLXVersion + ".dist-info/sboms/auditwheel.cdx.json": `{"metadata":{"component":{"name":"mlx_cpu"}},
			"components":[{"name":"mlx_cpu"},{"name":"libblas3","version":"3.10","purl":"pkg:deb/ubuntu/libblas3@3.10"},
			{"name":"libodd","version":"1","purl":"pkg:deb/ubuntu/libodd@1"}]}`,
	}
	for rel, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestBuildPack(t *testing.T) {
	v, _ := LookupVariant(testVariant)
	shim := filepath.Join(t.TempDir(), "libmlxgo.so")
	os.WriteFile(shim, []byte("shim"), 0o755)

	t.Run("pinned wheel", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "pack")
		m, err := BuildPack(BuildSpec{Variant: v, WheelDir: fakeWheel(t, MLXVersion), Shim: shim, OutDir: out})
		if err != nil {
			t.Fatal(err)
		}
		var paths []string
		for _, f := range m.Files {
			paths = append(paths, f.Path)
		}
		want := []string{"licenses/MLX-LICENSE", "licenses/THIRD-PARTY.txt", "licenses/auditwheel.cdx.json",
			"mlx/lib/libmlx.so", "mlx/lib/libmlxgo.so", "mlx_cpu.libs/libblas-1.so.3"}
		if strings.Join(paths, " ") != strings.Join(want, " ") {
			t.Errorf("pack files %q, want %q", paths, want)
		}
		p, err := Open(out)
		if err != nil {
			t.Fatal(err)
		}
		if errs := p.Verify(); len(errs) > 0 {
			t.Errorf("fresh pack does not verify: %v", errs)
		}
		if fi, _ := os.Stat(p.ShimPath()); fi == nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("shim mode %v, want 0755", fi)
		}
		third, _ := os.ReadFile(filepath.Join(out, "licenses", "THIRD-PARTY.txt"))
		for _, s := range []string{"libblas3 3.10", "BSD-3-Clause", "libodd 1", "unknown: see pkg:deb/ubuntu/libodd@1"} {
			if !strings.Contains(string(third), s) {
				t.Errorf("THIRD-PARTY.txt lacks %q:\n%s", s, third)
			}
		}
		if strings.Contains(string(third), "mlx_cpu") {
			t.Errorf("THIRD-PARTY.txt lists the wheel itself:\n%s", third)
		}
		if left, _ := filepath.Glob(filepath.Join(filepath.Dir(out), ".build-*")); len(left) > 0 {
			t.Errorf("build left %v", left)
		}
	})
	t.Run("wheel of another version", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "pack")
		_, err := BuildPack(BuildSpec{Variant: v, WheelDir: fakeWheel(t, "0.1.0"), Shim: shim, OutDir: out})
		if err == nil || !strings.Contains(err.Error(), "is mlx-cpu 0.1.0, expected mlx-cpu "+MLXVersion) {
			t.Fatalf("BuildPack: %v, want a version refusal", err)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("failed build created %s", out)
		}
	})
	t.Run("missing shim", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "pack")
		_, err := BuildPack(BuildSpec{Variant: v, WheelDir: fakeWheel(t, MLXVersion), Shim: "/nonexistent/libmlxgo.so", OutDir: out})
		if err == nil || !strings.Contains(err.Error(), "shim") {
			t.Fatalf("BuildPack: %v, want a shim error", err)
		}
	})
}
