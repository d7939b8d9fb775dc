package kv

import "github.com/mlxgo/mlxgo/mlx"

// Rotating is mlx-lm's RotatingKVCache: at most maxSize positions, the first
// keep of which are never evicted. Prefill chunks (L > 1) are concatenated
// in temporal order and trimmed so that every new token still sees maxSize
// positions; single decode tokens overwrite the oldest slot in place.
type Rotating struct {
	keys, values  *mlx.Array
	offset, idx   int
	keep, maxSize int
}

// NewRotating returns an empty rotating cache.
func NewRotating(maxSize, keep int) *Rotating {
	return &Rotating{maxSize: maxSize, keep: keep}
}

func (c *Rotating) Offset() int  { return c.offset }
func (c *Rotating) Size() int    { return min(c.offset, c.maxSize) }
func (c *Rotating) Empty() bool  { return c.keys == nil }
func (c *Rotating) MaxSize() int { return c.maxSize }
func (c *Rotating) Keep() int    { return c.keep }

// trim drops trimSize positions after the first keep and appends app.
func (c *Rotating) trim(trimSize int, v, app *mlx.Array) *mlx.Array {
	var parts []*mlx.Array
	if trimSize > 0 {
		parts = []*mlx.Array{slice2(v, 0, c.keep), slice2(v, trimSize+c.keep, v.Dim(2))}
	} else {
		parts = []*mlx.Array{v}
	}
	if app != nil {
		parts = append(parts, app)
	}
	return mlx.Concatenate(parts, 2)
}

// temporalOrder rearranges the ring into oldest-first order.
func (c *Rotating) temporalOrder(v *mlx.Array) *mlx.Array {
	n := v.Dim(2)
	switch {
	case c.idx == n:
		return v
	case c.idx < c.offset:
		return mlx.Concatenate([]*mlx.Array{
			slice2(v, 0, c.keep), slice2(v, c.idx, n), slice2(v, c.keep, c.idx),
		}, 2)
	default:
		return slice2(v, 0, c.idx)
	}
}

func (c *Rotating) updateConcat(keys, values *mlx.Array) (*mlx.Array, *mlx.Array) {
	if c.keys == nil {
		c.keys, c.values = replace(nil, keys), replace(nil, values)
		// keys and values now belong to the cache; hand out views the
		// caller's scope may free.
	} else {
		k, v := c.temporalOrder(c.keys), c.temporalOrder(c.values)
		c.idx = k.Dim(2)
		// At most maxSize + L - 1 positions, so every new token sees
		// maxSize of context.
		trimSize := c.idx - c.maxSize + 1
		c.keys = replace(c.keys, c.trim(trimSize, k, keys))
		c.values = replace(c.values, c.trim(trimSize, v, values))
	}
	c.offset += keys.Dim(2)
	c.idx = c.keys.Dim(2)
	return c.keys.Clone(), c.values.Clone()
}

func (c *Rotating) updateInPlace(keys, values *mlx.Array) (*mlx.Array, *mlx.Array) {
	b, h, s, kd := keys.Dim(0), keys.Dim(1), keys.Dim(2), keys.Dim(3)
	prev := c.offset
	if c.keys == nil || (prev >= c.keys.Dim(2) && c.keys.Dim(2) < c.maxSize) {
		size := min(step, c.maxSize-prev)
		newK := mlx.Zeros(keys.Dtype(), b, h, size, kd)
		newV := mlx.Zeros(values.Dtype(), b, h, size, values.Dim(3))
		if c.keys != nil {
			c.keys = replace(c.keys, mlx.Concatenate([]*mlx.Array{c.keys, newK}, 2))
			c.values = replace(c.values, mlx.Concatenate([]*mlx.Array{c.values, newV}, 2))
		} else {
			c.keys, c.values = replace(nil, newK), replace(nil, newV)
		}
		c.idx = prev
	}
	if trimSize := c.keys.Dim(2) - c.maxSize; trimSize > 0 {
		c.keys = replace(c.keys, c.trim(trimSize, c.keys, nil))
		c.values = replace(c.values, c.trim(trimSize, c.values, nil))
		c.idx = c.maxSize
	}
	if c.idx == c.maxSize {
		c.idx = c.keep // rotate
	}
	stop := min(c.idx+s, c.keys.Dim(2)) // Python slices clamp
	c.keys = replace(c.keys, setSlice2(c.keys, keys, c.idx, stop))
	c.values = replace(c.values, setSlice2(c.values, values, c.idx, stop))
	c.offset += s
	c.idx += s
	if c.offset < c.keys.Dim(2) {
		return slice2(c.keys, 0, c.offset), slice2(c.values, 0, c.offset)
	}
	return c.keys.Clone(), c.values.Clone()
}

// Update is update_and_fetch: one token in place, several by concatenation.
func (c *Rotating) Update(keys, values *mlx.Array) (*mlx.Array, *mlx.Array) {
	if keys.Dim(2) == 1 {
		return c.updateInPlace(keys, values)
	}
	return c.updateConcat(keys, values)
}

func (c *Rotating) Attend(q, k, v *mlx.Array, scale float32, mask Mask) *mlx.Array {
	keys, values := c.Update(k, v)
	return sdpa(q, keys, values, scale, mask)
}

// MakeMask is RotatingKVCache.make_mask.
func (c *Rotating) MakeMask(n, windowSize int, returnArray bool) Mask {
	if n > 1 {
		if windowSize == 0 {
			windowSize = c.maxSize
		}
		offset := min(c.maxSize-1, c.offset)
		if offset+n > windowSize || returnArray {
			return Mask{Array: CausalMask(n, offset, windowSize)}
		}
		return Mask{Causal: true}
	}
	if windowSize == 0 {
		return Mask{}
	}
	// A window narrower than the ring needs a mask even for one token.
	if c.offset >= windowSize && c.maxSize > windowSize {
		idx := c.idx
		if idx >= c.maxSize {
			idx = 0
		}
		size := c.maxSize
		if c.offset < c.maxSize {
			size = c.offset + 1
		}
		m := mlx.GreaterEqual(mlx.Arange(0, float64(size), 1, mlx.Int32), mlx.ScalarInt(int64(size-windowSize), mlx.Int32))
		return Mask{Array: roll1(m, idx+1)}
	}
	return Mask{}
}

// roll1 is mx.roll of a 1-D array by shift.
func roll1(a *mlx.Array, shift int) *mlx.Array {
	n := a.Dim(0)
	if n == 0 {
		return a
	}
	shift = ((shift % n) + n) % n
	if shift == 0 {
		return a
	}
	return mlx.Concatenate([]*mlx.Array{
		mlx.Slice(a, []int{n - shift}, []int{n}), mlx.Slice(a, []int{0}, []int{n - shift}),
	}, 0)
}

func (c *Rotating) State() []*mlx.Array {
	if c.keys == nil {
		return nil
	}
	return []*mlx.Array{c.keys, c.values}
}

// Trimmable: only while nothing has been evicted.
func (c *Rotating) Trimmable() bool { return c.offset < c.maxSize }

func (c *Rotating) Trim(n int) int {
	n = min(c.offset, n)
	c.offset -= n
	c.idx -= n
	return n
}

func (c *Rotating) Nbytes() int {
	if c.keys == nil {
		return 0
	}
	return c.keys.Nbytes() + c.values.Nbytes()
}

func (c *Rotating) Free() {
	c.keys.Free()
	c.values.Free()
	c.keys, c.values, c.offset, c.idx = nil, nil, 0, 0
}
