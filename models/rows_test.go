package models_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/internal/testenv"
	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models"
)

// tinyModel is a model built by the oracle's make_tiny.py.
func tinyModel(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join(oracleDir(), "models", name)
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		testenv.Missing(t, "oracle model "+name, "make oracle (models/testdata/oracle/make_tiny.py)")
	}
	return dir
}

// rowIDs is a prompt of n ids that differs per row.
func rowIDs(n, row, vocab int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32((i*31 + row*7 + 3) % vocab)
	}
	return p
}

// TestForwardRowsMatchesForward prefills each row to its own length (below
// and beyond gemma3's 16-token window, and past a rotating cache's size),
// then decodes several steps two ways: row by row with Forward and all rows
// at once with ForwardRows on copies of the same caches. Every row's logits
// must have the same bits.
func TestForwardRowsMatchesForward(t *testing.T) {
	mlxtest.Need(t)
	for _, tc := range []struct {
		model string
		kv    kv.Options
		lens  []int
	}{
		{"llama-f32", kv.Options{}, []int{5, 13, 30}},
		{"llama-bf16", kv.Options{}, []int{1, 9, 22, 4}},
		{"llama-q4g64", kv.Options{}, []int{7, 3}},
		{"llama-bf16", kv.Options{MaxKVSize: 16}, []int{5, 14, 30}},
		{"llama_rope3-bf16", kv.Options{}, []int{6, 17}},
		{"llama_tied-mixed36", kv.Options{}, []int{8, 2, 19}},
		{"qwen2-bf16", kv.Options{}, []int{4, 12, 20}},
		{"qwen3-bf16", kv.Options{}, []int{4, 12, 20}},
		{"qwen3-q4g64", kv.Options{}, []int{10, 3, 25}},
		{"gemma3_text-bf16", kv.Options{}, []int{5, 14, 30}},
		{"gemma3_text-f32", kv.Options{}, []int{15, 2, 33}},
		{"gemma3_text-q4g64", kv.Options{}, []int{9, 16, 40}},
		{"qwen3_moe-f32", kv.Options{}, []int{5, 13, 40}},
		{"qwen3_moe-q4g64", kv.Options{}, []int{9, 3, 33, 20}},
		{"ministral3-f32", kv.Options{}, []int{5, 17, 30}},
		{"ministral3-q4g32", kv.Options{}, []int{20, 3, 12}},
		{"mistral3-bf16", kv.Options{}, []int{4, 18, 25}},
		{"mistral3_llama-q4g64", kv.Options{}, []int{7, 3}},
		{"phi3-bf16", kv.Options{}, []int{4, 12, 20}},
		{"phi3-q4g64", kv.Options{MaxKVSize: 16}, []int{5, 14, 30}},
		{"gemma3-bf16", kv.Options{}, []int{5, 14, 30}},
		{"gemma3-q4g32", kv.Options{}, []int{20, 3, 17}},
		// Gated DeltaNet layers: each row's conv inputs and recurrent state
		// (kv.Arrays) through kv.EachRow, a row of one token from empty
		// state; --max-kv-size does not apply (make_cache)
		{"qwen3_5-bf16", kv.Options{}, []int{5, 13, 30}},
		{"qwen3_5-f32", kv.Options{MaxKVSize: 16}, []int{1, 9, 22, 4}},
		{"qwen3_5-q4g64", kv.Options{}, []int{10, 3, 25}},
		{"qwen3_next-f32", kv.Options{}, []int{5, 13, 40}},
		{"qwen3_next-q4g64", kv.Options{}, []int{9, 3, 33, 20}},
		{"qwen3_5_moe-q4g64", kv.Options{}, []int{20, 3, 12}},
		{"gpt_oss-f32", kv.Options{}, []int{5, 17, 40}},
		{"gpt_oss-q4g64", kv.Options{}, []int{20, 3, 12}},
		{"gpt_oss-mxfp4q8", kv.Options{}, []int{9, 16, 40}},
		{"minicpm-bf16", kv.Options{}, []int{4, 12, 20}},
		{"minicpm-q4g32", kv.Options{MaxKVSize: 16}, []int{5, 14, 30}},
		{"gemma4_text-bf16", kv.Options{}, []int{5, 14, 30}},
		{"gemma4_text-f32", kv.Options{}, []int{15, 2, 33}},
		{"gemma4_text-q4g64", kv.Options{}, []int{9, 16, 40}},
		{"gemma4_text_moe-f32", kv.Options{}, []int{5, 17, 40}},
		{"gemma4_text_moe-q4g32", kv.Options{}, []int{20, 3, 12}},
		{"gemma4-bf16", kv.Options{}, []int{4, 18, 25}},
		// The default model's shapes (576 hidden, 49152 vocab, Q4_1 as
		// affine group 32), converted from its GGUF by the oracle.
		{"smollm2-q4_1", kv.Options{}, []int{3, 24, 9}},
	} {
		name := fmt.Sprintf("%s/maxkv%d/rows%d", tc.model, tc.kv.MaxKVSize, len(tc.lens))
		t.Run(name, func(t *testing.T) {
			dir := tinyModel(t, tc.model)
			mlxtest.Do(t, func() error {
				m, err := models.Load(dir, models.LoadOptions{})
				if err != nil {
					return err
				}
				defer m.Close()
				rm, ok := m.(models.RowModel)
				if !ok {
					return fmt.Errorf("%T does not implement models.RowModel", m)
				}
				return compareRows(rm, tc.kv, tc.lens, 6)
			})
		})
	}
}

