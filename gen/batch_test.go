package gen

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/internal/testenv"
	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models"
)

// batchSpec is one row of a batch scenario and how it should end.
type batchSpec struct {
	name      string
	prompt    []int32
	prefix    int // tokens of prompt handed in as filled caches (PrefixTokens too)
	addAt     int // the Step before which it is added
	o         Options
	seed      uint64
	stopAfter int // Emit returns ErrStop with this many tokens (0: never)
	cancelAt  int // the test cancels Ctx once this many tokens came (0: never)
	eosAt     int // the reference's token near this index becomes an EOS id (0: none)
}

// batchResult is what a row produced.
type batchResult struct {
	tokens []int32
	st     Stats
	err    error
	offset int // caches[0].Offset() handed to Done
	done   int // times Done was called
}

// serialRun is the reference: Generate alone after mlx.Seed(seed), with the
// same stop rule.
func serialRun(m Model, sp batchSpec) ([]int32, Stats, error) {
	if err := mlx.Seed(sp.seed); err != nil {
		return nil, Stats{}, err
	}
	var out []int32
	st, err := Generate(context.Background(), m, sp.prompt, sp.o, func(tok int32) error {
		out = append(out, tok)
		if sp.stopAfter > 0 && len(out) == sp.stopAfter {
			return ErrStop
		}
		return nil
	})
	return out, st, err
}

// batchRun runs every spec through one Batch, adding each at its step. It
// runs on the executor and reports by returning an error.
func batchRun(m RowModel, specs []batchSpec) (res []*batchResult, maxDecoding int, err error) {
	b := NewBatch(m)
	res = make([]*batchResult, len(specs))
	cancels := make([]context.CancelFunc, len(specs))
	added := 0
	for step := 0; added < len(specs) || b.Len() > 0; step++ {
		if step > 10000 {
			return nil, 0, errors.New("the batch did not finish in 10000 steps")
		}
		for i, sp := range specs {
			if sp.addAt != step {
				continue
			}
			r := &batchResult{}
			res[i] = r
			ctx, cancel := context.WithCancel(context.Background())
			cancels[i] = cancel
			row := Row{Ctx: ctx, Prompt: sp.prompt, Options: sp.o, Seed: &sp.seed}
			if sp.prefix > 0 {
				row.Caches = m.NewCaches(sp.o.KV)
				// One chunk of prefix tokens, as Generate's first chunk is
				// when PrefillStepSize is the prefix's length.
				if err := mlx.Eval(m.Forward(mlx.FromSlice(sp.prompt[:sp.prefix], 1, sp.prefix), row.Caches)); err != nil {
					return nil, 0, err
				}
				row.Prompt, row.PrefixTokens = sp.prompt[sp.prefix:], sp.prompt[:sp.prefix]
			}
			row.Emit = func(tok int32) error {
				r.tokens = append(r.tokens, tok)
				if sp.cancelAt > 0 && len(r.tokens) == sp.cancelAt {
					cancel() // seen at the next Step, as a disconnect would be
				}
				if sp.stopAfter > 0 && len(r.tokens) == sp.stopAfter {
					return ErrStop
				}
				return nil
			}
			row.Done = func(st Stats, caches []kv.Cache, err error) {
				r.st, r.err = st, err
				r.done++
				if len(caches) > 0 {
					r.offset = caches[0].Offset()
				}
				kv.FreeAll(caches)
			}
			if err := b.Add(row); err != nil {
				return nil, 0, fmt.Errorf("row %s: %w", sp.name, err)
			}
			added++
		}
		if err := b.Step(); err != nil {
			return nil, 0, err
		}
		maxDecoding = max(maxDecoding, b.Decoding())
	}
	for _, c := range cancels {
		c()
	}
	return res, maxDecoding, nil
}

