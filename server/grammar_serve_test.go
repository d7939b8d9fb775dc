package server

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/mlxgo/mlxgo/gen"
	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/internal/testenv"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models"
	"github.com/mlxgo/mlxgo/tok"
)

// TestStructuredOutputOpenAI serves real SmolLM2 (the oracle's MLX
// conversion, which has a tokenizer.json) and runs
// server/testdata/openai_structured.py: json_schema (strict, streamed and
// not), json_object and the client's parse() helper give content that
// validates; an unenforceable keyword and a forced call on a template
// without tools are 400s naming the parameter.
func TestStructuredOutputOpenAI(t *testing.T) {
	root := os.Getenv("MLXGO_ORACLE_DIR")
	if root == "" {
		root = filepath.Join(testenv.RepoRoot(), ".cache", "oracle")
	}
	dir := filepath.Join(root, "models", "smollm2-q4_1")
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		testenv.Missing(t, "oracle SmolLM2 conversion", "make oracle")
	}
	py := testenv.Python(t)
	mlxtest.Need(t)
	tk, err := tok.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	var m models.Model
	if err := mlx.Do(func() (err error) { m, err = models.Load(dir, models.LoadOptions{}); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mlx.Do(m.Close) })
	sm := NewMLXModel(m, tk, "smollm2", "test", 0)
	sm.Grammars = gen.NewGrammars(tk, sm.VocabSize, sm.EOS)
	url, _ := startServer(t, Config{Model: sm, MaxTokens: 64})
	cmd := exec.Command(py, filepath.Join(testenv.RepoRoot(), "server", "testdata", "openai_structured.py"), url+"/v1")
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("structured-output checks failed: %v", err)
	}
}
