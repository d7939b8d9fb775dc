package gen

import (
	"slices"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
)

// TestBatchAheadPastWindow: a row whose rotating cache is past its window
// cannot have a token fed ahead trimmed off again, so by default it reads
// each token before feeding it and Done's caches hold exactly what was
// emitted; with AlwaysAhead (Generate's rows) it runs ahead anyway and the
// caches hold the token fed past the stop. The tokens are the same.
func TestBatchAheadPastWindow(t *testing.T) {
	mlxtest.Need(t)
	const stopAt = 12
	run := func(ahead bool) (out []int32, offset int) {
		err := mlx.Do(func() error {
			m := newFakeModel(fakeVocab, 64, 3)
			defer m.free()
			b := NewBatch(m)
			err := b.Add(Row{Prompt: seq(5), Options: Options{MaxTokens: 40, KV: kv.Options{MaxKVSize: 8}, VocabSize: fakeVocab},
				AlwaysAhead: ahead,
				Emit: func(tok int32) error {
					if out = append(out, tok); len(out) == stopAt {
						return ErrStop
					}
					return nil
				},
				Done: func(_ Stats, caches []kv.Cache, err error) {
					offset = caches[0].Offset()
					kv.FreeAll(caches)
				}})
			if err != nil {
				return err
			}
			for b.Len() > 0 {
				if err := b.Step(); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out, offset
	}
	exact, exactOff := run(false)
	ahead, aheadOff := run(true)
	if !slices.Equal(exact, ahead) || len(exact) != stopAt {
		t.Fatalf("tokens differ: %v read first, %v ahead", exact, ahead)
	}
	if want := 5 + stopAt - 1; exactOff != want {
		t.Errorf("read first: caches hold %d tokens, want %d (all but the last emitted)", exactOff, want)
	}
	if want := 5 + stopAt; aheadOff != want {
		t.Errorf("ahead: caches hold %d tokens, want %d (the stop token fed ahead)", aheadOff, want)
	}
}