// scenario is rows of different prompt lengths added at different steps:
// one leaves early on MaxTokens, one is cancelled mid-way, one ends by
// ErrStop, one by EOS, one has a chunked prompt, one a prefix from a prompt
// cache, one a single-token prompt; sampling settings per row.
func scenario(vocab int, sample bool) []batchSpec {
	s := func(temp float64) SamplerOptions {
		if !sample {
			return SamplerOptions{}
		}
		return SamplerOptions{Temp: temp, TopP: 0.95}
	}
	o := func(max int, temp float64) Options {
		return Options{MaxTokens: max, Sampler: s(temp), VocabSize: vocab}
	}
	ids := func(n, salt int) []int32 {
		p := make([]int32, n)
		for i := range p {
			p[i] = int32((i*37 + salt*11 + 5) % vocab)
		}
		return p
	}
	specs := []batchSpec{
		{name: "long", prompt: ids(30, 1), o: o(24, 0.8), seed: 1},
		{name: "early", prompt: ids(7, 2), o: o(3, 1.0), seed: 2},
		{name: "chunked", prompt: ids(45, 3), addAt: 2, o: o(14, 0.7), seed: 3},
		{name: "cancelled", prompt: ids(12, 4), o: o(30, 0.9), seed: 4, cancelAt: 5},
		{name: "stop", prompt: ids(20, 5), addAt: 1, o: o(30, 0.8), seed: 5, stopAfter: 4},
		{name: "one-token", prompt: ids(1, 6), addAt: 5, o: o(9, 0.6), seed: 6},
		{name: "prefix", prompt: ids(26, 7), prefix: 10, addAt: 3, o: o(10, 0.8), seed: 7},
		{name: "penalty", prompt: ids(18, 8), addAt: 4, o: o(12, 0.8), seed: 8},
		{name: "eos", prompt: ids(9, 9), addAt: 6, o: o(20, 0.8), seed: 9, eosAt: 6},
	}
	specs[2].o.PrefillStepSize = 8
	specs[6].o.PrefillStepSize = 10
	specs[7].o.Processors = ProcessorOptions{RepetitionPenalty: 1.3, RepetitionContextSize: 8, PresencePenalty: 0.5, FrequencyPenalty: 0.4,
		LogitBias: map[int32]float32{7: 2, 100: -1}}
	specs[6].o.Processors = ProcessorOptions{FrequencyPenalty: 0.7, FrequencyContextSize: 30} // reads the prefix tokens
	return specs
}

// TestBatchMatchesGenerate: every row of a continuous batch produces exactly
// the tokens Generate gives it alone, greedy and with seeded sampling, on
// tiny models of each architecture (gemma3 with sliding-window layers and
// rotating caches); rows end for the right reasons and hand back caches
// holding what they ran.
func TestBatchMatchesGenerate(t *testing.T) {
	mlxtest.Need(t)
	for _, tc := range []struct {
		model  string
		sample bool
	}{
		{"llama-bf16", false},
		{"llama-bf16", true},
		{"qwen3-q4g64", true},
		{"qwen2-f32", false},
		{"gemma3_text-bf16", true},
		// gemma4: KV-shared layers without caches of their own; gpt_oss:
		// attention sinks over rotating and growable caches
		{"gemma4_text-bf16", true},
		{"gpt_oss-q4g64", false},
	} {
		t.Run(fmt.Sprintf("%s/sample=%v", tc.model, tc.sample), func(t *testing.T) {
			dir := oracleModelDir(t, tc.model)
			var (
				specs []batchSpec
				want  [][]int32
				got   []*batchResult
				rows  int
			)
			mlxtest.Do(t, func() error {
				m, err := models.Load(dir, models.LoadOptions{})
				if err != nil {
					return err
				}
				defer m.Close()
				specs = scenario(m.Info().VocabSize, tc.sample)
				for i := range specs {
					ref, _, err := serialRun(m, specs[i])
					if err != nil {
						return fmt.Errorf("serial %s: %w", specs[i].name, err)
					}
					if specs[i].eosAt > 0 {
						// The latest token at or before eosAt not seen
						// earlier becomes EOS: greedy tiny models repeat.
						k := min(specs[i].eosAt, len(ref)-1)
						for k > 0 && slices.Contains(ref[:k], ref[k]) {
							k--
						}
						if k == 0 {
							return fmt.Errorf("row %s: the reference %v has no fresh token to use as EOS", specs[i].name, ref)
						}
						specs[i].eosAt = k
						specs[i].o.EOS = []int32{ref[k]}
						ref = ref[:k]
					}
					want = append(want, ref)
				}
				got, rows, err = batchRun(m.(RowModel), specs)
				return err
			})
			if rows < 5 {
				t.Errorf("at most %d rows decoded together, want the scenario's overlap (>= 5)", rows)
			}
			for i, sp := range specs {
				checkRow(t, sp, want[i], got[i])
			}
		})
	}
}

