package native

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestHelperProcess is not a test: TestInstallTwoProcesses runs the test
// binary with -test.run=TestHelperProcess and these variables set, so that
// two real processes (not goroutines: flock is per open file, and the point
// is separate address spaces) race to install the same pack.
func TestHelperProcess(t *testing.T) {
	if os.Getenv("MLXGO_NATIVE_TEST_HELPER") != "1" {
		return
	}
	size, _ := strconv.ParseInt(os.Getenv("HELPER_SIZE"), 10, 64)
	p, err := Install(context.Background(), Options{
		CacheDir: os.Getenv("HELPER_CACHE"), Host: &testHost, Variant: testVariant, Getenv: envMap(nil),
		URL: os.Getenv("HELPER_URL"), ExpectedSHA256: os.Getenv("HELPER_SHA256"), ExpectedSize: size,
		Progress: io.Discard,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	json.NewEncoder(os.Stdout).Encode(map[string]string{"dir": p.Dir, "source": p.Source})
	os.Exit(0)
}

func TestInstallTwoProcesses(t *testing.T) {
	_, good, d := realTarball(t)
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		// Slow enough that the second process starts while the first is
		// still downloading, whichever wins the lock.
		time.Sleep(500 * time.Millisecond)
		w.Header().Set("Content-Length", fmt.Sprint(len(good)))
		w.Write(good)
	}))
	defer srv.Close()
	cache := t.TempDir()

	type result struct {
		out, errOut bytes.Buffer
		cmd         *exec.Cmd
	}
	results := make([]*result, 2)
	for i := range results {
		r := &result{}
		r.cmd = exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
		r.cmd.Env = append(os.Environ(), "MLXGO_NATIVE_TEST_HELPER=1",
			"HELPER_CACHE="+cache, "HELPER_URL="+srv.URL+"/pack.tar.gz",
			"HELPER_SHA256="+d.SHA256, "HELPER_SIZE="+fmt.Sprint(d.Size))
		r.cmd.Stdout, r.cmd.Stderr = &r.out, &r.errOut
		if err := r.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		results[i] = r
	}
	sources := map[string]int{}
	var dirs []string
	for i, r := range results {
		if err := r.cmd.Wait(); err != nil {
			t.Fatalf("process %d failed: %v: %s", i, err, r.errOut.String())
		}
		var got map[string]string
		if err := json.Unmarshal(r.out.Bytes(), &got); err != nil {
			t.Fatalf("process %d printed %q: %v", i, r.out.String(), err)
		}
		sources[got["source"]]++
		dirs = append(dirs, got["dir"])
	}
	// One process downloaded; the other waited on the lock, then found the
	// finished install and used it without downloading again.
	if sources[SourceDownload] != 1 || sources[SourceCache] != 1 {
		t.Errorf("sources %v, want one download and one cache", sources)
	}
	if n := requests.Load(); n != 1 {
		t.Errorf("server saw %d downloads, want 1", n)
	}
	if dirs[0] != dirs[1] {
		t.Errorf("processes installed into %s and %s", dirs[0], dirs[1])
	}
	p, err := Open(dirs[0])
	if err != nil {
		t.Fatal(err)
	}
	checkInstalled(t, p, cache)
}

