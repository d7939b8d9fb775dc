package server

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/internal/testenv"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models"
	"github.com/mlxgo/mlxgo/tok"
)

var (
	smolOnce  sync.Once
	smolModel models.Model
	smolTok   *tok.Tokenizer
	smolErr   error
)

// smollm2 loads the default model once for every real-model test (the CPU
// backend is slow: these tests keep prompts short and max_tokens small).
func smollm2(t *testing.T) (models.Model, *tok.Tokenizer) {
	t.Helper()
	path := testenv.DataFile(t, "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
	mlxtest.Need(t)
	smolOnce.Do(func() {
		if smolTok, smolErr = tok.Load(path); smolErr != nil {
			return
		}
		smolTok.Truncation, smolTok.Padding = nil, nil
		smolErr = mlx.Do(func() (err error) { smolModel, err = models.Load(path, models.LoadOptions{}); return err })
	})
	if smolErr != nil {
		t.Fatalf("cannot load SmolLM2: %v", smolErr)
	}
	return smolModel, smolTok
}

type chatReply struct {
	Choices []struct {
		Message struct{ Content string }
	}
	Usage struct {
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	}
}

// TestPromptCacheSecondTurn: the second turn of a chat reuses the first
// turn's KV (cached tokens reported) and gives the same greedy text as a
// server without a prompt cache.
func TestPromptCacheSecondTurn(t *testing.T) {
	m, tk := smollm2(t)
	cached, _ := startServer(t, Config{Model: NewMLXModel(m, tk, "smollm2", "test", 64<<20)})
	plain, _ := startServer(t, Config{Model: NewMLXModel(m, tk, "smollm2", "test", 0)})

	turn1 := `{"messages":[{"role":"user","content":"Say hi"}],"max_tokens":4}`
	status, _, b := post(t, cached+"/v1/chat/completions", turn1)
	if status != 200 {
		t.Fatalf("turn 1: %d %s", status, b)
	}
	var r1 chatReply
	json.Unmarshal(b, &r1)
	reply, _ := json.Marshal(r1.Choices[0].Message.Content)
	turn2 := `{"messages":[{"role":"user","content":"Say hi"},{"role":"assistant","content":` + string(reply) + `},{"role":"user","content":"Again"}],"max_tokens":4}`

	results := map[string]chatReply{}
	for name, url := range map[string]string{"cached": cached, "plain": plain} {
		status, _, b := post(t, url+"/v1/chat/completions", turn2)
		if status != 200 {
			t.Fatalf("turn 2 (%s): %d %s", name, status, b)
		}
		var r chatReply
		json.Unmarshal(b, &r)
		results[name] = r
	}
	if n := results["cached"].Usage.PromptTokensDetails.CachedTokens; n < 10 {
		t.Errorf("second turn served %d tokens from the cache, want the first turn's prompt (>= 10)", n)
	}
	if n := results["plain"].Usage.PromptTokensDetails.CachedTokens; n != 0 {
		t.Errorf("server without a prompt cache reported %d cached tokens", n)
	}
	if a, b := results["cached"].Choices[0].Message.Content, results["plain"].Choices[0].Message.Content; a != b || a == "" {
		t.Errorf("greedy second turn differs: cached %q, plain %q", a, b)
	}
}

// TestOpenAIClient runs server/testdata/openai_client.py, the official
// openai package (pinned in .venv), against SmolLM2 behind an API key.
func TestOpenAIClient(t *testing.T) {
	py := testenv.Python(t)
	if err := exec.Command(py, "-c", "import openai").Run(); err != nil {
		testenv.Missing(t, "the openai package in .venv", ".venv/bin/pip install openai==2.8.1")
	}
	m, tk := smollm2(t)
	url, _ := startServer(t, Config{APIKey: "test-key", MaxTokens: 8, Model: NewMLXModel(m, tk, "smollm2", "test", 64<<20)})
	script := filepath.Join(testenv.RepoRoot(), "server", "testdata", "openai_client.py")
	cmd := exec.Command(py, script, url+"/v1", "test-key")
	cmd.Env = append(os.Environ(), "OPENAI_LOG=")
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("openai client checks failed: %v", err)
	}
}
