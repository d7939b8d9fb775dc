package gen

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
)

const fakeVocab = 97

// runFake generates from a fresh fake model; emit may be nil.
func runFake(t *testing.T, prompt []int32, o Options, emit func(n int, tok int32) error) (*fakeModel, []int32, Stats, error) {
	t.Helper()
	var (
		m   *fakeModel
		out []int32
		st  Stats
		err error
	)
	mlxtest.Need(t)
	if e := mlx.Do(func() error {
		m = newFakeModel(fakeVocab, 64, 3)
		defer m.free()
		o.VocabSize = fakeVocab
		st, err = Generate(context.Background(), m, prompt, o, func(tok int32) error {
			out = append(out, tok)
			if emit != nil {
				return emit(len(out), tok)
			}
			return nil
		})
		return nil
	}); e != nil {
		t.Fatal(e)
	}
	return m, out, st, err
}

func seq(n int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32((i*7 + 1) % fakeVocab)
	}
	return p
}

// TestPrefillSplitAndFeeding checks generate_step's call pattern: prefill
// chunks of min(step, remaining-1), the last prompt token alone, then one
// call per generated token fed the token just sampled.
func TestPrefillSplitAndFeeding(t *testing.T) {
	for _, tc := range []struct {
		name   string
		prompt int
		step   int
		chunks []int
	}{
		{"one token", 1, 0, nil},
		{"short prompt default step", 10, 0, []int{9}},
		{"step 4", 10, 4, []int{4, 4, 1}},
		{"step divides", 9, 4, []int{4, 4}},
		{"step 1", 4, 1, []int{1, 1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const maxTokens = 6
			m, out, st, err := runFake(t, seq(tc.prompt), Options{MaxTokens: maxTokens, PrefillStepSize: tc.step}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(out) != maxTokens || st.GeneratedTokens != maxTokens || st.FinishReason != FinishLength {
				t.Fatalf("%d tokens (stats %d, %s), want %d, length", len(out), st.GeneratedTokens, st.FinishReason, maxTokens)
			}
			var lens []int
			offset := 0
			for i, c := range m.calls {
				if c.offset != offset {
					t.Fatalf("call %d at cache offset %d, want %d", i, c.offset, offset)
				}
				offset += len(c.tokens)
				lens = append(lens, len(c.tokens))
			}
			// The prompt's chunks, its last token, then maxTokens-1 decode
			// calls (the token after the last one is never computed).
			want := append(append([]int{}, tc.chunks...), 1)
			for range maxTokens - 1 {
				want = append(want, 1)
			}
			if !slices.Equal(lens, want) {
				t.Fatalf("call lengths %v, want %v", lens, want)
			}
			var fed []int32
			for _, c := range m.calls {
				fed = append(fed, c.tokens...)
			}
			if wantFed := append(seq(tc.prompt), out[:maxTokens-1]...); !slices.Equal(fed, wantFed) {
				t.Fatalf("fed %v, want prompt then generated tokens %v", fed, wantFed)
			}
		})
	}
}

// TestStopConditions: EOS (not emitted), ErrStop from emit, cancellation,
// the context length, and errors that must not start generation.
func TestStopConditions(t *testing.T) {
	_, ref, _, err := runFake(t, seq(5), Options{MaxTokens: 12}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cancelAt := 3
	for _, tc := range []struct {
		name   string
		prompt int
		o      Options
		emit   func(n int, tok int32) error
		want   int    // tokens emitted
		finish string // FinishReason
		err    error  // errors.Is target, nil for success
	}{
		{"eos", 5, Options{MaxTokens: 12, EOS: []int32{ref[4]}}, nil, slices.Index(ref, ref[4]), FinishStop, nil},
		{"stop from emit", 5, Options{MaxTokens: 12}, func(n int, _ int32) error {
			if n == 7 {
				return ErrStop
			}
			return nil
		}, 7, FinishStop, nil},
		{"emit error", 5, Options{MaxTokens: 12}, func(n int, _ int32) error { return fmt.Errorf("pipe closed") }, 1, "", nil},
		{"context bounds generation", 5, Options{ContextLength: 9}, nil, 4, FinishLength, nil},
		{"prompt fills context", 5, Options{ContextLength: 5}, nil, 0, "", ErrContext},
		{"prompt too long", 10, Options{ContextLength: 9, MaxTokens: 3}, nil, 0, "", ErrContext},
		{"prompt fits with max tokens", 9, Options{ContextLength: 9, MaxTokens: 3}, nil, 3, FinishLength, nil},
		{"cancelled", 5, Options{MaxTokens: 12}, nil, cancelAt, FinishCancelled, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			emit := tc.emit
			if tc.finish == FinishCancelled {
				emit = func(n int, _ int32) error {
					if n == cancelAt {
						cancel()
					}
					return nil
				}
			}
			var out []int32
			var st Stats
			var gerr error
			mlxtest.Need(t)
			if err := mlx.Do(func() error {
				m := newFakeModel(fakeVocab, 64, 3)
				defer m.free()
				tc.o.VocabSize = fakeVocab
				st, gerr = Generate(ctx, m, seq(tc.prompt), tc.o, func(tok int32) error {
					out = append(out, tok)
					if emit != nil {
						return emit(len(out), tok)
					}
					return nil
				})
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.name == "emit error":
				if gerr == nil || gerr.Error() != "pipe closed" {
					t.Fatalf("error %v, want the emit error", gerr)
				}
			case tc.err != nil && !errors.Is(gerr, tc.err):
				t.Fatalf("error %v, want %v", gerr, tc.err)
			case tc.err == nil && gerr != nil:
				t.Fatal(gerr)
			}
			if len(out) != tc.want || (tc.finish != "" && st.FinishReason != tc.finish) {
				t.Fatalf("%d tokens, finish %q; want %d, %q", len(out), st.FinishReason, tc.want, tc.finish)
			}
			if tc.prompt == 5 && !slices.Equal(out, ref[:len(out)]) {
				t.Fatalf("tokens %v are not a prefix of the reference %v", out, ref)
			}
		})
	}
}

// TestNoLeaks: the number of live arrays stays flat over decode steps and
// returns to where it was when generation ends.
func TestNoLeaks(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
	}{
		{"greedy", Options{}},
		{"sampling and processors", Options{Sampler: SamplerOptions{Temp: 0.8, TopP: 0.9, TopK: 20},
			Processors: ProcessorOptions{RepetitionPenalty: 1.2, LogitBias: map[int32]float32{3: 1}}}},
		{"quantized kv", Options{KV: kv.Options{KVBits: 8}, QuantizedKVStart: 8}},
		{"rotating kv", Options{KV: kv.Options{MaxKVSize: 16}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mlxtest.Need(t)
			var before, after int64
			live := map[int]int64{}
			err := mlx.Do(func() error {
				m := newFakeModel(fakeVocab, 64, 3)
				defer m.free()
				before = mlx.LiveArrays()
				tc.o.MaxTokens, tc.o.PrefillStepSize, tc.o.VocabSize = 40, 4, fakeVocab
				_, err := Generate(context.Background(), m, seq(11), tc.o, func(tok int32) error {
					// Token 39 is the last: no step after it is queued.
					if n := len(live); n == 10 || n == 30 {
						live[n] = mlx.LiveArrays()
					} else {
						live[n] = 0
					}
					return nil
				})
				after = mlx.LiveArrays()
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if live[10] != live[30] {
				t.Fatalf("live arrays went from %d at token 10 to %d at token 30", live[10], live[30])
			}
			if before != after {
				t.Fatalf("live arrays %d before generation, %d after", before, after)
			}
		})
	}
}

// TestKVQuantizationSwitch: with KVBits set, the caches become quantized in
// the step at which their offset reaches QuantizedKVStart, as
// maybe_quantize_kv_cache does inside generate_step.
func TestKVQuantizationSwitch(t *testing.T) {
	for _, start := range []int{0, 3, 6, 9} {
		t.Run(fmt.Sprint("start", start), func(t *testing.T) {
			m, _, _, err := runFake(t, seq(4), Options{MaxTokens: 8, KV: kv.Options{KVBits: 4}, QuantizedKVStart: start}, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i, c := range m.calls {
				// The cache kind as the call found it: quantized once an
				// earlier call left the offset at or past start.
				want := "KVCache"
				if i > 0 && c.offset >= start {
					want = "QuantizedKVCache"
				}
				if c.caches[0] != want {
					t.Fatalf("call %d at offset %d found %s, want %s", i, c.offset, c.caches[0], want)
				}
			}
		})
	}
}
