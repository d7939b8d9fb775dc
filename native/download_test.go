package native

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// served is one tarball behind the test server and how it is served.
type served struct {
	data []byte
	how  string // "ok", "truncated", "short-chunked", "long-chunked", "stall-headers", "stall-body", or an HTTP status code
}

// packServer serves each path's tarball in the way its case asks for.
func packServer(t *testing.T, paths map[string]served) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, ok := paths[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		flush := func() { w.(http.Flusher).Flush() }
		switch s.how {
		case "ok":
			w.Header().Set("Content-Length", fmt.Sprint(len(s.data)))
			w.Write(s.data)
		case "truncated":
			// Promise everything, send half, hang up: the client sees an
			// unexpected EOF.
			w.Header().Set("Content-Length", fmt.Sprint(len(s.data)))
			w.Write(s.data[:len(s.data)/2])
		case "short-chunked":
			flush() // no Content-Length: the size check must catch it while reading
			w.Write(s.data[:len(s.data)/2])
		case "long-chunked":
			flush()
			w.Write(s.data)
			w.Write([]byte("and then some"))
		case "stall-headers":
			<-r.Context().Done()
		case "stall-body":
			w.Header().Set("Content-Length", fmt.Sprint(len(s.data)))
			w.Write(s.data[:4096])
			flush()
			<-r.Context().Done()
		default:
			var code int
			fmt.Sscan(s.how, &code)
			http.Error(w, "nope", code)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// tamperedTarball is the real tarball with one byte of the shim changed
// and the manifest left alone: its own digest is consistent, its contents
// are not.
func tamperedTarball(t *testing.T, good []byte) []byte {
	entries := readTarGz(t, good)
	for i := range entries {
		if entries[i].hdr.Name == packShim {
			entries[i].data = bytes.Clone(entries[i].data)
			entries[i].data[len(entries[i].data)/2] ^= 0xff
		}
	}
	return makeTarGz(t, entries)
}

func TestInstallDownload(t *testing.T) {
	_, good, goodDigest := realTarball(t)
	v, _ := LookupVariant(testVariant)
	name := v.TarballName(PackVersion)
	outside := t.TempDir() // an absolute path an evil tarball aims at

	tampered := tamperedTarball(t, good)
	origShim, _ := mustManifestOf(t, good).File(packShim)
	tamperedShim := digestOf(entryData(t, tampered, packShim))
	evil := map[string][]byte{
		"dotdot":   makeTarGz(t, []tarEntry{{hdr: tar.Header{Name: "../escape.txt", Typeflag: tar.TypeReg}, data: []byte("x")}}),
		"absolute": makeTarGz(t, []tarEntry{{hdr: tar.Header{Name: filepath.Join(outside, "escape.txt"), Typeflag: tar.TypeReg}, data: []byte("x")}}),
		"symlink": makeTarGz(t, []tarEntry{
			{hdr: tar.Header{Name: "mlx/", Typeflag: tar.TypeDir, Mode: 0o755}},
			{hdr: tar.Header{Name: "mlx/lib", Typeflag: tar.TypeSymlink, Linkname: "../../.."}},
			{hdr: tar.Header{Name: "mlx/lib/escape.txt", Typeflag: tar.TypeReg}, data: []byte("x")},
		}),
		"hardlink": makeTarGz(t, []tarEntry{{hdr: tar.Header{Name: "passwd", Typeflag: tar.TypeLink, Linkname: "/etc/passwd"}}}),
	}

	paths := map[string]served{}
	add := func(how string, data []byte) string {
		p := "/" + how + "/" + name
		paths[p] = served{data: data, how: how}
		return p
	}
	for how, data := range evil {
		paths["/"+how+"/"+name] = served{data: data, how: "ok"}
	}
	paths["/tampered/"+name] = served{data: tampered, how: "ok"}
	wrongSHA := strings.Repeat("ab", 32)

	cases := []struct {
		name    string
		path    string
		want    Digest
		wantErr []string // substrings of the error; none: must succeed
	}{
		{"good pack installs", add("ok", good), goodDigest, nil},
		{"wrong sha256", "/ok/" + name, Digest{wrongSHA, goodDigest.Size},
			[]string{name, "wrong sha256", "expected " + wrongSHA, "actual " + goodDigest.SHA256}},
		{"truncated body", add("truncated", good), goodDigest, []string{name, "truncated", fmt.Sprintf("of %d bytes", goodDigest.Size)}},
		{"wrong size in Content-Length", "/ok/" + name, Digest{goodDigest.SHA256, goodDigest.Size + 1},
			[]string{fmt.Sprintf("server sends %d bytes, expected %d", goodDigest.Size, goodDigest.Size+1)}},
		{"too short without Content-Length", add("short-chunked", good), goodDigest, []string{name, "truncated", fmt.Sprintf("got %d of %d", len(good)/2, len(good))}},
		{"too long without Content-Length", add("long-chunked", good), goodDigest, []string{name, "too large", fmt.Sprintf("expected %d bytes", goodDigest.Size)}},
		{"HTTP 404", "/missing/" + name, goodDigest, []string{"HTTP 404 Not Found"}},
		{"HTTP 500", add("500", good), goodDigest, []string{"HTTP 500 Internal Server Error"}},
		{"stalled before headers", add("stall-headers", good), goodDigest, []string{"no data received for 300ms"}},
		{"stalled mid-body", add("stall-body", good), goodDigest, []string{"no data received for 300ms"}},
		{"entry with ..", "/dotdot/" + name, digestOf(evil["dotdot"]), []string{`refusing entry "../escape.txt"`, "leaves the pack"}},
		{"absolute entry", "/absolute/" + name, digestOf(evil["absolute"]), []string{"refusing entry", "is absolute"}},
		{"symlink out of the tree", "/symlink/" + name, digestOf(evil["symlink"]), []string{`refusing link "mlx/lib" -> "../../.."`}},
		{"hardlink", "/hardlink/" + name, digestOf(evil["hardlink"]), []string{`refusing link "passwd" -> "/etc/passwd"`}},
		{"file differs from manifest", "/tampered/" + name, digestOf(tampered),
			[]string{"pack file " + packShim, "expected sha256 " + origShim.SHA256, "actual sha256 " + tamperedShim.SHA256}},
	}
	srv := packServer(t, paths)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cache := t.TempDir()
			start := time.Now()
			p, err := Install(context.Background(), Options{
				CacheDir: cache, Host: &testHost, Variant: testVariant, Getenv: envMap(nil),
				URL: srv.URL + tc.path, ExpectedSHA256: tc.want.SHA256, ExpectedSize: tc.want.Size,
				StallTimeout: 300 * time.Millisecond, Progress: io.Discard,
			})
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("Install: %v", err)
				}
				checkInstalled(t, p, cache)
				return
			}
			if err == nil {
				t.Fatalf("Install succeeded, want an error containing %q", tc.wantErr)
			}
			t.Logf("refused: %v", err)
			for _, s := range tc.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
			if left := treeOf(t, cache); len(left) > 0 {
				t.Errorf("failed install left %q in the cache", left)
			}
			if _, err := os.Stat(filepath.Join(outside, "escape.txt")); err == nil {
				t.Errorf("an entry escaped to %s", outside)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("failing took %s", d)
			}
		})
	}
}