// compareRows runs on the executor, so it reports by returning an error:
// t.Fatal there would end the executor's goroutine.
func compareRows(m models.RowModel, o kv.Options, lens []int, steps int) error {
	vocab := m.Info().VocabSize
	serial := make([][]kv.Cache, len(lens))
	batched := make([][]kv.Cache, len(lens))
	next := make([]int32, len(lens))
	defer func() {
		for r := range lens {
			kv.FreeAll(serial[r])
			kv.FreeAll(batched[r])
		}
	}()
	for r, n := range lens {
		serial[r], batched[r] = m.NewCaches(o), m.NewCaches(o)
		prompt := rowIDs(n, r, vocab)
		// The prompt but its last token fills both copies of the caches.
		if n > 1 {
			ids := mlx.FromSlice(prompt[:n-1], 1, n-1)
			for _, c := range [][]kv.Cache{serial[r], batched[r]} {
				if err := mlx.Eval(m.Forward(ids, c)); err != nil {
					return err
				}
			}
		}
		next[r] = prompt[n-1]
	}
	for step := range steps {
		want := make([][]float32, len(lens))
		for r := range lens {
			logits := m.Forward(mlx.FromSlice(next[r:r+1], 1, 1), serial[r])
			v, err := logits.Float32s()
			if err != nil {
				return err
			}
			want[r] = v
		}
		logits := m.ForwardRows(mlx.FromSlice(next, len(next), 1), batched)
		if sh := logits.Shape(); logits.Err() == nil && (len(sh) != 3 || sh[0] != len(lens) || sh[1] != 1 || sh[2] != vocab) {
			return fmt.Errorf("ForwardRows gave logits of shape %v, want [%d 1 %d]", sh, len(lens), vocab)
		}
		got, err := logits.Float32s()
		if err != nil {
			return err
		}
		for r := range lens {
			row := got[r*vocab : (r+1)*vocab]
			if d := maxAbsDiff(row, want[r]); d != 0 {
				return fmt.Errorf("step %d row %d (prompt %d): max abs diff %g against Forward, want 0", step, r, lens[r], d)
			}
			if s, b := serial[r][0].Offset(), batched[r][0].Offset(); s != b {
				return fmt.Errorf("step %d row %d: cache offset %d after ForwardRows, %d after Forward", step, r, b, s)
			}
			next[r] = int32(argmax(want[r]))
		}
	}
	return nil
}

func maxAbsDiff(a, b []float32) float64 {
	if len(a) != len(b) {
		return float64(len(a) - len(b))
	}
	d := 0.0
	for i := range a {
		if a[i] != b[i] { // NaN != NaN counts too
			d = max(d, abs64(float64(a[i])-float64(b[i])), 1e-45)
		}
	}
	return d
}

func abs64(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

func argmax(v []float32) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}

// TestForwardRowsRejectsBadInput: shapes and cache lists that do not fit
// come back as error arrays, never a panic.
func TestForwardRowsRejectsBadInput(t *testing.T) {
	dir := tinyModel(t, "llama-bf16")
	var m models.Model
	mlxtest.Do(t, func() (err error) {
		m, err = models.Load(dir, models.LoadOptions{})
		return err
	})
	t.Cleanup(func() { mlx.Do(m.Close) })
	rm := m.(models.RowModel)
	good := func() []kv.Cache { return m.NewCaches(kv.Options{}) }
	for _, tc := range []struct {
		name   string
		tokens func() *mlx.Array
		rows   [][]kv.Cache
	}{
		{"length 2", func() *mlx.Array { return mlx.FromSlice([]int32{1, 2}, 1, 2) }, [][]kv.Cache{good()}},
		{"1-d tokens", func() *mlx.Array { return mlx.FromSlice([]int32{1, 2}, 2) }, [][]kv.Cache{good(), good()}},
		{"fewer rows than tokens", func() *mlx.Array { return mlx.FromSlice([]int32{1, 2}, 2, 1) }, [][]kv.Cache{good()}},
		{"too few layers", func() *mlx.Array { return mlx.FromSlice([]int32{1}, 1, 1) }, [][]kv.Cache{good()[:1]}},
		{"nil cache", func() *mlx.Array { return mlx.FromSlice([]int32{1}, 1, 1) }, [][]kv.Cache{{nil, kv.NewKVCache()}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			mlxtest.Do(t, func() error {
				err = rm.ForwardRows(tc.tokens(), tc.rows).Err()
				return nil
			})
			if err == nil {
				t.Fatalf("ForwardRows accepted %s", tc.name)
			}
		})
	}
}
