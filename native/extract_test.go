package native

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func reg(name, data string) tarEntry {
	return tarEntry{hdr: tar.Header{Name: name, Typeflag: tar.TypeReg}, data: []byte(data)}
}

func TestExtractTarGz(t *testing.T) {
	small := extractLimits{Bytes: 1 << 10, Entries: 5}
	valid := makeTarGz(t, []tarEntry{
		{hdr: tar.Header{Name: "mlx/", Typeflag: tar.TypeDir, Mode: 0o700}},
		reg("mlx/lib/libmlx.so", "lib"),
		{hdr: tar.Header{Name: "bin/tool", Typeflag: tar.TypeReg, Mode: 0o700}, data: []byte("#!")},
	})
	corruptTail := bytes.Clone(valid)
	corruptTail[len(corruptTail)-6] ^= 0xff // inside the gzip CRC32 trailer

	cases := []struct {
		name    string
		data    []byte
		lim     extractLimits
		wantErr string
		want    map[string]os.FileMode // for valid input: file → permission
	}{
		{"valid", valid, small, "", map[string]os.FileMode{"mlx/lib/libmlx.so": 0o644, "bin/tool": 0o755}},
		{"not gzip", []byte("plain text"), small, "not gzip data", nil},
		{"corrupt gzip trailer", corruptTail, small, "gzip", nil},
		{"dot-dot", makeTarGz(t, []tarEntry{reg("a/../../x", "x")}), small, "not clean", nil},
		{"leading dot-dot", makeTarGz(t, []tarEntry{reg("../x", "x")}), small, "leaves the pack", nil},
		{"absolute", makeTarGz(t, []tarEntry{reg("/tmp/x", "x")}), small, "is absolute", nil},
		{"symlink", makeTarGz(t, []tarEntry{{hdr: tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/"}}}), small, `refusing link "l" -> "/"`, nil},
		{"inner symlink", makeTarGz(t, []tarEntry{{hdr: tar.Header{Name: "a/l", Typeflag: tar.TypeSymlink, Linkname: "b"}}}), small, "refusing link", nil},
		{"hardlink", makeTarGz(t, []tarEntry{reg("a", "x"), {hdr: tar.Header{Name: "b", Typeflag: tar.TypeLink, Linkname: "a"}}}), small, "refusing link", nil},
		{"char device", makeTarGz(t, []tarEntry{{hdr: tar.Header{Name: "null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}}}), small, "is not a file or directory", nil},
		{"fifo", makeTarGz(t, []tarEntry{{hdr: tar.Header{Name: "p", Typeflag: tar.TypeFifo}}}), small, "is not a file or directory", nil},
		{"duplicate file", makeTarGz(t, []tarEntry{reg("a", "1"), reg("a", "2")}), small, "file exists", nil},
		{"file where a directory was", makeTarGz(t, []tarEntry{reg("a/b", "1"), reg("a", "2")}), small, `file "a"`, nil},
		{"too many entries", makeTarGz(t, []tarEntry{reg("1", ""), reg("2", ""), reg("3", ""), reg("4", ""), reg("5", ""), reg("6", "")}), small, "more than 5 entries", nil},
		{"too many bytes", makeTarGz(t, []tarEntry{reg("big", strings.Repeat("x", 2000))}), small, "past 1024 bytes", nil},
		{"backslash", makeTarGz(t, []tarEntry{reg(`..\x`, "x")}), small, "backslash", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "pack")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			err := extractTarGz(bytes.NewReader(tc.data), dir, tc.lim)
			assertConfined(t, parent, "pack")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for rel, perm := range tc.want {
				fi, err := os.Stat(filepath.Join(dir, rel))
				if err != nil {
					t.Fatalf("%s: %v", rel, err)
				}
				if fi.Mode().Perm() != perm {
					t.Errorf("%s has mode %v, want %v", rel, fi.Mode().Perm(), perm)
				}
			}
		})
	}
}

// assertConfined fails if anything under parent is outside parent/inside
// or is not a plain file or directory.
func assertConfined(t testing.TB, parent, inside string) {
	t.Helper()
	for _, p := range treeOf(t, parent) {
		if p != inside && !strings.HasPrefix(p, inside+"/") {
			t.Fatalf("extraction wrote %s outside %s", p, inside)
		}
		fi, err := os.Lstat(filepath.Join(parent, p))
		if err != nil {
			t.Fatal(err)
		}
		if !fi.Mode().IsRegular() && !fi.IsDir() {
			t.Fatalf("extraction created %s of mode %v", p, fi.Mode())
		}
	}
}

// FuzzExtract feeds arbitrary bytes to the extractor, both as they are and
// wrapped in gzip (so that the fuzzer reaches the tar parser without having
// to forge CRCs): an error or a confined tree, never a panic or an escape.
func FuzzExtract(f *testing.F) {
	f.Add(makeTarGz(f, []tarEntry{reg("a/b", "hello"), {hdr: tar.Header{Name: "d/", Typeflag: tar.TypeDir}}}))
	f.Add(makeTarGz(f, []tarEntry{reg("../evil", "x")}))
	f.Add(makeTarGz(f, []tarEntry{{hdr: tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "../../"}}, reg("l/x", "x")}))
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	tw.WriteHeader(&tar.Header{Name: "x/y", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644})
	tw.Write([]byte("z"))
	tw.Close()
	f.Add(raw.Bytes())
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		inputs := [][]byte{data}
		if !bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
			var gz bytes.Buffer
			w := gzip.NewWriter(&gz)
			w.Write(data)
			w.Close()
			inputs = append(inputs, gz.Bytes())
		}
		for _, in := range inputs {
			parent := t.TempDir()
			dir := filepath.Join(parent, "pack")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			_ = extractTarGz(bytes.NewReader(in), dir, extractLimits{Bytes: 1 << 20, Entries: 64})
			assertConfined(t, parent, "pack")
		}
	})
}
