package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlxgo/mlxgo/hub/hubtest"
)

func TestResolveModel(t *testing.T) {
	dir := t.TempDir()
	hub := filepath.Join(dir, "hub")
	mk := func(p, content string) {
		t.Helper()
		p = filepath.Join(hub, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mk("models--org--dirmodel/refs/main", "abc123\n")
	mk("models--org--dirmodel/snapshots/abc123/config.json", "{}")
	mk("models--org--dirmodel/snapshots/old999/config.json", "{}")
	mk("models--org--ggufmodel/refs/main", "r1")
	mk("models--org--ggufmodel/snapshots/r1/m.Q4_0.gguf", "")
	mk("models--org--two/refs/main", "r1")
	mk("models--org--two/snapshots/r1/a.gguf", "")
	mk("models--org--two/snapshots/r1/b.gguf", "")
	mk("models--org--badref/refs/main", "../../etc")
	mk("models--org--noref/snapshots/x/config.json", "{}")
	commit := strings.Repeat("c", 40)
	mk("models--org--dirmodel/refs/v1", commit)
	mk("models--org--dirmodel/snapshots/"+commit+"/config.json", "{}")
	local := filepath.Join(dir, "local.gguf")
	if err := os.WriteFile(local, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(dir, "xdg")
	def := filepath.Join(cache, "mlxgo", "models", DefaultModelFile)

	env := map[string]string{"HF_HUB_CACHE": hub, "XDG_CACHE_HOME": cache}
	getenv := func(k string) string { return env[k] }
	for _, tc := range []struct {
		name, arg, want, err string
		before               func()
	}{
		{name: "local file", arg: local, want: local},
		{name: "repo dir snapshot from refs/main", arg: "org/dirmodel", want: filepath.Join(hub, "models--org--dirmodel", "snapshots", "abc123")},
		{name: "repo at a tag", arg: "org/dirmodel@v1", want: filepath.Join(hub, "models--org--dirmodel", "snapshots", commit)},
		{name: "repo at a commit", arg: "org/dirmodel@" + commit, want: filepath.Join(hub, "models--org--dirmodel", "snapshots", commit)},
		{name: "repo at an unknown tag", arg: "org/dirmodel@v2", err: "no refs/v2"},
		{name: "repo at a bad revision", arg: "org/dirmodel@../x", err: "no such file or directory"},
		{name: "repo with one gguf", arg: "org/ggufmodel", want: filepath.Join(hub, "models--org--ggufmodel", "snapshots", "r1", "m.Q4_0.gguf")},
		{name: "repo with two ggufs", arg: "org/two", err: "holds 2 .gguf files"},
		{name: "ref escaping the cache", arg: "org/badref", err: "not a revision"},
		{name: "no refs/main", arg: "org/noref", err: "refs/main"},
		{name: "not cached", arg: "org/absent", err: "not in the Hugging Face cache at " + hub + " (no models--org--absent); run `mlxgo pull org/absent` or add --pull"},
		{name: "missing path", arg: "./nope/model", err: "no such file or directory"},
		{name: "default absent", arg: "", err: "make demo"},
		{name: "default present", arg: "", want: def, before: func() {
			if err := os.MkdirAll(filepath.Dir(def), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(def, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.before != nil {
				tc.before()
			}
			got, err := resolveModel(tc.arg, getenv)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("resolveModel(%q) = %q, %v; want an error with %q", tc.arg, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("resolveModel(%q) = %q, %v; want %q", tc.arg, got, err, tc.want)
			}
		})
	}
}

func TestHFHubCache(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"HF_HUB_CACHE wins", map[string]string{"HF_HUB_CACHE": "/a", "HF_HOME": "/b"}, "/a"},
		{"HF_HOME/hub", map[string]string{"HF_HOME": "/b", "XDG_CACHE_HOME": "/c"}, "/b/hub"},
		{"XDG cache", map[string]string{"XDG_CACHE_HOME": "/c", "HOME": "/h"}, "/c/huggingface/hub"},
		{"home", map[string]string{"HOME": "/h"}, "/h/.cache/huggingface/hub"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := hfHubCache(func(k string) string { return tc.env[k] }); got != tc.want {
				t.Fatalf("hfHubCache = %q, want %q", got, tc.want)
			}
		})
	}
}

// FuzzResolveModelRepoID: whatever -m says, a repo id never leads outside
// the hub cache, and resolution never panics.
func FuzzResolveModelRepoID(f *testing.F) {
	for _, s := range []string{"org/name", "../x", "a/..", "org/name/extra", `a\b/c`, "./x", "/abs/path", ""} {
		f.Add(s)
	}
	hub := f.TempDir()
	f.Fuzz(func(t *testing.T, arg string) {
		if !looksLikeRepoID(arg) {
			return
		}
		dir := filepath.Join(hub, "models--"+strings.ReplaceAll(arg, "/", "--"))
		if rel, err := filepath.Rel(hub, dir); err != nil || strings.HasPrefix(rel, "..") || strings.Contains(rel, string(filepath.Separator)) {
			t.Fatalf("repo id %q maps to %s, outside the hub cache %s", arg, dir, hub)
		}
		_, _ = resolveModel(arg, func(k string) string {
			if k == "HF_HUB_CACHE" {
				return hub
			}
			return ""
		})
	})
}

// TestResolveModelPull: with --pull, a repo id missing from the cache is
// pulled and resolved; without it, nothing is fetched.
func TestResolveModelPull(t *testing.T) {
	srv := hubtest.New()
	defer srv.Close()
	srv.AddFiles("org/tiny", map[string][]byte{"config.json": []byte(`{"model_type":"llama"}`), "model.safetensors": []byte("x")})
	env := map[string]string{"HF_HUB_CACHE": t.TempDir(), "HF_ENDPOINT": srv.URL(), "HF_HOME": t.TempDir()}
	getenv := func(k string) string { return env[k] }
	defer func() { modelFetch.pull = false }()
	modelFetch.pull = false
	if _, err := resolveModel("org/tiny", getenv); err == nil || srv.Served("model.safetensors") != 0 {
		t.Fatalf("without --pull: %v, %d bytes fetched", err, srv.Served("model.safetensors"))
	}
	modelFetch.pull = true
	got, err := resolveModel("org/tiny", getenv)
	if err != nil || filepath.Base(filepath.Dir(got)) != "snapshots" {
		t.Fatalf("with --pull: %q, %v", got, err)
	}
	if b, err := os.ReadFile(filepath.Join(got, "model.safetensors")); err != nil || string(b) != "x" {
		t.Fatalf("pulled %q, %v", b, err)
	}
	if again, err := resolveModel("org/tiny", getenv); err != nil || again != got {
		t.Fatalf("second resolve %q, %v", again, err)
	}
}

// TestServedModelID: a model served from the hub cache answers to its repo
// id, not to the snapshot's commit hash; paths keep their base name.
func TestServedModelID(t *testing.T) {
	for _, c := range []struct{ arg, path, want string }{
		{"HuggingFaceTB/SmolLM2-135M-Instruct", "/c/models--HuggingFaceTB--SmolLM2-135M-Instruct/snapshots/0123abcd", "HuggingFaceTB/SmolLM2-135M-Instruct"},
		{"org/name@main", "/c/models--org--name/snapshots/0123abcd/m.gguf", "org/name@main"},
		{"./models/smollm2/", "./models/smollm2/", "smollm2"},
		{"/data/SmolLM2-135M-Instruct.Q4_1.gguf", "/data/SmolLM2-135M-Instruct.Q4_1.gguf", "SmolLM2-135M-Instruct.Q4_1"},
		{"", "/home/u/.cache/mlxgo/models/default.gguf", "default"},
	} {
		if got := servedModelID(c.arg, c.path); got != c.want {
			t.Errorf("servedModelID(%q, %q) = %q, want %q", c.arg, c.path, got, c.want)
		}
	}
}
