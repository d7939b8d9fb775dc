package hub_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mlxgo/mlxgo/hub"
	"github.com/mlxgo/mlxgo/hub/hubtest"
)

// testRepo is a sharded safetensors model with files a pull must skip.
func testRepo() map[string][]byte {
	shard := func(n int, seed byte) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = seed + byte(i*7)
		}
		return b
	}
	return map[string][]byte{
		"config.json":                      []byte(`{"model_type":"llama"}`),
		"tokenizer.json":                   []byte(`{"model":{}}`),
		"tokenizer_config.json":            []byte(`{}`),
		"1_Pooling/config.json":            []byte(`{"pooling_mode_mean_tokens":true}`),
		"model.safetensors.index.json":     []byte(`{"metadata":{},"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors","c":"model-00001-of-00002.safetensors"}}`),
		"model-00001-of-00002.safetensors": shard(3<<20, 1),
		"model-00002-of-00002.safetensors": shard(1<<20+17, 2),
		"README.md":                        []byte("# a model\n"),
		"pytorch_model.bin":                shard(1000, 3),
		"onnx/model.onnx":                  shard(100, 4),
	}
}

var wantFiles = []string{"1_Pooling/config.json", "config.json", "model-00001-of-00002.safetensors",
	"model-00002-of-00002.safetensors", "model.safetensors.index.json", "tokenizer.json", "tokenizer_config.json"}

func setup(t *testing.T) (*hubtest.Server, *hub.Client, hub.Cache, map[string][]byte) {
	t.Helper()
	srv := hubtest.New()
	t.Cleanup(srv.Close)
	files := testRepo()
	srv.AddFiles("org/model", files)
	env := map[string]string{"HF_ENDPOINT": srv.URL(), "HF_HOME": t.TempDir(), "HF_HUB_ETAG_TIMEOUT": "2", "HF_HUB_DOWNLOAD_TIMEOUT": "0.5"}
	c, err := hub.NewClient(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	return srv, c, hub.Cache{Dir: filepath.Join(t.TempDir(), "hub")}, files
}

func checkSnapshot(t *testing.T, cache hub.Cache, res *hub.Result, files map[string][]byte) {
	t.Helper()
	var got []string
	err := filepath.Walk(res.Snapshot, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(res.Snapshot, p)
		got = append(got, filepath.ToSlash(rel))
		target, err := os.Readlink(p)
		if err != nil {
			t.Errorf("%s is not a link: %v", rel, err)
			return nil
		}
		sum := sha256.Sum256(files[filepath.ToSlash(rel)])
		depth := strings.Count(filepath.ToSlash(rel), "/")
		if !strings.HasPrefix(target, strings.Repeat("../", depth+2)+"blobs/") {
			t.Errorf("%s -> %s, want a relative link into blobs/", rel, target)
		}
		b, err := os.ReadFile(p)
		if err != nil || sha256.Sum256(b) != sum {
			t.Errorf("%s: content differs (%v)", rel, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, " ") != strings.Join(wantFiles, " ") {
		t.Errorf("snapshot holds %v, want %v", got, wantFiles)
	}
	ref, err := os.ReadFile(filepath.Join(cache.RepoDir("org/model"), "refs", "main"))
	if err != nil || string(ref) != res.Commit {
		t.Errorf("refs/main = %q, %v; want %s", ref, err, res.Commit)
	}
}

func TestPull(t *testing.T) {
	srv, c, cache, files := setup(t)
	srv.Token = "secret"
	c.Token = "secret"
	res, err := hub.Pull(context.Background(), c, cache, hub.Options{Repo: "org/model"})
	if err != nil {
		t.Fatal(err)
	}
	checkSnapshot(t, cache, res, files)
	if srv.CDNSawAuth() {
		t.Error("the token was sent to the content host")
	}
	if dir, commit, err := cache.Snapshot("org/model", "main"); err != nil || dir != res.Snapshot || commit != res.Commit {
		t.Errorf("Snapshot = %s, %s, %v", dir, commit, err)
	}
	if srv.Served("README.md") != 0 || srv.Served("pytorch_model.bin") != 0 {
		t.Error("files the model does not need were fetched")
	}
	// A second pull fetches nothing.
	srv.ResetCounters()
	res2, err := hub.Pull(context.Background(), c, cache, hub.Options{Repo: "org/model", Revision: res.Commit})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range res2.Files {
		if f.Status != "cached" || srv.Served(f.Name) != 0 {
			t.Errorf("%s: %s, %d bytes served on a second pull", f.Name, f.Status, srv.Served(f.Name))
		}
	}
}

func TestPullResume(t *testing.T) {
	srv, c, cache, files := setup(t)
	const big, cut = "model-00001-of-00002.safetensors", 1<<20 + 12345
	size := int64(len(files[big]))
	srv.SetFault(big, hubtest.Fault{CorruptAt: -1, StallAfter: cut})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := hub.Pull(ctx, c, cache, hub.Options{Repo: "org/model"})
		done <- err
	}()
	sum := sha256.Sum256(files[big])
	partial := filepath.Join(cache.RepoDir("org/model"), "blobs", hex.EncodeToString(sum[:])+".incomplete")
	waitSize(t, partial, cut)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled pull: %v, want context.Canceled", err)
	}
	if _, err := os.Stat(filepath.Join(cache.RepoDir("org/model"), "snapshots")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a cancelled pull made a snapshot (%v)", err)
	}
	if !srv.WaitIdle(10 * time.Second) {
		t.Fatal("the server still sends the cancelled transfer")
	}
	srv.Release()
	srv.ResetCounters()
	res, err := hub.Pull(context.Background(), c, cache, hub.Options{Repo: "org/model"})
	if err != nil {
		t.Fatal(err)
	}
	checkSnapshot(t, cache, res, files)
	if got := srv.Served(big); got != size-cut {
		t.Errorf("resumed pull served %d bytes of %s, want %d", got, big, size-cut)
	}
	if r := srv.Ranges(big); len(r) != 1 || r[0] != fmt.Sprintf("bytes=%d-", cut) {
		t.Errorf("ranges %q", r)
	}
}

func waitSize(t *testing.T, p string, n int64) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if st, err := os.Stat(p); err == nil && st.Size() == n {
			return
		}
	}
	t.Fatalf("%s never reached %d bytes", p, n)
}

