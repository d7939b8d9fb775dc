package kv

import (
	"fmt"

	"github.com/mlxgo/mlxgo/mlx"
)

// Rows is one layer's caches for the rows of a decode batch, each row a
// sequence of its own with its own cache at its own offset, seen as one KV
// cache: a model runs the batch [B, L] through its one forward pass and only
// attention fans out. PositionOf gives RoPE every row's offset as one array
// (as mlx-lm's BatchKVCache does); MakeMask makes each row's mask as that
// row's cache makes it alone; Attend runs each row through its own cache on
// its slice of queries, keys and values and concatenates the rows back. So
// row r's result is bit-identical to running row r alone (models/rows_test.go).
// A Rows lives for one step: it owns nothing and Free frees the rows' caches.
type Rows struct{ rows []Cache }

// NewRows is layer's caches of the rows, rows[r][layer] for row r.
func NewRows(rows [][]Cache, layer int) *Rows {
	r := &Rows{rows: make([]Cache, len(rows))}
	for i, caches := range rows {
		r.rows[i] = caches[layer]
	}
	return r
}

// offsets is every row's offset, int32 [B].
func (r *Rows) offsets() *mlx.Array {
	offs := make([]int32, len(r.rows))
	for i, c := range r.rows {
		if c != nil {
			offs[i] = int32(c.Offset())
		}
	}
	return mlx.FromSlice(offs, len(offs))
}

// MakeMask is each row's mask; Attend hands row r its own.
func (r *Rows) MakeMask(n, windowSize int, returnArray bool) Mask {
	m := Mask{Rows: make([]Mask, len(r.rows))}
	for i, c := range r.rows {
		if k, ok := c.(KV); ok {
			m.Rows[i] = k.MakeMask(n, windowSize, returnArray)
		} else {
			m.Rows[i] = AttentionMask(n, c, windowSize)
		}
	}
	return m
}

// Attend runs row r through its own cache with mask.Rows[r]. Distinct slices
// for keys and values: a cache takes what it is given as its own.
func (r *Rows) Attend(queries, keys, values *mlx.Array, scale float32, mask Mask) *mlx.Array {
	return r.each(mask, func(c Cache, i int, m Mask) *mlx.Array {
		return Attention(c, row(queries, i), row(keys, i), row(values, i), scale, m)
	})
}

// each is attend(row r's cache, r, its mask) for every row, concatenated
// back along the batch: the fan-out of every attention through Rows.
func (r *Rows) each(mask Mask, attend func(c Cache, i int, m Mask) *mlx.Array) *mlx.Array {
	if len(mask.Rows) != len(r.rows) {
		return mlx.ErrorArray(fmt.Errorf("cannot attend over %d rows with %d row masks", len(r.rows), len(mask.Rows)))
	}
	outs := make([]*mlx.Array, len(r.rows))
	for i, c := range r.rows {
		outs[i] = attend(c, i, mask.Rows[i])
	}
	return mlx.Concatenate(outs, 0)
}

// row is x[r:r+1] on a [B, H, L, D] array.
func row(x *mlx.Array, r int) *mlx.Array {
	sh := x.Shape()
	if len(sh) != 4 {
		return mlx.Slice(x, []int{r}, []int{r + 1}) // carries MLX's shape error
	}
	return mlx.Slice(x, []int{r, 0, 0, 0}, []int{r + 1, sh[1], sh[2], sh[3]})
}

// Offset is the furthest row's offset.
func (r *Rows) Offset() int {
	n := 0
	for _, c := range r.rows {
		n = max(n, c.Offset())
	}
	return n
}

// Size is the most tokens any row's attention reads.
func (r *Rows) Size() int {
	n := 0
	for _, c := range r.rows {
		if k, ok := c.(KV); ok {
			n = max(n, k.Size())
		}
	}
	return n
}

func (r *Rows) State() []*mlx.Array { return States(r.rows) }
func (r *Rows) Trimmable() bool     { return Trimmable(r.rows) }
func (r *Rows) Nbytes() int         { return Nbytes(r.rows) }
func (r *Rows) Free()               { FreeAll(r.rows) }

// Trim trims every row by n and returns the fewest any row trimmed.
func (r *Rows) Trim(n int) int {
	least := n
	for _, c := range r.rows {
		least = min(least, c.Trim(n))
	}
	return least
}

func (r *Rows) Empty() bool {
	for _, c := range r.rows {
		if !c.Empty() {
			return false
		}
	}
	return true
}
