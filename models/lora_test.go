package models_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/mlxgo/mlxgo/gen"
	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/internal/testenv"
	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/models"
)

// loraCase is one entry of the oracle's lora/index.json (lora.py).
type loraCase struct {
	File          string            `json:"file"`
	Model         string            `json:"model"`
	ModelFiles    map[string]string `json:"model_files"`
	Adapter       string            `json:"adapter"`
	Fused         bool              `json:"fused"`
	LogitsDtype   string            `json:"logits_dtype"`
	PrefillChunks []int             `json:"prefill_chunks"`
	Steps         int               `json:"steps"`
	DiffersBase   bool              `json:"tokens_differ_from_base"`
}

var loraOnce sync.Once

// loraCases returns lora.py's fixtures, generating them (and the tiny
// models they need) when absent.
func loraCases(t *testing.T) map[string]loraCase {
	t.Helper()
	oracleCases(t) // the tiny models
	index := filepath.Join(oracleDir(), "lora", "index.json")
	loraOnce.Do(func() {
		if _, err := os.Stat(index); err == nil {
			return
		}
		cmd := exec.Command(testenv.Python(t), "lora.py")
		cmd.Dir = filepath.Join(testenv.RepoRoot(), "models", "testdata", "oracle")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("cannot generate the adapter fixtures (lora.py): %v\n%s", err, out)
		}
	})
	return readCases[loraCase](t, index, "adapter fixtures", "make oracle (models/testdata/oracle/lora.py)")
}

// loadAdapted loads c's model with its adapter: fused, or unfused and the
// view of that adapter.
func loadAdapted(c loraCase) (models.Model, func(), error) {
	name := filepath.Base(c.Adapter)
	m, err := models.Load(filepath.Join(oracleDir(), c.Model), models.LoadOptions{
		Adapters:    []models.Adapter{{Name: name, Path: filepath.Join(oracleDir(), c.Adapter)}},
		FuseAdapter: c.Fused,
	})
	if err != nil {
		return nil, nil, err
	}
	if c.Fused {
		if _, ok := m.(models.Adapted); ok {
			m.Close()
			return nil, nil, fmt.Errorf("a fused adapter gave an Adapted model")
		}
		return m, func() { m.Close() }, nil
	}
	a, ok := m.(models.Adapted)
	if !ok {
		m.Close()
		return nil, nil, fmt.Errorf("Load with an adapter returned a %T, not an Adapted model", m)
	}
	v, err := a.WithAdapter(name)
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	return v, func() { m.Close() }, nil
}

// TestLoRAL1 replays every adapter case of lora.py as TestL1 replays its
// cases: mlx-lm's prefill split, then greedy decode on mlx-lm's tokens, with
// the adapter loaded (unfused, as mlx_lm.generate --adapter-path applies
// it) or fused (as mlx_lm.fuse computes the weights); every logit must have
// mlx-lm's bits.
func TestLoRAL1(t *testing.T) {
	mlxtest.Need(t)
	cases := loraCases(t)
	names := make([]string, 0, len(cases))
	for n := range cases {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		c := cases[name]
		t.Run(name, func(t *testing.T) {
			if !c.DiffersBase {
				t.Fatalf("the fixture's adapter does not change the greedy tokens: it would prove nothing")
			}
			fx := readFixture(t, filepath.Join(oracleDir(), "lora", c.File))
			mlxtest.Do(t, func() error {
				m, done, err := loadAdapted(c)
				if err != nil {
					return err
				}
				defer done()
				got, err := m.Info().Artifact.FileDigests()
				if err != nil {
					return err
				}
				if !reflect.DeepEqual(got, c.ModelFiles) {
					return fmt.Errorf("model files differ from the fixture's: got %v, want %v", got, c.ModelFiles)
				}
				caches := m.NewCaches(kv.Options{})
				defer kv.FreeAll(caches)
				return replayRows(m, caches, c.PrefillChunks, fx, c.Steps, func(step int, row []float32, dtype string) error {
					if dtype != c.LogitsDtype {
						return fmt.Errorf("logits dtype %s, oracle %s", dtype, c.LogitsDtype)
					}
					want := fx.logits[step*fx.vocab : (step+1)*fx.vocab]
					if i, d := compareRow(row, want); i >= 0 {
						return fmt.Errorf("step %d: first difference at vocab index %d: got %v, want %v; max abs diff %g", step, i, row[i], want[i], d)
					}
					return nil
				})
			})
		})
	}
}

