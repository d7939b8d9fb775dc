package gen

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/internal/testenv"
	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models"
)

// generateCase mirrors testdata/generate_oracle.py's case.
type generateCase struct {
	Name              string  `json:"name"`
	Model             string  `json:"model"`
	Prompt            []int32 `json:"prompt"`
	Steps             int     `json:"steps"`
	Seed              uint64  `json:"seed"`
	Temp              float64 `json:"temp"`
	TopP              float64 `json:"top_p"`
	MinP              float64 `json:"min_p"`
	TopK              int     `json:"top_k"`
	RepetitionPenalty float64 `json:"repetition_penalty"`
	RepetitionContext int     `json:"repetition_context_size"`
	PrefillStepSize   int     `json:"prefill_step_size"`
	KVBits            int     `json:"kv_bits"`
	QuantizedKVStart  int     `json:"quantized_kv_start"`
	MaxKVSize         int     `json:"max_kv_size"`
}

// oracleModelDir is a tiny model built by models/testdata/oracle/make_tiny.py.
func oracleModelDir(t *testing.T, name string) string {
	t.Helper()
	root := os.Getenv("MLXGO_ORACLE_DIR")
	if root == "" {
		root = filepath.Join(testenv.RepoRoot(), ".cache", "oracle")
	}
	dir := filepath.Join(root, "models", name)
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		testenv.Missing(t, "oracle model "+name, "make oracle (models/testdata/oracle/make_tiny.py)")
	}
	return dir
}

func promptIDs(n, vocab int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32((i*37 + 11) % vocab)
	}
	return p
}

// TestGenerateMatchesMLXLM runs gen.Generate and mlx-lm's generate_step on the
// same tiny models with the same seed, sampler, processors and cache
// settings: the token sequences must be identical.
func TestGenerateMatchesMLXLM(t *testing.T) {
	mlxtest.Need(t)
	base := generateCase{Steps: 40, Seed: 11, Temp: 0.8, TopP: 0.95, PrefillStepSize: 2048, QuantizedKVStart: 5000}
	with := func(name, model string, plen int, f func(c *generateCase)) generateCase {
		c := base
		c.Name, c.Model, c.Prompt = name, model, promptIDs(plen, 512)
		f(&c)
		return c
	}
	cases := []generateCase{
		with("greedy-llama-f32", "llama-f32", 30, func(c *generateCase) { c.Temp, c.TopP = 0, 0 }),
		with("sample-qwen3-bf16", "qwen3-bf16", 30, func(c *generateCase) {}),
		with("sample-chunked-llama-q4", "llama-q4g64", 37, func(c *generateCase) { c.PrefillStepSize, c.TopK, c.MinP = 8, 50, 0.05 }),
		with("repetition-qwen2-f32", "qwen2-f32", 25, func(c *generateCase) { c.RepetitionPenalty, c.RepetitionContext, c.Seed = 1.3, 10, 99 }),
		with("kv4-start0-qwen3-bf16", "qwen3-bf16", 30, func(c *generateCase) { c.KVBits, c.QuantizedKVStart = 4, 0 }),
		with("kv8-start40-llama_rope3-bf16", "llama_rope3-bf16", 30, func(c *generateCase) { c.KVBits, c.QuantizedKVStart = 8, 40 }),
		with("maxkv16-gemma3-bf16", "gemma3_text-bf16", 40, func(c *generateCase) { c.MaxKVSize, c.PrefillStepSize = 16, 8 }),
	}
	for i := range cases {
		cases[i].Model = oracleModelDir(t, cases[i].Model)
	}
	want := runGenerateOracle(t, cases)
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			ref := want[tc.Name]
			if len(ref) != tc.Steps {
				t.Fatalf("mlx-lm gave %d tokens, want %d", len(ref), tc.Steps)
			}
			var got []int32
			mlxtest.Do(t, func() error {
				m, err := models.Load(tc.Model, models.LoadOptions{})
				if err != nil {
					return err
				}
				defer m.Close()
				if err := mlx.Seed(tc.Seed); err != nil {
					return err
				}
				o := Options{
					MaxTokens:        tc.Steps,
					Sampler:          SamplerOptions{Temp: tc.Temp, TopP: tc.TopP, MinP: tc.MinP, TopK: tc.TopK},
					Processors:       ProcessorOptions{RepetitionPenalty: tc.RepetitionPenalty, RepetitionContextSize: tc.RepetitionContext},
					PrefillStepSize:  tc.PrefillStepSize,
					KV:               kv.Options{MaxKVSize: tc.MaxKVSize, KVBits: tc.KVBits},
					QuantizedKVStart: tc.QuantizedKVStart,
					VocabSize:        m.Info().VocabSize,
				}
				_, err = Generate(context.Background(), m, tc.Prompt, o, func(tok int32) error {
					got = append(got, tok)
					return nil
				})
				return err
			})
			if !slices.Equal(got, ref) {
				t.Fatalf("tokens differ from mlx-lm's\n got %v\nwant %v", got, ref)
			}
		})
	}
}

func runGenerateOracle(t *testing.T, cases []generateCase) map[string][]int32 {
	t.Helper()
	py := testenv.Python(t)
	req, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, filepath.Join("testdata", "generate_oracle.py"))
	cmd.Stdin = bytes.NewReader(req)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("generate_oracle.py: %v\n%s", err, stderr.String())
	}
	var res map[string][]int32
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("generate_oracle.py output: %v", err)
	}
	return res
}
