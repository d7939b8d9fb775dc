package gen

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/internal/testenv"
	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models"
	"github.com/mlxgo/mlxgo/models/safetensors"
)

// specCase is one entry of models/testdata/oracle/speculative.py's index.
type specCase struct {
	File              string  `json:"file"`
	Target            string  `json:"target"`
	Draft             string  `json:"draft"`
	Steps             int     `json:"steps"`
	Seed              uint64  `json:"seed"`
	Temp              float64 `json:"temp"`
	TopP              float64 `json:"top_p"`
	NumDraftTokens    int     `json:"num_draft_tokens"`
	PrefillStepSize   int     `json:"prefill_step_size"`
	RepetitionPenalty float64 `json:"repetition_penalty"`
	RepetitionContext int     `json:"repetition_context_size"`
	KVBits            int     `json:"kv_bits"`
	QuantizedKVStart  *int    `json:"quantized_kv_start"`
	Drafted           int     `json:"drafted"`
	Accepted          int     `json:"accepted"`
	GreedyEqualsPlain *bool   `json:"greedy_equals_plain"`
}

// specFixture is a case's arrays.
type specFixture struct {
	prompt, tokens, fromDraft, targetRows, plain []int32
	logprobs, targetLogits, draftLogits          []float32
	vocab                                        int
}

func oracleRoot() string {
	if d := os.Getenv("MLXGO_ORACLE_DIR"); d != "" {
		return d
	}
	return filepath.Join(testenv.RepoRoot(), ".cache", "oracle")
}

func readSpecCases(t *testing.T) map[string]specCase {
	t.Helper()
	path := filepath.Join(oracleRoot(), "speculative", "index.json")
	b, err := os.ReadFile(path)
	if err != nil {
		testenv.Missing(t, "the speculative decoding oracle "+path, "make oracle (models/testdata/oracle/speculative.py)")
	}
	var idx struct {
		Cases map[string]specCase `json:"cases"`
	}
	if err := json.Unmarshal(b, &idx); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(idx.Cases) == 0 {
		t.Fatalf("%s lists no cases", path)
	}
	return idx.Cases
}

func readSpecFixture(t *testing.T, path string) specFixture {
	t.Helper()
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatalf("cannot open fixture: %v", err)
	}
	defer f.Close()
	get := func(name string, must bool) (safetensors.TensorInfo, []byte) {
		ti, ok := f.Tensor(name)
		if !ok {
			if must {
				t.Fatalf("fixture %s has no %s", path, name)
			}
			return ti, nil
		}
		return ti, f.Data(ti)
	}
	var fx specFixture
	ints := func(name string, must bool) []int32 {
		_, b := get(name, must)
		return leAs[int32](b)
	}
	floats := func(name string, must bool) []float32 {
		_, b := get(name, must)
		return leAs[float32](b)
	}
	fx.prompt, fx.tokens, fx.fromDraft = ints("prompt_ids", true), ints("tokens", true), ints("from_draft", true)
	fx.targetRows, fx.plain = ints("target_rows", true), ints("plain_tokens", false)
	fx.logprobs, fx.targetLogits, fx.draftLogits = floats("logprobs", true), floats("target_logits", true), floats("draft_logits", false)
	li, _ := get("logprobs", true)
	fx.vocab = li.Shape[1]
	return fx
}

func leAs[T int32 | float32](b []byte) []T {
	out := make([]T, len(b)/4)
	for i := range out {
		u := uint32(b[4*i]) | uint32(b[4*i+1])<<8 | uint32(b[4*i+2])<<16 | uint32(b[4*i+3])<<24
		switch p := any(&out[i]).(type) {
		case *int32:
			*p = int32(u)
		case *float32:
			*p = math.Float32frombits(u)
		}
	}
	return out
}

// recorder stands in for a model as the oracle's Recorder does: each
// Forward's output is kept (its own handle, so the caller's Free leaves it)
// with the input length.
type recorder struct {
	Model
	lens  []int
	calls []*mlx.Array
}

func (r *recorder) Forward(tokens *mlx.Array, caches []kv.Cache) *mlx.Array {
	out := r.Model.Forward(tokens, caches)
	keep := mlx.Reshape(out, out.Shape()...)
	mlx.Detach(keep)
	r.lens = append(r.lens, tokens.Dim(1))
	r.calls = append(r.calls, keep)
	return out
}

func (r *recorder) free() {
	for _, a := range r.calls {
		a.Free()
	}
}