// TestLoRABatchedRows decodes, in one gen.Batch over one model loaded with
// two adapters, rows that use either adapter and rows that use none (the
// adapters' rows interleaved, so that a decode step applies each update to
// runs of one row and of several): every row's tokens and log-probabilities
// must be those of the same row run alone, and an adapter row's tokens
// mlx-lm's greedy tokens for that adapter (lora.py's fixture).
func TestLoRABatchedRows(t *testing.T) {
	mlxtest.Need(t)
	cases := loraCases(t)
	for _, model := range []string{"llama-f32", "llama-q4g64"} {
		t.Run(model, func(t *testing.T) {
			adapters := []string{"llama-all-last1", "llama-qvdown-head", "llama-dora"}
			var specs []models.Adapter
			want := map[string][]int32{}
			var prompt []int32
			for _, a := range adapters {
				c, ok := cases[model+"+"+a]
				if !ok {
					t.Fatalf("lora.py has no case %s+%s", model, a)
				}
				fx := readFixture(t, filepath.Join(oracleDir(), "lora", c.File))
				want[a], prompt = fx.tokens, fx.prompt
				specs = append(specs, models.Adapter{Name: a, Path: filepath.Join(oracleDir(), c.Adapter)})
			}
			// Row r: its adapter ("" none) and its prompt; rows 0-2 share
			// lora.py's prompt, the others run their own.
			rows := []string{"llama-all-last1", "", "llama-qvdown-head", "llama-all-last1", "llama-dora", "llama-all-last1", "", "llama-qvdown-head"}
			mlxtest.Do(t, func() error {
				m, err := models.Load(tinyModel(t, model), models.LoadOptions{Adapters: specs})
				if err != nil {
					return err
				}
				defer m.Close()
				base, ok := m.(models.Adapted)
				if !ok {
					return fmt.Errorf("Load with adapters returned a %T, not an Adapted model", m)
				}
				prompts := make([][]int32, len(rows))
				for r := range rows {
					prompts[r] = prompt
					if r >= 3 {
						prompts[r] = rowIDs(5+3*r, r, 512)
					}
				}
				const steps = 24
				type out struct {
					toks []int32
					lps  []float32
				}
				run := func(b *gen.Batch, r int, res *out) error {
					v, err := base.WithAdapter(rows[r])
					if err != nil {
						return err
					}
					return b.Add(gen.Row{
						Prompt: prompts[r], Caches: v.NewCaches(kv.Options{}),
						Options: gen.Options{MaxTokens: steps, Logprobs: func(l gen.Logprob) { res.lps = append(res.lps, l.Logprob) }},
						Emit:    func(tok int32) error { res.toks = append(res.toks, tok); return nil },
					})
				}
				drain := func(b *gen.Batch) error {
					for b.Len() > 0 {
						if err := b.Step(); err != nil {
							return err
						}
					}
					return nil
				}
				solo := make([]out, len(rows))
				for r := range rows {
					b := gen.NewBatch(m)
					if err := run(b, r, &solo[r]); err != nil {
						return err
					}
					if err := drain(b); err != nil {
						return err
					}
				}
				batched := make([]out, len(rows))
				b := gen.NewBatch(m)
				for r := range rows {
					if err := run(b, r, &batched[r]); err != nil {
						return err
					}
				}
				if err := drain(b); err != nil {
					return err
				}
				var bad []string
				for r, a := range rows {
					if !reflect.DeepEqual(solo[r], batched[r]) {
						bad = append(bad, fmt.Sprintf("row %d (adapter %q): batched %v, alone %v", r, a, batched[r].toks, solo[r].toks))
					}
					if r < 3 && a != "" && !reflect.DeepEqual(solo[r].toks, want[a][:steps]) {
						bad = append(bad, fmt.Sprintf("row %d (adapter %q): tokens %v, mlx-lm's %v", r, a, solo[r].toks, want[a][:steps]))
					}
					if len(solo[r].toks) != steps || len(solo[r].lps) != steps {
						bad = append(bad, fmt.Sprintf("row %d: %d tokens and %d logprobs, want %d", r, len(solo[r].toks), len(solo[r].lps), steps))
					}
				}
				if len(bad) > 0 {
					return fmt.Errorf("%s", strings.Join(bad, "\n"))
				}
				return nil
			})
		})
	}
}
