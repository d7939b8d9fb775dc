package kv

import "github.com/mlxgo/mlxgo/mlx"

// step is how many positions a cache grows by at a time (cache.py's step):
// growing in blocks keeps slice_update in place for most decode steps.
const step = 256

// KVCache is mlx-lm's KVCache: keys and values in buffers that grow in
// blocks of 256 positions, written in place with slice_update.
type KVCache struct {
	keys, values *mlx.Array
	offset       int
}

// NewKVCache returns an empty growable cache.
func NewKVCache() *KVCache { return &KVCache{} }

func (c *KVCache) Offset() int { return c.offset }
func (c *KVCache) Size() int   { return c.offset }
func (c *KVCache) Empty() bool { return c.keys == nil }

// Update is update_and_fetch: it writes keys and values [B, H, L, D] at the
// current offset and returns the filled part of the buffers (new handles in
// the caller's scope; the buffers stay the cache's).
func (c *KVCache) Update(keys, values *mlx.Array) (*mlx.Array, *mlx.Array) {
	prev := c.offset
	n := keys.Dim(2)
	if c.keys == nil || prev+n > c.keys.Dim(2) {
		b, h, kd, vd := keys.Dim(0), keys.Dim(1), keys.Dim(3), values.Dim(3)
		size := (step + n - 1) / step * step
		newK := mlx.Zeros(keys.Dtype(), b, h, size, kd)
		newV := mlx.Zeros(values.Dtype(), b, h, size, vd)
		if c.keys != nil {
			k, v := c.keys, c.values
			if prev%step != 0 {
				k, v = slice2(k, 0, prev), slice2(v, 0, prev)
			}
			c.keys = replace(c.keys, mlx.Concatenate([]*mlx.Array{k, newK}, 2))
			c.values = replace(c.values, mlx.Concatenate([]*mlx.Array{v, newV}, 2))
		} else {
			c.keys, c.values = replace(nil, newK), replace(nil, newV)
		}
	}
	c.offset += n
	c.keys = replace(c.keys, setSlice2(c.keys, keys, prev, c.offset))
	c.values = replace(c.values, setSlice2(c.values, values, prev, c.offset))
	return c.fetch()
}

func (c *KVCache) fetch() (*mlx.Array, *mlx.Array) {
	if c.offset < c.keys.Dim(2) {
		return slice2(c.keys, 0, c.offset), slice2(c.values, 0, c.offset)
	}
	return c.keys.Clone(), c.values.Clone() // the caller's handles, not the cache's
}

func (c *KVCache) Attend(q, k, v *mlx.Array, scale float32, mask Mask) *mlx.Array {
	keys, values := c.Update(k, v)
	return sdpa(q, keys, values, scale, mask)
}

func (c *KVCache) MakeMask(n, windowSize int, returnArray bool) Mask {
	return cacheMask(n, c.offset, returnArray, windowSize)
}

func (c *KVCache) State() []*mlx.Array {
	if c.keys == nil {
		return nil
	}
	return []*mlx.Array{c.keys, c.values}
}

func (c *KVCache) Trimmable() bool { return true }

func (c *KVCache) Trim(n int) int {
	n = min(c.offset, n)
	c.offset -= n
	return n
}

func (c *KVCache) Nbytes() int {
	if c.keys == nil {
		return 0
	}
	return c.keys.Nbytes() + c.values.Nbytes()
}

func (c *KVCache) Free() {
	c.keys.Free()
	c.values.Free()
	c.keys, c.values, c.offset = nil, nil, 0
}

// ToQuantized is KVCache.to_quantized: the whole buffer (padding included,
// as mlx-lm does) quantized along the head dimension.
func (c *KVCache) ToQuantized(groupSize, bits int) (*Quantized, error) {
	q := NewQuantized(groupSize, bits)
	q.offset = c.offset
	if c.keys != nil {
		q.keys = quantizeOwned(c.keys, q.quant)
		q.values = quantizeOwned(c.values, q.quant)
		for _, a := range append(q.keys[:], q.values[:]...) {
			if err := a.Err(); err != nil {
				return nil, err
			}
		}
	}
	c.Free()
	return q, nil
}
