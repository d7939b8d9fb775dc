package kv

import "github.com/mlxgo/mlxgo/mlx"

// Recurrent is a recurrent layer's state in place of keys and values (a
// convolution's last inputs, a Gated DeltaNet state): it has a lifetime but
// no attention, and cannot be trimmed.
type Recurrent interface {
	Cache
	// Get is state slot i, nil before it is first set.
	Get(i int) *mlx.Array
	// Set replaces state slot i; the cache owns a from then on.
	Set(i int, a *mlx.Array)
	// Advance counts n more tokens seen.
	Advance(n int)
}

// Arrays is mlx-lm's ArraysCache: a fixed number of state slots.
type Arrays struct {
	slots  []*mlx.Array
	offset int
}

// NewArrays returns a state of n empty slots.
func NewArrays(n int) *Arrays { return &Arrays{slots: make([]*mlx.Array, n)} }

func (c *Arrays) Get(i int) *mlx.Array    { return c.slots[i] }
func (c *Arrays) Set(i int, a *mlx.Array) { c.slots[i] = replace(c.slots[i], a) }
func (c *Arrays) Advance(n int)           { c.offset += n }
func (c *Arrays) Offset() int             { return c.offset }
func (c *Arrays) Trimmable() bool         { return false }
func (c *Arrays) Trim(int) int            { return 0 }
func (c *Arrays) Empty() bool             { return c.slots[0] == nil }

// State is the slots that are set.
func (c *Arrays) State() []*mlx.Array {
	var out []*mlx.Array
	for _, a := range c.slots {
		if a != nil {
			out = append(out, a)
		}
	}
	return out
}

func (c *Arrays) Nbytes() int {
	n := 0
	for _, a := range c.State() {
		n += a.Nbytes()
	}
	return n
}

func (c *Arrays) Free() {
	for i, a := range c.slots {
		if a != nil {
			a.Free()
		}
		c.slots[i] = nil
	}
	c.offset = 0
}

// EachRow runs f, a recurrent layer's stateful part, on xs ([B, ...]
// arrays) with cache c. When c is a decode batch's Rows, f runs once per
// row on that row's slices of xs with that row's own cache, and the results
// are concatenated back along the first axis: each row's state is its own
// array and its result has the bits the row has alone. Otherwise it is
// f(c, xs...).
func EachRow(c Cache, f func(c Cache, xs ...*mlx.Array) *mlx.Array, xs ...*mlx.Array) *mlx.Array {
	r, ok := c.(*Rows)
	if !ok {
		return f(c, xs...)
	}
	outs := make([]*mlx.Array, len(r.rows))
	for i, rc := range r.rows {
		part := make([]*mlx.Array, len(xs))
		for j, x := range xs {
			part[j] = firstAxisRow(x, i)
		}
		outs[i] = f(rc, part...)
	}
	return mlx.Concatenate(outs, 0)
}

// firstAxisRow is x[i:i+1] on an array of any rank.
func firstAxisRow(x *mlx.Array, i int) *mlx.Array {
	sh := x.Shape()
	if len(sh) == 0 {
		return mlx.Slice(x, []int{i}, []int{i + 1}) // carries MLX's shape error
	}
	start, stop := make([]int, len(sh)), append([]int(nil), sh...)
	start[0], stop[0] = i, i+1
	return mlx.Slice(x, start, stop)
}