func TestPullCorrupt(t *testing.T) {
	for _, name := range []string{"model-00002-of-00002.safetensors", "config.json"} {
		t.Run(name, func(t *testing.T) {
			srv, c, cache, files := setup(t)
			srv.SetFault(name, hubtest.Fault{CorruptAt: 1000 % int64(len(files[name])), StallAfter: -1})
			_, err := hub.Pull(context.Background(), c, cache, hub.Options{Repo: "org/model"})
			if !errors.Is(err, hub.ErrCorrupt) || !strings.Contains(err.Error(), name) {
				t.Fatalf("pull of a corrupted %s: %v", name, err)
			}
			if _, err := os.Stat(filepath.Join(cache.RepoDir("org/model"), "snapshots")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("something was linked (%v)", err)
			}
			// Neither a blob nor a partial file of the corrupted one is kept.
			blobs, _ := filepath.Glob(filepath.Join(cache.RepoDir("org/model"), "blobs", srv.File("org/model", name).Blob()+"*"))
			if len(blobs) != 0 {
				t.Errorf("kept %v", blobs)
			}
		})
	}
}

func TestPullErrors(t *testing.T) {
	for _, tc := range []struct {
		name, repo, rev, want string
		setup                 func(*hubtest.Server, *hub.Client)
	}{
		{"no token", "org/model", "", "401 Unauthorized for org/model@main: the repository does not exist, or it is private or gated and needs a token", func(s *hubtest.Server, c *hub.Client) { s.Token = "x" }},
		{"wrong token", "org/model", "", "the token does not give access", func(s *hubtest.Server, c *hub.Client) { s.Token, c.Token = "x", "y" }},
		{"no repo", "org/absent", "", "repository org/absent not found on http://", nil},
		{"no revision", "org/model", "v9", `revision "v9" not found in org/model (404)`, nil},
		{"server error", "org/model", "", "the hub answered 500 Internal Server Error for org/model@main", func(s *hubtest.Server, c *hub.Client) { s.APIStatus = 500 }},
		{"api timeout", "org/model", "", "within 2s (HF_HUB_ETAG_TIMEOUT)", func(s *hubtest.Server, c *hub.Client) { s.APIStall = true }},
		{"file error", "org/model", "", "the hub answered 503 Service Unavailable for config.json of org/model@", func(s *hubtest.Server, c *hub.Client) {
			s.SetFault("config.json", hubtest.Fault{Status: 503, CorruptAt: -1, StallAfter: -1})
		}},
		{"download stall", "org/model", "", "no data from 127.0.0.1:", func(s *hubtest.Server, c *hub.Client) {
			s.SetFault("model-00002-of-00002.safetensors", hubtest.Fault{CorruptAt: -1, StallAfter: 100})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, c, cache, _ := setup(t)
			if tc.setup != nil {
				tc.setup(srv, c)
			}
			_, err := hub.Pull(context.Background(), c, cache, hub.Options{Repo: tc.repo, Revision: tc.rev})
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %v; want one line with %q", err, tc.want)
			}
		})
	}
}

func TestPullConcurrent(t *testing.T) {
	srv, c, cache, files := setup(t)
	var wg sync.WaitGroup
	results := make([]*hub.Result, 3)
	errs := make([]error, 3)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = hub.Pull(context.Background(), c, cache, hub.Options{Repo: "org/model", Jobs: 2})
		}()
	}
	wg.Wait()
	for i := range results {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		checkSnapshot(t, cache, results[i], files)
	}
	for _, name := range wantFiles {
		if got := srv.Served(name); got != int64(len(files[name])) {
			t.Errorf("%s served %d bytes for 3 pulls, want %d (once)", name, got, len(files[name]))
		}
	}
}

func TestPullGGUF(t *testing.T) {
	srv := hubtest.New()
	defer srv.Close()
	srv.AddFiles("org/gguf", map[string][]byte{"a.Q4_0.gguf": []byte("GGUFa"), "b.Q8_0.gguf": []byte("GGUFb"), "README.md": []byte("x")})
	c, _ := hub.NewClient(func(k string) string { return map[string]string{"HF_ENDPOINT": srv.URL()}[k] })
	cache := hub.Cache{Dir: t.TempDir()}
	_, err := hub.Pull(context.Background(), c, cache, hub.Options{Repo: "org/gguf"})
	if err == nil || !strings.Contains(err.Error(), "choose one with --file (a.Q4_0.gguf, b.Q8_0.gguf)") {
		t.Fatalf("pull of a repo with two GGUF files: %v", err)
	}
	res, err := hub.Pull(context.Background(), c, cache, hub.Options{Repo: "org/gguf", GGUF: "b.Q8_0.gguf"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Files) != 1 || res.Path != filepath.Join(res.Snapshot, "b.Q8_0.gguf") {
		t.Fatalf("result %+v", res)
	}
	if _, err := hub.Pull(context.Background(), c, cache, hub.Options{Repo: "org/gguf", GGUF: "c.gguf"}); err == nil || !strings.Contains(err.Error(), `no GGUF file "c.gguf"`) {
		t.Fatalf("pull of a missing file: %v", err)
	}
}
