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