func checkRow(t *testing.T, sp batchSpec, want []int32, r *batchResult) {
	t.Helper()
	if r.done != 1 {
		t.Errorf("row %s: Done called %d times, want once", sp.name, r.done)
	}
	total := len(sp.prompt)
	n := len(r.tokens)
	if r.st.GeneratedTokens != n || r.st.PromptTokens != total-sp.prefix {
		t.Errorf("row %s: stats say %d generated of prompt %d, want %d of %d", sp.name, r.st.GeneratedTokens, r.st.PromptTokens, n, total-sp.prefix)
	}
	if sp.cancelAt > 0 {
		if !errors.Is(r.err, context.Canceled) || r.st.FinishReason != FinishCancelled {
			t.Errorf("row %s: ended with %v (%s), want context.Canceled (cancelled)", sp.name, r.err, r.st.FinishReason)
		}
		if n < sp.cancelAt || !slices.Equal(r.tokens, want[:min(n, len(want))]) {
			t.Errorf("row %s: cancelled after %d tokens\n got %v\nwant a prefix of %v", sp.name, sp.cancelAt, r.tokens, want)
		}
		if r.offset != total+n-1 {
			t.Errorf("row %s: caches hold %d tokens, want %d", sp.name, r.offset, total+n-1)
		}
		return
	}
	if r.err != nil {
		t.Errorf("row %s: %v", sp.name, r.err)
	}
	if !slices.Equal(r.tokens, want) {
		t.Errorf("row %s: tokens differ from Generate's\n got %v\nwant %v", sp.name, r.tokens, want)
	}
	wantReason, held := FinishLength, total+n-1 // the last token is never fed back
	switch {
	case sp.eosAt > 0:
		wantReason, held = FinishStop, total+n // every emitted token was fed to sample EOS
	case sp.stopAfter > 0:
		wantReason = FinishStop
	}
	if r.st.FinishReason != wantReason {
		t.Errorf("row %s: finish %q, want %q", sp.name, r.st.FinishReason, wantReason)
	}
	if r.offset != held {
		t.Errorf("row %s: caches hold %d tokens, want %d", sp.name, r.offset, held)
	}
}

// TestBatchSmolLM2 runs three rows of the default model (Q4_1 GGUF, greedy,
// 8 tokens) through one batch: the same tokens as one at a time.
func TestBatchSmolLM2(t *testing.T) {
	path := testenv.DataFile(t, "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
	mlxtest.Need(t)
	var (
		specs []batchSpec
		want  [][]int32
		got   []*batchResult
	)
	mlxtest.Do(t, func() error {
		m, err := models.Load(path, models.LoadOptions{})
		if err != nil {
			return err
		}
		defer m.Close()
		vocab := m.Info().VocabSize
		for i, n := range []int{24, 5, 40} {
			p := make([]int32, n)
			for j := range p {
				p[j] = int32((j*7919 + i*104729 + 1) % vocab)
			}
			specs = append(specs, batchSpec{name: fmt.Sprint("row", i), prompt: p, addAt: i, o: Options{MaxTokens: 8, VocabSize: vocab}})
			ref, _, err := serialRun(m, specs[i])
			if err != nil {
				return err
			}
			want = append(want, ref)
		}
		got, _, err = batchRun(m.(RowModel), specs)
		return err
	})
	for i, sp := range specs {
		checkRow(t, sp, want[i], got[i])
	}
}