// rows reads calls[from:] as float32: every row of each, or the last only.
func (r *recorder) rows(from int, lastOnly bool) ([]float32, error) {
	var out []float32
	for _, a := range r.calls[from:] {
		if lastOnly {
			l, v := a.Dim(1), a.Dim(2)
			a = mlx.Slice(a, []int{0, l - 1, 0}, []int{1, l, v})
		}
		f, err := mlx.ToSlice[float32](mlx.AsType(a, mlx.Float32))
		if err != nil {
			return nil, err
		}
		out = append(out, f...)
	}
	return out, nil
}

// sameBits reports the first index whose bits differ (NaN equals NaN), or -1.
func sameBits(got, want []float32) int {
	if len(got) != len(want) {
		return min(len(got), len(want))
	}
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
			return i
		}
	}
	return -1
}

func prefillCalls(promptLen, step int) int {
	n := 0
	for left := promptLen; left > 1; n++ {
		left -= min(step, left-1)
	}
	return n
}

// specRun is what one Speculative run gave.
type specRun struct {
	tokens, fromDraft []int32
	logprobs          []float32
	target, draft     []float32 // every verify row, every draft call's last row
	targetRows        []int
	st                Stats
}

func runSpeculative(t *testing.T, tc specCase, prompt []int32, keyed bool) specRun {
	t.Helper()
	root := oracleRoot()
	var got specRun
	mlxtest.Do(t, func() error {
		tm, err := models.Load(filepath.Join(root, tc.Target), models.LoadOptions{})
		if err != nil {
			return err
		}
		defer tm.Close()
		dm, err := models.Load(filepath.Join(root, tc.Draft), models.LoadOptions{})
		if err != nil {
			return err
		}
		defer dm.Close()
		tr, dr := &recorder{Model: tm}, &recorder{Model: dm}
		defer tr.free()
		defer dr.free()
		start := 5000
		if tc.QuantizedKVStart != nil {
			start = *tc.QuantizedKVStart
		}
		o := Options{
			MaxTokens:        tc.Steps,
			Sampler:          SamplerOptions{Temp: tc.Temp, TopP: tc.TopP},
			Processors:       ProcessorOptions{RepetitionPenalty: tc.RepetitionPenalty, RepetitionContextSize: tc.RepetitionContext},
			PrefillStepSize:  tc.PrefillStepSize,
			KV:               kv.Options{KVBits: tc.KVBits},
			QuantizedKVStart: start,
			VocabSize:        tm.Info().VocabSize,
		}
		var seed *uint64
		if keyed {
			seed = &tc.Seed
		} else if err := mlx.Seed(tc.Seed); err != nil {
			return err
		}
		s, err := NewSpeculative(context.Background(), tr, Draft{Model: dr, NumDraftTokens: tc.NumDraftTokens}, prompt, o, seed, func(tok int32) error {
			got.tokens = append(got.tokens, tok)
			return nil
		})
		if err != nil {
			return err
		}
		var lerr error
		s.observe = func(tok int32, fromDraft bool, lp *mlx.Array) {
			f := int32(0)
			if fromDraft {
				f = 1
			}
			got.fromDraft = append(got.fromDraft, f)
			v, err := mlx.ToSlice[float32](mlx.AsType(lp, mlx.Float32))
			if err != nil && lerr == nil {
				lerr = err
			}
			got.logprobs = append(got.logprobs, v...)
		}
		for !s.Ended() {
			s.Step()
		}
		var serr error
		if got.st, serr = s.Result(); serr != nil {
			return serr
		}
		if lerr != nil {
			return lerr
		}
		skip := prefillCalls(len(prompt), tc.PrefillStepSize)
		got.targetRows = tr.lens[skip:]
		if got.target, err = tr.rows(skip, false); err != nil {
			return err
		}
		got.draft, err = dr.rows(skip, true)
		return err
	})
	return got
}

