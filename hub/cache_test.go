package hub_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mlxgo/mlxgo/hub"
)

func TestSelect(t *testing.T) {
	sib := func(names ...string) *hub.RepoInfo {
		ri := &hub.RepoInfo{ID: "o/n", SHA: strings.Repeat("a", 40)}
		for _, n := range names {
			ri.Siblings = append(ri.Siblings, hub.Sibling{Name: n})
		}
		return ri
	}
	names := func(s *hub.Selection) []string {
		var out []string
		for _, f := range s.Files {
			out = append(out, f.Name)
		}
		slices.Sort(out)
		return out
	}
	for _, tc := range []struct {
		name  string
		ri    *hub.RepoInfo
		gguf  string
		want  []string
		index bool
		err   string
	}{
		{name: "single safetensors", ri: sib("config.json", "model.safetensors", "README.md", "pytorch_model.bin", "generation_config.json", "chat_template.jinja", "additional_chat_templates/tool.jinja", "onnx/config.json"),
			want: []string{"additional_chat_templates/tool.jinja", "chat_template.jinja", "config.json", "generation_config.json", "model.safetensors"}},
		{name: "sharded", ri: sib("config.json", "model.safetensors.index.json", "model-00001-of-00002.safetensors", "tokenizer.model"), want: []string{"config.json", "tokenizer.model"}, index: true},
		{name: "sentence-transformers", ri: sib("config.json", "model.safetensors", "modules.json", "1_Pooling/config.json", "2_Normalize/x.txt", "vocab.txt"),
			want: []string{"1_Pooling/config.json", "config.json", "model.safetensors", "modules.json", "vocab.txt"}},
		{name: "one gguf", ri: sib("a.gguf", "README.md"), want: []string{"a.gguf"}},
		{name: "chosen gguf", ri: sib("a.gguf", "b.gguf", "config.json", "model.safetensors"), gguf: "b.gguf", want: []string{"b.gguf"}},
		{name: "two ggufs", ri: sib("a.gguf", "b.gguf"), err: "o/n has 2 GGUF files: choose one with --file (a.gguf, b.gguf)"},
		{name: "no weights", ri: sib("config.json", "pytorch_model.bin"), err: "no safetensors or GGUF weights"},
		{name: "no config", ri: sib("model.safetensors"), err: "no config.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := hub.Select(tc.ri, tc.gguf)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(names(s), tc.want) || (s.Index != nil) != tc.index {
				t.Fatalf("Select = %v (index %v), %v; want %v (index %v)", names(s), s.Index != nil, err, tc.want, tc.index)
			}
		})
	}
}

// TestRemove: a revision goes with the blobs only it links to; the whole
// repo goes with its locks; prune takes unlinked blobs and partial files.
func TestRemove(t *testing.T) {
	srv, c, cache, files := setup(t)
	res1, err := hub.Pull(context.Background(), c, cache, hub.Options{Repo: "org/model"})
	if err != nil {
		t.Fatal(err)
	}
	// A second commit that changes one file.
	files["config.json"] = []byte(`{"model_type":"qwen3"}`)
	r2 := srv.AddFiles("org/model", files)
	res2, err := hub.Pull(context.Background(), c, cache, hub.Options{Repo: "org/model", Revision: r2.Commit})
	if err != nil {
		t.Fatal(err)
	}
	repos, err := cache.Scan()
	if err != nil || len(repos) != 1 || len(repos[0].Snapshots) != 2 {
		t.Fatalf("Scan = %+v, %v", repos, err)
	}
	plan, err := cache.PlanRemove("org/model", "main")
	if err != nil {
		t.Fatal(err)
	}
	oldConfig := filepath.Join(cache.RepoDir("org/model"), "blobs", srvBlob(t, res1, "config.json"))
	want := []string{res1.Snapshot, filepath.Join(cache.RepoDir("org/model"), "refs", "main"), oldConfig}
	if !slices.Equal(plan.Paths, want) {
		t.Fatalf("PlanRemove(main) = %q, want %q", plan.Paths, want)
	}
	if err := plan.Apply(); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(res2.Snapshot, "model-00001-of-00002.safetensors")); err != nil || len(b) != 3<<20 {
		t.Fatalf("the other snapshot lost a shared blob: %v", err)
	}
	// Prune: an unlinked blob and a partial download.
	stray := filepath.Join(cache.RepoDir("org/model"), "blobs", strings.Repeat("f", 64))
	os.WriteFile(stray, []byte("x"), 0o644)
	os.WriteFile(stray+".incomplete", []byte("xy"), 0o644)
	plan, err = cache.PlanPrune()
	if err != nil || !slices.Equal(plan.Paths, []string{stray, stray + ".incomplete"}) || plan.Bytes != 3 {
		t.Fatalf("PlanPrune = %+v, %v", plan, err)
	}
	plan, err = cache.PlanRemove("org/model", "")
	if err != nil || len(plan.Paths) != 2 || plan.Paths[0] != cache.RepoDir("org/model") {
		t.Fatalf("PlanRemove(all) = %+v, %v", plan, err)
	}
	if err := plan.Apply(); err != nil {
		t.Fatal(err)
	}
	if repos, _ := cache.Scan(); len(repos) != 0 {
		t.Fatalf("left %+v", repos)
	}
	if _, err := cache.PlanRemove("org/model", ""); err == nil {
		t.Fatal("removing a model twice is no error")
	}
}

func srvBlob(t *testing.T, res *hub.Result, name string) string {
	for _, f := range res.Files {
		if f.Name == name {
			return f.Blob
		}
	}
	t.Fatalf("no %s in the pull", name)
	return ""
}

func TestCacheDirAndToken(t *testing.T) {
	home := t.TempDir()
	os.WriteFile(filepath.Join(home, "token"), []byte("hf_file\n"), 0o600)
	env := map[string]string{"HF_HOME": home}
	get := func(k string) string { return env[k] }
	if d := hub.CacheDir(get); d != filepath.Join(home, "hub") {
		t.Errorf("CacheDir = %s", d)
	}
	if tok := hub.Token(get); tok != "hf_file" {
		t.Errorf("Token from the file = %q", tok)
	}
	env["HF_TOKEN"] = "hf_env"
	if tok := hub.Token(get); tok != "hf_env" {
		t.Errorf("Token from HF_TOKEN = %q", tok)
	}
}
