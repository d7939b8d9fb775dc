package kv_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
)

// TestRowsAttendEqualsEachRow: a Rows cache over rows at different offsets
// gives each row the attention its own cache gives it alone, its mask and
// its position.
func TestRowsAttendEqualsEachRow(t *testing.T) {
	mlxtest.Do(t, func() error {
		prefill := []int{3, 7}
		solo := make([]kv.Cache, len(prefill))
		batch := make([][]kv.Cache, len(prefill))
		for r, n := range prefill {
			solo[r], batch[r] = kv.NewKVCache(), []kv.Cache{kv.NewKVCache()}
			for _, c := range []kv.Cache{solo[r], batch[r][0]} {
				c.(*kv.KVCache).Update(positions(0, n, 8), positions(0, n, 8))
			}
		}
		defer kv.FreeAll(solo)
		for _, b := range batch {
			defer kv.FreeAll(b)
		}
		rows := kv.NewRows(batch, 0)
		if p := kv.PositionOf(rows); p.Rows == nil {
			return fmt.Errorf("a Rows cache has no per-row positions")
		} else if got, err := p.Rows.Int32s(); err != nil || !slices.Equal(got, []int32{3, 7}) {
			return fmt.Errorf("positions %v (%v), want [3 7]", got, err)
		}
		q := mlx.Concatenate([]*mlx.Array{positions(10, 1, 8), positions(20, 1, 8)}, 0)
		k := mlx.Concatenate([]*mlx.Array{positions(30, 1, 8), positions(40, 1, 8)}, 0)
		mask := kv.AttentionMask(1, rows, 4)
		if len(mask.Rows) != 2 {
			return fmt.Errorf("%d row masks, want 2", len(mask.Rows))
		}
		got, err := kv.Attention(rows, q, k, k, 0.5, mask).Float32s()
		if err != nil {
			return err
		}
		var want []float32
		for r := range prefill {
			one := func(x *mlx.Array) *mlx.Array { return mlx.Slice(x, []int{r, 0, 0, 0}, []int{r + 1, 1, 1, 8}) }
			out := kv.Attention(solo[r], one(q), one(k), one(k), 0.5, kv.AttentionMask(1, solo[r], 4))
			v, err := out.Float32s()
			if err != nil {
				return err
			}
			want = append(want, v...)
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("rows attend %v, each row alone %v", got, want)
		}
		if rows.Offset() != 8 || rows.Nbytes() != kv.Nbytes(solo) {
			return fmt.Errorf("offset %d nbytes %d, want 8 and %d", rows.Offset(), rows.Nbytes(), kv.Nbytes(solo))
		}
		return nil
	})
}

// TestArraysState: a recurrent state's slots live from Set to Free and are
// never trimmed; attending through it is an error, not a panic.
func TestArraysState(t *testing.T) {
	mlxtest.Do(t, func() error {
		c := kv.NewArrays(2)
		if !c.Empty() || c.State() != nil || c.Trimmable() || c.Trim(3) != 0 {
			return fmt.Errorf("new state is not empty and untrimmable")
		}
		c.Set(0, positions(0, 2, 4))
		c.Set(1, positions(0, 1, 4))
		c.Set(1, positions(5, 1, 4)) // replaces (and frees) the first
		c.Advance(2)
		if c.Empty() || len(c.State()) != 2 || c.Offset() != 2 || c.Nbytes() != (8+4)*4 {
			return fmt.Errorf("state %d arrays, offset %d, nbytes %d", len(c.State()), c.Offset(), c.Nbytes())
		}
		if v, err := c.Get(1).Float32s(); err != nil || v[0] != 5 {
			return fmt.Errorf("slot 1 holds %v (%v), want 5s", v, err)
		}
		if err := kv.Attention(c, positions(0, 1, 4), positions(0, 1, 4), positions(0, 1, 4), 1, kv.Mask{}).Err(); err == nil {
			return fmt.Errorf("attention through a recurrent state did not fail")
		}
		c.Free()
		if !c.Empty() || c.Offset() != 0 || c.Nbytes() != 0 {
			return fmt.Errorf("freed state is not empty")
		}
		return nil
	})
}