func TestInstallKeepsOrReplaces(t *testing.T) {
	_, good, d := realTarball(t)
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Write(good)
	}))
	defer srv.Close()
	v, _ := LookupVariant(testVariant)

	cases := []struct {
		name         string
		prepare      func(t *testing.T, cache string) // what is in the cache before
		replace      bool
		wantSource   string
		wantRequests int32
	}{
		{"valid install is kept", func(t *testing.T, cache string) {
			writeSyntheticPack(t, filepath.Join(cache, cacheDirName(v)), nil)
		}, false, SourceCache, 0},
		{"valid install is replaced when asked", func(t *testing.T, cache string) {
			writeSyntheticPack(t, filepath.Join(cache, cacheDirName(v)), nil)
		}, true, SourceDownload, 1},
		{"broken install is replaced", func(t *testing.T, cache string) {
			dir := filepath.Join(cache, cacheDirName(v))
			writeSyntheticPack(t, dir, nil)
			os.Remove(filepath.Join(dir, "mlx", "lib", "libmlxgo.so"))
		}, false, SourceDownload, 1},
		{"leftovers of a killed installer are removed", func(t *testing.T, cache string) {
			for _, p := range []string{".tmp-", ".dl-", ".old-"} {
				os.MkdirAll(filepath.Join(cache, p+cacheDirName(v)+"-123", "x"), 0o755)
			}
		}, false, SourceDownload, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cache := t.TempDir()
			tc.prepare(t, cache)
			requests.Store(0)
			p, err := Install(context.Background(), Options{
				CacheDir: cache, Host: &testHost, Variant: testVariant, Getenv: envMap(nil), Replace: tc.replace,
				URL: srv.URL + "/p.tar.gz", ExpectedSHA256: d.SHA256, ExpectedSize: d.Size, Progress: io.Discard,
			})
			if err != nil {
				t.Fatal(err)
			}
			if p.Source != tc.wantSource {
				t.Errorf("source %s, want %s", p.Source, tc.wantSource)
			}
			if n := requests.Load(); n != tc.wantRequests {
				t.Errorf("%d downloads, want %d", n, tc.wantRequests)
			}
			if tc.wantSource == SourceDownload {
				checkInstalled(t, p, cache)
			}
		})
	}
}

func TestInstallRefusesWithoutDigest(t *testing.T) {
	// No digest in Options and none baked into the binary: downloading
	// something unverifiable must not even start.
	saved := releaseDigests
	releaseDigests = map[string]Digest{}
	defer func() { releaseDigests = saved }()
	_, err := Install(context.Background(), Options{
		CacheDir: t.TempDir(), Host: &testHost, Variant: testVariant, Getenv: envMap(nil),
		URL: "http://127.0.0.1:1/never", Progress: io.Discard,
	})
	if err == nil || !strings.Contains(err.Error(), "no sha256") {
		t.Fatalf("error %v, want a refusal naming the missing sha256", err)
	}
}

func TestInstallOptionErrors(t *testing.T) {
	cases := []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{"half a digest", Options{ExpectedSHA256: strings.Repeat("a", 64)}, "expected size 0 is not positive"},
		{"bad sha256", Options{ExpectedSHA256: "xyz", ExpectedSize: 3}, `expected sha256 "xyz"`},
		{"unknown variant", Options{Variant: "plan9-mips-abacus"}, `unknown variant "plan9-mips-abacus"`},
		{"variant for another OS", Options{Variant: "darwin-arm64-metal"}, "is for darwin/arm64"},
		{"bad scheme", Options{URL: "ftp://x/y", ExpectedSHA256: strings.Repeat("a", 64), ExpectedSize: 1}, "scheme must be"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.opts
			o.CacheDir, o.Host, o.Getenv, o.Progress = t.TempDir(), &testHost, envMap(nil), io.Discard
			if o.Variant == "" {
				o.Variant = testVariant
			}
			_, err := Install(context.Background(), o)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
			if left := treeOf(t, o.CacheDir); len(left) > 0 {
				t.Errorf("left %q in the cache", left)
			}
		})
	}
}

func TestLockWaitsAndHonoursContext(t *testing.T) {
	name := filepath.Join(t.TempDir(), "x.lock")
	held, err := lockFile(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	if _, err := lockFile(ctx, name); err == nil || !strings.Contains(err.Error(), "deadline exceeded") {
		t.Fatalf("second lock: %v, want a deadline error while the first is held", err)
	}
	held.unlock()
	if _, err := os.Stat(name); !os.IsNotExist(err) {
		t.Errorf("lock file still exists after unlock: %v", err)
	}
	again, err := lockFile(context.Background(), name)
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	again.unlock()
}