// TestSpeculativeMatchesMLXLM runs gen.Speculative and mlx-lm's
// speculative_generate_step (speculative.py) on the same target and draft,
// prompt, seed and settings: the tokens, which of them were accepted drafts,
// the log-probabilities yielded with each, every verify call's logits (the
// rejected drafts' rows too) and every draft call's logits must be
// bit-identical. Seeded cases run twice: from MLX's global key sequence
// (mlx.Seed, as generate) and from the generation's own key (serve's seed).
// Greedy cases must also give the tokens of plain decoding.
func TestSpeculativeMatchesMLXLM(t *testing.T) {
	mlxtest.Need(t)
	cases := readSpecCases(t)
	names := make([]string, 0, len(cases))
	for n := range cases {
		names = append(names, n)
	}
	slices.Sort(names)
	var accepted, rejected, greedy int
	for _, name := range names {
		tc := cases[name]
		fx := readSpecFixture(t, filepath.Join(oracleRoot(), "speculative", tc.File))
		accepted += tc.Accepted
		rejected += tc.Drafted - tc.Accepted
		modes := []bool{false}
		if tc.Temp > 0 {
			modes = append(modes, true)
		}
		for _, keyed := range modes {
			t.Run(fmt.Sprintf("%s/keyed=%v", name, keyed), func(t *testing.T) {
				got := runSpeculative(t, tc, fx.prompt, keyed)
				if !slices.Equal(got.tokens, fx.tokens) {
					t.Fatalf("tokens differ from mlx-lm's\n got %v\nwant %v", got.tokens, fx.tokens)
				}
				if !slices.Equal(got.fromDraft, fx.fromDraft) {
					t.Fatalf("accepted drafts differ from mlx-lm's\n got %v\nwant %v", got.fromDraft, fx.fromDraft)
				}
				if i := sameBits(got.logprobs, fx.logprobs); i >= 0 {
					t.Fatalf("log-probabilities differ at token %d, id %d: %v, want %v", i/fx.vocab, i%fx.vocab, got.logprobs[i:min(i+4, len(got.logprobs))], fx.logprobs[i:min(i+4, len(fx.logprobs))])
				}
				if !slices.Equal(toInt32(got.targetRows), fx.targetRows) {
					t.Fatalf("verify calls' lengths differ\n got %v\nwant %v", got.targetRows, fx.targetRows)
				}
				if i := sameBits(got.target, fx.targetLogits); i >= 0 {
					t.Fatalf("target logits differ at verify row %d, id %d (%d floats, want %d)", i/fx.vocab, i%fx.vocab, len(got.target), len(fx.targetLogits))
				}
				if i := sameBits(got.draft, fx.draftLogits); i >= 0 {
					t.Fatalf("draft logits differ at draft call %d, id %d", i/fx.vocab, i%fx.vocab)
				}
				if got.st.AcceptedTokens != tc.Accepted || got.st.DraftTokens != tc.Drafted {
					t.Fatalf("accepted %d of %d drafts, mlx-lm %d of %d", got.st.AcceptedTokens, got.st.DraftTokens, tc.Accepted, tc.Drafted)
				}
				if tc.Temp != 0 || tc.RepetitionPenalty != 0 {
					return
				}
				// Greedy: the text of plain decoding (gen.Generate), and
				// mlx-lm's generate_step gives it too (speculative.py).
				greedy++
				plain := plainGreedy(t, tc, fx.prompt)
				if !slices.Equal(got.tokens, plain) {
					t.Fatalf("speculative greedy tokens differ from plain greedy decoding\n spec %v\nplain %v", got.tokens, plain)
				}
				if !slices.Equal(plain, fx.plain) {
					t.Fatalf("plain greedy tokens differ from mlx-lm's generate_step\n got %v\nwant %v", plain, fx.plain)
				}
			})
		}
	}
	// The suite must exercise both sides of the verify step.
	if accepted == 0 || rejected == 0 || greedy == 0 {
		t.Fatalf("the oracle's cases accept %d and reject %d drafts, %d greedy: want all", accepted, rejected, greedy)
	}
}

// plainGreedy is gen.Generate's greedy tokens for tc's target and prompt.
func plainGreedy(t *testing.T, tc specCase, prompt []int32) []int32 {
	t.Helper()
	var plain []int32
	mlxtest.Do(t, func() error {
		m, err := models.Load(filepath.Join(oracleRoot(), tc.Target), models.LoadOptions{})
		if err != nil {
			return err
		}
		defer m.Close()
		start := 5000
		if tc.QuantizedKVStart != nil {
			start = *tc.QuantizedKVStart
		}
		_, err = Generate(context.Background(), m, prompt, Options{MaxTokens: tc.Steps, PrefillStepSize: tc.PrefillStepSize,
			KV: kv.Options{KVBits: tc.KVBits}, QuantizedKVStart: start}, func(tok int32) error {
			plain = append(plain, tok)
			return nil
		})
		return err
	})
	return plain
}

func toInt32(v []int) []int32 {
	out := make([]int32, len(v))
	for i, x := range v {
		out[i] = int32(x)
	}
	return out
}
