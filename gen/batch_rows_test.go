package gen

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models"
)

// loadTiny loads a tiny oracle model on the executor; the test closes it.
func loadTiny(t *testing.T, name string) RowModel {
	t.Helper()
	dir := oracleModelDir(t, name)
	var m models.Model
	mlxtest.Do(t, func() (err error) {
		m, err = models.Load(dir, models.LoadOptions{})
		return err
	})
	t.Cleanup(func() { mlx.Do(m.Close) })
	return m.(RowModel)
}

// TestBatchAddRejects: a row Add refuses leaves nothing behind and never
// calls Done.
func TestBatchAddRejects(t *testing.T) {
	m := loadTiny(t, "llama-bf16")
	ok := []int32{1, 2, 3}
	for _, tc := range []struct {
		name string
		row  func() Row
	}{
		{"empty prompt", func() Row { return Row{} }},
		{"quantized kv", func() Row { return Row{Prompt: ok, Options: Options{KV: kv.Options{KVBits: 8}}} }},
		{"over the context", func() Row { return Row{Prompt: ok, Options: Options{ContextLength: 2}} }},
		{"no room to generate", func() Row { return Row{Prompt: ok, Options: Options{ContextLength: 3}} }},
		{"prefix over the context", func() Row {
			c := m.NewCaches(kv.Options{})
			mlx.Eval(m.Forward(mlx.FromSlice(ok, 1, 3), c))
			return Row{Prompt: ok, Caches: c, Options: Options{ContextLength: 5}}
		}},
		{"negative temperature", func() Row { return Row{Prompt: ok, Options: Options{Sampler: SamplerOptions{Temp: -1}}} }},
		{"top-k over the vocabulary", func() Row {
			return Row{Prompt: ok, Options: Options{Sampler: SamplerOptions{Temp: 1, TopK: 600}, VocabSize: 512}}
		}},
		{"logit bias id", func() Row {
			return Row{Prompt: ok, Options: Options{Processors: ProcessorOptions{LogitBias: map[int32]float32{512: 1}}, VocabSize: 512}}
		}},
		{"top logprobs", func() Row { return Row{Prompt: ok, Options: Options{TopLogprobs: MaxTopLogprobs + 1}} }},
		{"caches for another model", func() Row { return Row{Prompt: ok, Caches: []kv.Cache{kv.NewKVCache()}} }},
		{"prefix tokens without caches", func() Row { return Row{Prompt: ok, PrefixTokens: ok} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done := 0
			var err error
			n := -1
			mlxtest.Do(t, func() error {
				b := NewBatch(m)
				r := tc.row()
				r.Done = func(Stats, []kv.Cache, error) { done++ }
				err = b.Add(r)
				n = b.Len()
				kv.FreeAll(r.Caches)
				return nil
			})
			if err == nil || n != 0 || done != 0 {
				t.Fatalf("Add gave %v, Len %d, Done called %d times; want an error, 0, 0", err, n, done)
			}
		})
	}
}

