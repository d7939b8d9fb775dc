package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mlxgo/mlxgo/hub"
	"github.com/mlxgo/mlxgo/hub/hubtest"
	"github.com/mlxgo/mlxgo/internal/testenv"
)

const (
	smolMLX  = "HuggingFaceTB/SmolLM2-135M-Instruct-MLX"
	smolGGUF = "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF"
	miniLM   = "sentence-transformers/all-MiniLM-L6-v2"
	france   = "What is the capital of France? Answer in one sentence."
)

// realHub serves the real models `make data` and `make oracle` fetch: SmolLM2
// converted to MLX (sharded-index safetensors), its GGUF, and all-MiniLM.
func realHub(t *testing.T) *hubtest.Server {
	t.Helper()
	oracle := filepath.Join(testenv.RepoRoot(), ".cache", "oracle", "models", "smollm2-q4_1")
	if _, err := os.Stat(filepath.Join(oracle, "model.safetensors")); err != nil {
		testenv.Missing(t, "the SmolLM2 MLX model "+oracle, "make oracle")
	}
	gguf := testenv.DataFile(t, "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
	minilm := testenv.DataFile(t, "all-minilm-l6-v2/model.safetensors")
	srv := hubtest.New()
	t.Cleanup(srv.Close)
	for id, dir := range map[string]string{smolMLX: oracle, smolGGUF: filepath.Dir(gguf), miniLM: filepath.Dir(minilm)} {
		if _, err := srv.AddDir(id, dir); err != nil {
			t.Fatal(err)
		}
	}
	return srv
}

func needNative(t *testing.T) {
	t.Helper()
	if _, err := installedPack(os.Getenv); err != nil {
		testenv.Missing(t, "an installed native pack", "make native-install")
	}
}

// TestPullRealModels: pull, ls, generate and embed by repo id, --pull, rm.
func TestPullRealModels(t *testing.T) {
	srv := realHub(t)
	c := newCLI(t, srv)
	var res hub.Result
	if err := json.Unmarshal([]byte(c.ok("", "pull", "--json", smolMLX)), &res); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range res.Files {
		names = append(names, f.Name)
	}
	want := []string{"chat_template.jinja", "config.json", "model.safetensors", "model.safetensors.index.json", "tokenizer.json", "tokenizer_config.json"}
	if !slices.Equal(names, want) || res.Path != res.Snapshot || srv.Served("oracle.json") != 0 {
		t.Fatalf("pulled %v to %s; want %v to the snapshot", names, res.Path, want)
	}
	ls := c.ok("", "ls")
	if !strings.Contains(ls, smolMLX) || !strings.Contains(ls, "safetensors  llama  4-bit g32") || !strings.Contains(ls, "yes") {
		t.Fatalf("ls:\n%s", ls)
	}

	t.Run("generate", func(t *testing.T) {
		needNative(t)
		const answer = "The capital of France is Paris.\n"
		if out := c.ok("", "generate", "-m", smolMLX, "--max-tokens", "64", "-p", france); out != answer {
			t.Errorf("generate -m %s: %q, want %q", smolMLX, out, answer)
		}
		if out := c.ok("", "generate", "-m", smolMLX+"@"+res.Commit, "--max-tokens", "8", "-p", france); !strings.HasPrefix(answer, out[:len(out)-1]) {
			t.Errorf("generate -m ...@commit: %q", out)
		}
		// --pull fetches a missing model first (here the GGUF, its one .gguf).
		if _, errs, code := c.run("", "generate", "-m", smolGGUF, "-p", france); code != 1 || !strings.Contains(errs, "mlxgo pull "+smolGGUF) {
			t.Errorf("generate without --pull: exit %d, %q", code, errs)
		}
		if out := c.ok("", "generate", "--pull", "-m", smolGGUF, "--max-tokens", "64", "-p", france); out != answer {
			t.Errorf("generate --pull -m %s: %q, want %q", smolGGUF, out, answer)
		}
		out := c.ok("", "embed", "--pull", "-m", miniLM, "-p", "A man is playing a guitar.")
		if !strings.HasPrefix(out, `{"index":0,"embedding":[`) || strings.Count(out, "\n") != 1 {
			t.Errorf("embed --pull -m %s: %.80q", miniLM, out)
		}
		ls := c.ok("", "ls")
		for _, line := range []string{smolGGUF + " ", miniLM + " "} {
			if !strings.Contains(ls, line) {
				t.Errorf("ls lacks %s:\n%s", line, ls)
			}
		}
		if !strings.Contains(ls, "gguf         llama  Q4_1") || !strings.Contains(ls, "bert") || !strings.Contains(ls, "embed") {
			t.Errorf("ls:\n%s", ls)
		}
	})

	t.Run("rm", func(t *testing.T) {
		out := c.ok("", "rm", "--dry-run", smolMLX)
		if !strings.Contains(out, "would remove models--HuggingFaceTB--SmolLM2-135M-Instruct-MLX\n") {
			t.Fatalf("rm --dry-run: %q", out)
		}
		if _, err := os.Stat(res.Snapshot); err != nil {
			t.Fatal("a dry run removed the model")
		}
		c.ok("", "rm", smolMLX)
		if _, err := os.Stat(filepath.Join(c.hub, hub.FolderName(smolMLX))); !os.IsNotExist(err) {
			t.Fatalf("rm left the repo (%v)", err)
		}
		if strings.Contains(c.ok("", "ls"), smolMLX) {
			t.Fatal("ls still lists the removed model")
		}
	})
}