// checkInstalled asserts a successful install: the pack in its cache
// directory, intact, and nothing else in the cache.
func checkInstalled(t *testing.T, p *Pack, cache string) {
	t.Helper()
	v, _ := LookupVariant(testVariant)
	if want := filepath.Join(cache, cacheDirName(v)); p.Dir != want {
		t.Errorf("installed into %s, want %s", p.Dir, want)
	}
	if errs := p.Verify(); len(errs) > 0 {
		t.Errorf("installed pack does not verify: %v", errs)
	}
	if _, err := os.Stat(p.ShimPath()); err != nil {
		t.Errorf("shim missing: %v", err)
	}
	for _, e := range treeOf(t, cache) {
		if !strings.HasPrefix(e, cacheDirName(v)) {
			t.Errorf("cache holds %q besides the pack", e)
		}
	}
}

func TestInstallFromFileURL(t *testing.T) {
	tarball, _, d := realTarball(t)
	fileURL := (&url.URL{Scheme: "file", Path: tarball}).String()
	cases := []struct {
		name    string
		want    Digest
		wantErr string
	}{
		{"matching digest", d, ""},
		{"wrong size", Digest{d.SHA256, d.Size - 1}, fmt.Sprintf("wrong size: expected %d bytes, actual %d", d.Size-1, d.Size)},
		{"wrong sha256", Digest{strings.Repeat("0", 64), d.Size}, "actual " + d.SHA256},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cache := t.TempDir()
			p, err := Install(context.Background(), Options{
				CacheDir: cache, Host: &testHost, Variant: testVariant, Getenv: envMap(nil),
				URL: fileURL, ExpectedSHA256: tc.want.SHA256, ExpectedSize: tc.want.Size, Progress: io.Discard,
			})
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				checkInstalled(t, p, cache)
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
			if left := treeOf(t, cache); len(left) > 0 {
				t.Errorf("failed install left %q", left)
			}
		})
	}
}

func mustManifestOf(t *testing.T, tarball []byte) *Manifest {
	t.Helper()
	m, err := ParseManifest(entryData(t, tarball, ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func entryData(t *testing.T, tarball []byte, name string) []byte {
	t.Helper()
	for _, e := range readTarGz(t, tarball) {
		if e.hdr.Name == name {
			return e.data
		}
	}
	t.Fatalf("no %s in tarball", name)
	return nil
}

func TestDownloadProgress(t *testing.T) {
	data := bytes.Repeat([]byte("pack"), 1<<18) // 1 MiB: several reads
	d := digestOf(data)
	srv := packServer(t, map[string]served{"/p.tar.gz": {data: data, how: "ok"}})
	cases := []struct {
		name     string
		progress io.Writer
		want     string // substring of what the writer received; "" = nothing
	}{
		{"to a terminal-like writer", &bytes.Buffer{}, "mlxgo: downloading p.tar.gz: 1.0 of 1.0 MB (100%)\n"},
		{"silenced", nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var sink bytes.Buffer
			spec := fetchSpec{URL: srv.URL + "/p.tar.gz", SHA256: d.SHA256, Size: d.Size}
			if tc.progress != nil {
				spec.Progress = &sink
			}
			if err := fetch(context.Background(), io.Discard, spec); err != nil {
				t.Fatal(err)
			}
			got := sink.String()
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Fatalf("progress output %q, want %q", got, tc.want)
			}
			if tc.want != "" && (!strings.HasPrefix(got, "\r") || strings.Count(got, "\n") != 1) {
				t.Errorf("progress should redraw one line with \\r and end it once: %q", got)
			}
		})
	}
}
