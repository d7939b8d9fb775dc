package gen

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
)

// TestGenerateCallerCaches: Generate continues caches that hold a prefix
// exactly as it continues its own prefill of that prefix, counts the prefix
// against the context, and leaves the caches to the caller holding what it
// fed them.
func TestGenerateCallerCaches(t *testing.T) {
	m := loadTiny(t, "llama-bf16")
	prompt := promptIDs(12, 256)
	collect := func(o Options, p []int32) ([]int32, error) {
		var out []int32
		_, err := Generate(context.Background(), m, p, o, func(tok int32) error {
			out = append(out, tok)
			return nil
		})
		return out, err
	}
	mlxtest.Do(t, func() error {
		want, err := collect(Options{MaxTokens: 6}, prompt)
		if err != nil {
			return err
		}
		caches := m.NewCaches(kv.Options{})
		defer kv.FreeAll(caches)
		if err := mlx.Eval(m.Forward(mlx.FromSlice(prompt[:8], 1, 8), caches)); err != nil {
			return err
		}
		got, err := collect(Options{MaxTokens: 6, Caches: caches}, prompt[8:])
		if err != nil {
			return err
		}
		if !slices.Equal(got, want) {
			t.Errorf("from a cached prefix: %v, want %v (the whole prompt)", got, want)
		}
		// All but the last emitted token were fed back; the caches are
		// still usable (Generate did not free them).
		if off := caches[0].Offset(); off != len(prompt)+len(want)-1 {
			t.Errorf("caches hold %d tokens, want %d", off, len(prompt)+len(want)-1)
		}
		if _, err := collect(Options{MaxTokens: 1, Caches: caches, ContextLength: caches[0].Offset() + 1}, []int32{1, 2}); !errors.Is(err, ErrContext) {
			t.Errorf("prefix + prompt over the context: err %v, want ErrContext", err)
		}
		return nil
	})
}
