package native

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/mlxgo/mlxgo/internal/testenv"
)

// testHost is linux/amd64 without a GPU, whatever machine runs the tests,
// so that variant choice and pack checks are the same everywhere.
var testHost = Host{OS: "linux", Arch: "amd64"}

const testVariant = "linux-amd64-cpu"

// envMap is a Getenv that reads only the given variables.
func envMap(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

// realTarball returns the pack tarball `make native` built, its bytes and
// digest; without it the download tests cannot run against the real pack.
func realTarball(t testing.TB) (string, []byte, Digest) {
	t.Helper()
	v, _ := LookupVariant(testVariant)
	name := filepath.Join(testenv.RepoRoot(), ".cache", "native", v.TarballName(PackVersion))
	data, err := os.ReadFile(name)
	if err != nil {
		testenv.Missing(t, "native pack tarball "+filepath.Base(name), "make native")
	}
	return name, data, digestOf(data)
}

// realPackDir is the pack directory `make native` assembled.
func realPackDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(testenv.RepoRoot(), ".cache", "native", "pack", testVariant)
	if _, err := os.Stat(filepath.Join(dir, ManifestName)); err != nil {
		testenv.Missing(t, "native pack directory "+dir, "make native")
	}
	return dir
}

func digestOf(b []byte) Digest {
	s := sha256.Sum256(b)
	return Digest{SHA256: hex.EncodeToString(s[:]), Size: int64(len(b))}
}

// writeSyntheticPack creates a small but complete pack in dir: fake
// libraries and a manifest listing them. edit may change the manifest
// before it is written (a wrong version, another variant).
func writeSyntheticPack(t testing.TB, dir string, edit func(*Manifest)) *Manifest {
	t.Helper()
	files := map[string]string{
		"mlx/lib/libmlx.so":           "not really libmlx " + dir,
		"mlx/lib/libmlxgo.so":         "not really the shim",
		"mlx_cpu.libs/libblas.so.3":   strings.Repeat("blas", 100),
		"licenses/MLX-LICENSE":        "MIT",
		"licenses/THIRD-PARTY.txt":    "none",
		"mlx/include/mlx/version.h":   "// header",
		"mlx/share/cmake/MLX/x.cmake": "# cmake",
	}
	for rel, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	listed, err := ListFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := &Manifest{
		Format: manifestFormat, PackVersion: PackVersion, MLXVersion: MLXVersion,
		OS: "linux", Arch: "amd64", Variant: testVariant,
		Library: packLibrary, Shim: packShim, Files: listed,
	}
	if edit != nil {
		edit(m)
	}
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ManifestName), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return m
}

// tarEntry is one entry of a hand-made tarball.
type tarEntry struct {
	hdr  tar.Header
	data []byte
}

// makeTarGz builds a gzip'd tar from entries, exactly as given: tests use
// it to build tarballs no honest pack builder would write.
func makeTarGz(t testing.TB, entries []tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		h := e.hdr
		if h.Typeflag == tar.TypeReg || h.Typeflag == 0 {
			h.Size = int64(len(e.data))
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatalf("cannot write tar header %q: %v", h.Name, err)
		}
		if len(e.data) > 0 {
			if _, err := tw.Write(e.data); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// readTarGz returns every entry of a gzip'd tar.
func readTarGz(t testing.TB, data []byte) []tarEntry {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var out []tarEntry
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tarEntry{hdr: *h, data: b})
	}
}

// treeOf lists every path under dir (relative, sorted), for asserting that
// nothing was left behind or written where it should not be.
func treeOf(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}
