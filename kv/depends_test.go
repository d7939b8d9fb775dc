package kv_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
)

// TestDependOnArrays: a recurrent cache ties the dependency to its first
// slot (qwen3_5's and qwen3_next's cache[-1][0] = mx.depends(cache[-1][0],
// h)); the slot keeps its value, the other slots are untouched, and an empty
// cache (no state yet) cannot be tied.
func TestDependOnArrays(t *testing.T) {
	mlxtest.Do(t, func() error {
		c := kv.NewArrays(2)
		defer c.Free()
		dep := mlx.FromSlice([]float32{7}, 1)
		if kv.DependOn(c, dep) {
			return fmt.Errorf("an empty ArraysCache was tied")
		}
		c.Set(0, mlx.FromSlice([]float32{1, 2}, 1, 2))
		second := mlx.FromSlice([]float32{3}, 1)
		c.Set(1, second)
		before := c.Get(0)
		if !kv.DependOn(c, dep) {
			return fmt.Errorf("a set ArraysCache was not tied")
		}
		if c.Get(0) == before || c.Get(1) != second {
			return fmt.Errorf("slot 0 was not replaced by its depends, or slot 1 was touched")
		}
		if err := mlx.Eval(c.State()...); err != nil {
			return err
		}
		v, err := c.Get(0).Float32s()
		if err != nil || !slices.Equal(v, []float32{1, 2}) {
			return fmt.Errorf("slot 0 holds %v (%v), want [1 2]", v, err)
		}
		return nil
	})
}
