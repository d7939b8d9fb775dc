package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mlxgo/mlxgo/gen"
	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/internal/testenv"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models"
)

// TestPromptCacheRecurrent: a hybrid model's Gated DeltaNet state (kv.Arrays)
// cannot be trimmed, so the prompt cache serves a prompt from an entry only
// when the entry is a prefix of it: the next turn of a sequence is served
// (every token the caches hold), a prompt that leaves the sequence part way
// is not (that would need a trim), and every reply, at one row and under
// batching, is the reply of a runner without a prompt cache.
func TestPromptCacheRecurrent(t *testing.T) {
	mlxtest.Need(t)
	dir := filepath.Join(testenv.RepoRoot(), ".cache", "oracle", "models", "qwen3_5-bf16")
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		testenv.Missing(t, "oracle model qwen3_5-bf16", "make oracle (models/testdata/oracle/make_tiny.py)")
	}
	var m models.Model
	if err := mlx.Do(func() (err error) { m, err = models.Load(dir, models.LoadOptions{}); return err }); err != nil {
		t.Fatal(err)
	}
	defer mlx.Do(func() error { return m.Close() })
	ids := func(n, seed int) []int32 {
		p := make([]int32, n)
		for i := range p {
			p[i] = int32((i*37 + seed*11 + 5) % 512)
		}
		return p
	}
	const maxTokens = 6
	run := func(r *MLXRunner, prompt []int32) ([]int32, Result) {
		t.Helper()
		var out []int32
		var res Result
		var runErr error
		finished := false
		err := r.Add(context.Background(), prompt, gen.Options{MaxTokens: maxTokens}, nil,
			func(tk int32) error { out = append(out, tk); return nil },
			func(rr Result, err error) { res, runErr, finished = rr, err, true })
		if err != nil {
			t.Fatal(err)
		}
		for steps := 0; !finished; steps++ {
			if steps > 100 {
				t.Fatal("the row did not finish")
			}
			if err := r.Step(); err != nil {
				t.Fatal(err)
			}
		}
		if runErr != nil || len(out) != maxTokens {
			t.Fatalf("%d tokens, error %v; want %d tokens", len(out), runErr, maxTokens)
		}
		return out, res
	}
	for _, rows := range []int{1, 4} {
		t.Run(fmt.Sprintf("rows%d", rows), func(t *testing.T) {
			cache := NewPromptCache(64 << 20)
			defer mlx.Do(func() error { cache.Clear(); return nil })
			cached := &MLXRunner{Model: m, Cache: cache, BatchRows: rows}
			plain := &MLXRunner{Model: m, BatchRows: rows}
			defer cached.Abort(nil)
			defer plain.Abort(nil)

			p1 := ids(20, 1)
			out1, res := run(cached, p1)
			if want, _ := run(plain, p1); !slices.Equal(out1, want) || res.CachedTokens != 0 {
				t.Fatalf("turn 1: %v (%d cached), without a prompt cache %v", out1, res.CachedTokens, want)
			}
			// The caches went back holding the prompt and all but the last
			// emitted token (never fed back): the next turn extends them.
			p2 := append(append(slices.Clone(p1), out1...), ids(5, 2)...)
			out2, res := run(cached, p2)
			if n := len(p1) + maxTokens - 1; res.CachedTokens != n {
				t.Errorf("turn 2 served %d tokens from the cache, want %d", res.CachedTokens, n)
			}
			if want, _ := run(plain, p2); !slices.Equal(out2, want) {
				t.Errorf("turn 2: %v from the prompt cache, %v without", out2, want)
			}
			// Sharing 10 tokens with the cached sequence but not all of it:
			// the state cannot go back to token 10.
			p3 := append(slices.Clone(p1[:10]), ids(8, 3)...)
			out3, res := run(cached, p3)
			if res.CachedTokens != 0 {
				t.Errorf("a prompt leaving the cached sequence was served %d tokens from a recurrent cache", res.CachedTokens)
			}
			if want, _ := run(plain, p3); !slices.Equal(out3, want) {
				t.Errorf("turn 3: %v with the prompt cache, %v without", out3, want)
			}
			if cache.Len() != 2 {
				t.Errorf("the prompt cache holds %d sequences, want 2 (turn 2's and turn 3's)", cache.Len())
			}
			if rows == 1 {
				return
			}
			// Rows decoding together (ForwardRows over each row's own
			// state), one of them from the cached turn 2.
			prompts := [][]int32{ids(7, 4), append(append(slices.Clone(p2), out2...), ids(3, 5)...), ids(15, 6)}
			outs := make([][]int32, len(prompts))
			left := len(prompts)
			for i, p := range prompts {
				err := cached.Add(context.Background(), p, gen.Options{MaxTokens: maxTokens}, nil,
					func(tk int32) error { outs[i] = append(outs[i], tk); return nil },
					func(Result, error) { left-- })
				if err != nil {
					t.Fatal(err)
				}
			}
			most := 0
			for steps := 0; left > 0; steps++ {
				if steps > 200 {
					t.Fatal("the rows did not finish")
				}
				if err := cached.Step(); err != nil {
					t.Fatal(err)
				}
				most = max(most, cached.decoding)
			}
			if most < 2 {
				t.Errorf("at most %d rows decoded together, want several", most)
			}
			for i, p := range prompts {
				if want, _ := run(plain, p); !slices.Equal(outs[i], want) {
					t.Errorf("row %d of %d together: %v, alone without a prompt cache %v", i, len(prompts), outs[i], want)
				}
			}
		})
	}
}