// TestBatchCloseAndLeaks: rows that finish give back every array they
// made; Close ends the rows still there with ErrBatchClosed; live arrays
// stay flat while rows decode.
func TestBatchCloseAndLeaks(t *testing.T) {
	m := loadTiny(t, "gemma3_text-bf16")
	mlxtest.Need(t)
	var (
		before, after int64
		live          []int64
		errs          []error
	)
	err := mlx.Do(func() error {
		before = mlx.LiveArrays()
		b := NewBatch(m)
		for i, n := range []int{20, 3, 9} {
			err := b.Add(Row{
				Prompt:  promptIDs(n, 512),
				Options: Options{MaxTokens: 1000, Sampler: SamplerOptions{Temp: 0.7, TopK: 20}, Processors: ProcessorOptions{RepetitionPenalty: 1.1}, VocabSize: 512},
				Seed:    seedUnless(i == 2, uint64(i)), // one key from the global sequence
				Done: func(st Stats, caches []kv.Cache, err error) {
					errs = append(errs, err)
					kv.FreeAll(caches)
				},
			})
			if err != nil {
				return err
			}
		}
		for step := range 40 {
			if err := b.Step(); err != nil {
				return err
			}
			if step == 9 || step == 39 {
				live = append(live, mlx.LiveArrays())
			}
		}
		if b.Decoding() != 3 {
			return fmt.Errorf("%d rows decoding after 40 steps, want 3", b.Decoding())
		}
		b.Close()
		if b.Len() != 0 {
			return fmt.Errorf("%d rows left after Close", b.Len())
		}
		after = mlx.LiveArrays()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(errs) != 3 {
		t.Fatalf("Done called %d times, want 3", len(errs))
	}
	for _, e := range errs {
		if !errors.Is(e, ErrBatchClosed) {
			t.Fatalf("a row ended with %v, want ErrBatchClosed", e)
		}
	}
	if live[0] != live[1] {
		t.Fatalf("live arrays went from %d at step 10 to %d at step 40", live[0], live[1])
	}
	if before != after {
		t.Fatalf("live arrays %d before the batch, %d after", before, after)
	}
}

// TestBatchLogprobs: rows report the same log-probabilities (token and top
// alternatives) as Generate does alone, greedy and sampled.
func TestBatchLogprobs(t *testing.T) {
	m := loadTiny(t, "qwen3-bf16")
	type rowLP struct{ serial, batch []Logprob }
	out := make([]rowLP, 3)
	mlxtest.Do(t, func() error {
		b := NewBatch(m)
		for i := range out {
			// Row 0 greedy: its token and log-probabilities are views of
			// the batch's shared argmax and log-softmax (sampleRows).
			o := Options{MaxTokens: 6 + i, Sampler: SamplerOptions{Temp: 0.9 * float64(min(i, 1))}, TopLogprobs: 3 + i, VocabSize: 512}
			o.Logprobs = func(lp Logprob) { out[i].serial = append(out[i].serial, lp) }
			prompt := promptIDs(5+7*i, 512)
			if _, _, err := serialRun(m, batchSpec{prompt: prompt, o: o, seed: uint64(i)}); err != nil {
				return err
			}
			o.Logprobs = func(lp Logprob) { out[i].batch = append(out[i].batch, lp) }
			seed := uint64(i)
			if err := b.Add(Row{Prompt: prompt, Options: o, Seed: &seed}); err != nil {
				return err
			}
		}
		for b.Len() > 0 {
			if err := b.Step(); err != nil {
				return err
			}
		}
		return nil
	})
	for i, r := range out {
		if len(r.serial) != 6+i || !reflect.DeepEqual(r.serial, r.batch) {
			t.Errorf("row %d: log-probabilities differ\nbatch  %v\nserial %v", i, r.batch, r.serial)
		}
	}
}

// seedUnless is &seed, or nil (a key from MLX's global sequence) when none.
func seedUnless(none bool, seed uint64) *uint64 {
	if none {
		return nil
	}
	return &seed
}

// TestBatchUnseededFollowsGlobalSeed: rows without a Seed take their keys
// from MLX's global sequence, so mlx.Seed makes them reproducible, and two
// such rows draw differently.
func TestBatchUnseededFollowsGlobalSeed(t *testing.T) {
	m := loadTiny(t, "llama-bf16")
	run := func() [2][]int32 {
		var out [2][]int32
		mlxtest.Do(t, func() error {
			if err := mlx.Seed(42); err != nil {
				return err
			}
			b := NewBatch(m)
			for i := range out {
				err := b.Add(Row{Prompt: promptIDs(6, 512), Options: Options{MaxTokens: 12, Sampler: SamplerOptions{Temp: 1.5}, VocabSize: 512},
					Emit: func(tok int32) error { out[i] = append(out[i], tok); return nil }})
				if err != nil {
					return err
				}
			}
			for b.Len() > 0 {
				if err := b.Step(); err != nil {
					return err
				}
			}
			return nil
		})
		return out
	}
	a, b := run(), run()
	if !slices.Equal(a[0], b[0]) || !slices.Equal(a[1], b[1]) {
		t.Fatalf("the same global seed gave different tokens:\n%v\n%v", a, b)
	}
	if slices.Equal(a[0], a[1]) {
		t.Fatalf("two unseeded rows with one prompt drew the same tokens %v", a[0])
	}
}

// failingRows is the fake model with ForwardRows made of per-row Forward
// calls, or an error once fail is set.
type failingRows struct {
	*fakeModel
	fail bool
}

func (f *failingRows) ForwardRows(tokens *mlx.Array, rows [][]kv.Cache) *mlx.Array {
	if f.fail {
		return mlx.ErrorArray(errors.New("the accelerator fell over"))
	}
	outs := make([]*mlx.Array, len(rows))
	for r := range rows {
		outs[r] = f.Forward(mlx.Slice(tokens, []int{r, 0}, []int{r + 1, 1}), rows[r])
	}
	return mlx.Concatenate(outs, 0)
}

// TestBatchModelFailureEndsAllRows: a failed decode step ends every row,
// decoding or still waiting, with that error, and Step returns it.
func TestBatchModelFailureEndsAllRows(t *testing.T) {
	mlxtest.Need(t)
	var (
		stepErr error
		ended   []error
		left    int
	)
	err := mlx.Do(func() error {
		f := &failingRows{fakeModel: newFakeModel(fakeVocab, 64, 3)}
		defer f.free()
		b := NewBatch(f)
		add := func(n int) error {
			return b.Add(Row{Prompt: seq(n), Options: Options{MaxTokens: 100, VocabSize: fakeVocab},
				Done: func(_ Stats, c []kv.Cache, err error) { ended = append(ended, err); kv.FreeAll(c) }})
		}
		for _, n := range []int{5, 8} {
			if err := add(n); err != nil {
				return err
			}
		}
		for b.Decoding() < 2 {
			if err := b.Step(); err != nil {
				return err
			}
		}
		if err := b.Step(); err != nil { // one batched step that works
			return err
		}
		if err := add(30); err != nil {
			return err
		}
		f.fail = true
		stepErr = b.Step()
		left = b.Len()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if stepErr == nil || left != 0 || len(ended) != 3 {
		t.Fatalf("Step gave %v with %d rows left and %d ended; want an error, 0 and 3", stepErr, left, len(ended))
	}
	for _, e := range ended {
		if e == nil || e.Error() != stepErr.Error() {
			t.Fatalf("a row ended with %v, want Step's error %v", e, stepErr)
		}
	}
}
