package kv_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
)

// TestEachRow: over a decode batch's Rows, the recurrent part runs once per
// row on that row's slices (of arrays of any rank) with that row's own
// state, and the results come back in row order; over one cache it runs
// once on the whole arrays.
func TestEachRow(t *testing.T) {
	mlxtest.Do(t, func() error {
		rows := [][]kv.Cache{{kv.NewArrays(1)}, {kv.NewArrays(1)}, {kv.NewArrays(1)}}
		for _, r := range rows {
			defer kv.FreeAll(r)
		}
		calls := 0
		// f keeps x as the row's state and returns x + y + the row's offset.
		f := func(c kv.Cache, xs ...*mlx.Array) *mlx.Array {
			calls++
			rc := c.(kv.Recurrent)
			rc.Set(0, mlx.Contiguous(xs[0]))
			out := mlx.Add(mlx.Add(xs[0], xs[1]), mlx.Scalar(float32(c.Offset()), mlx.Float32))
			rc.Advance(1)
			return out
		}
		rows[1][0].(kv.Recurrent).Advance(10)
		x := mlx.FromSlice([]float32{1, 2, 3, 4, 5, 6}, 3, 2) // row r: [2r+1, 2r+2]
		y := mlx.FromSlice([]float32{100, 200, 300}, 3, 1, 1)
		out, err := kv.EachRow(kv.NewRows(rows, 0), f, x, mlx.Reshape(y, 3, 1)).Float32s()
		if err != nil {
			return err
		}
		if want := []float32{101, 102, 213, 214, 305, 306}; !slices.Equal(out, want) {
			return fmt.Errorf("rows gave %v, want %v", out, want)
		}
		if calls != 3 {
			return fmt.Errorf("f ran %d times over 3 rows", calls)
		}
		for r, want := range [][]float32{{1, 2}, {3, 4}, {5, 6}} {
			c := rows[r][0].(*kv.Arrays)
			v, err := c.Get(0).Float32s()
			if err != nil || !slices.Equal(v, want) || c.Get(0).Dim(0) != 1 {
				return fmt.Errorf("row %d keeps %v (%v), want its own row %v", r, v, err, want)
			}
			if c.Offset() != []int{1, 11, 1}[r] {
				return fmt.Errorf("row %d at offset %d", r, c.Offset())
			}
		}
		one := kv.NewArrays(1)
		defer one.Free()
		calls = 0
		whole, err := kv.EachRow(one, f, x, mlx.Reshape(y, 3, 1)).Float32s()
		if err != nil || calls != 1 || len(whole) != 6 || one.Get(0).Dim(0) != 3 {
			return fmt.Errorf("one cache: %d calls, %v (%v)", calls, whole, err)
		}
		return nil
	})
}
