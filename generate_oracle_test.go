package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mlxgo/mlxgo/internal/testenv"
)

// TestGenerateGreedyTextMatchesMLXLM: `mlxgo generate` prints, byte for byte,
// the text mlx_lm.generate produced for the same prompts on the same
// SmolLM2 weights (recorded by models/testdata/oracle/smollm2_gguf.py in the
// oracle's cases/index.json), followed by a newline.
func TestGenerateGreedyTextMatchesMLXLM(t *testing.T) {
	if _, err := installedPack(os.Getenv); err != nil {
		testenv.Missing(t, "native pack ("+err.Error()+")", "make native-install")
	}
	gguf := testenv.DataFile(t, filepath.Join("smollm2", DefaultModelFile))
	root := os.Getenv("MLXGO_ORACLE_DIR")
	if root == "" {
		root = filepath.Join(testenv.RepoRoot(), ".cache", "oracle")
	}
	data, err := os.ReadFile(filepath.Join(root, "cases", "index.json"))
	if err != nil {
		testenv.Missing(t, "oracle cases for SmolLM2", "make oracle (models/testdata/oracle/smollm2_gguf.py)")
	}
	var index struct {
		Cases map[string]struct {
			PromptText string `json:"prompt_text"`
			Text       string `json:"generate_text"`
			MaxTokens  int    `json:"generate_max_tokens"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(data, &index); err != nil {
		t.Fatalf("cannot parse the oracle index: %v", err)
	}
	n := 0
	for i := 0; i < 3; i++ {
		name := "smollm2-q4_1-p" + strconv.Itoa(i)
		c, ok := index.Cases[name]
		if !ok || c.PromptText == "" {
			testenv.Missing(t, "oracle case "+name, "make oracle (models/testdata/oracle/smollm2_gguf.py)")
		}
		n++
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			m := &Main{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr}
			code := m.Run(context.Background(), []string{"generate", "-m", gguf,
				"--max-tokens", strconv.Itoa(c.MaxTokens), "-p", c.PromptText})
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr.String())
			}
			if got, want := stdout.String(), c.Text+"\n"; got != want {
				t.Fatalf("prompt %q:\n got %q\nwant %q (mlx_lm.generate)", c.PromptText, got, want)
			}
		})
	}
	if n == 0 {
		t.Fatal("no SmolLM2 cases compared")
	}
}
