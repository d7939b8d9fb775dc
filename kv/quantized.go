package kv

import "github.com/mlxgo/mlxgo/mlx"

// QTensor is one quantized array as mx.quantize returns it: packed words,
// per-group scales and biases.
type QTensor [3]*mlx.Array

// Quantized is mlx-lm's QuantizedKVCache: keys and values stored with affine
// quantization along the head dimension, growing in blocks of 256.
type Quantized struct {
	keys, values QTensor
	offset       int
	quant        mlx.Quant
}

// NewQuantized returns an empty quantized cache.
func NewQuantized(groupSize, bits int) *Quantized {
	return &Quantized{quant: mlx.Quant{GroupSize: groupSize, Bits: bits, Mode: "affine"}}
}

func (c *Quantized) Offset() int      { return c.offset }
func (c *Quantized) Size() int        { return c.offset }
func (c *Quantized) Empty() bool      { return c.keys[0] == nil }
func (c *Quantized) Quant() mlx.Quant { return c.quant }

// quantizeOwned quantizes x and detaches the parts from the scopes.
func quantizeOwned(x *mlx.Array, q mlx.Quant) QTensor {
	w, s, b := mlx.Quantize(x, q)
	return QTensor{replace(nil, w), replace(nil, s), replace(nil, b)}
}

// Update is update_and_fetch: it quantizes keys and values [B, H, L, D] into
// the buffers and returns their filled part.
func (c *Quantized) Update(keys, values *mlx.Array) (QTensor, QTensor) {
	b, h, n, kd := keys.Dim(0), keys.Dim(1), keys.Dim(2), keys.Dim(3)
	vd := values.Dim(3)
	prev := c.offset
	if c.keys[0] == nil || prev+n > c.keys[0].Dim(2) {
		perWord := 32 / c.quant.Bits
		size := (step + n - 1) / step * step
		if c.keys[0] != nil {
			for _, t := range []*QTensor{&c.keys, &c.values} {
				for i, x := range t {
					if prev%step != 0 {
						x = slice2(x, 0, prev)
					}
					z := mlx.Zeros(x.Dtype(), b, h, size, x.Dim(3))
					t[i] = replace(t[i], mlx.Concatenate([]*mlx.Array{x, z}, 2))
				}
			}
		} else {
			initQ := func(dim int) QTensor {
				return QTensor{
					replace(nil, mlx.Zeros(mlx.Uint32, b, h, size, dim/perWord)),
					replace(nil, mlx.Zeros(keys.Dtype(), b, h, size, dim/c.quant.GroupSize)),
					replace(nil, mlx.Zeros(keys.Dtype(), b, h, size, dim/c.quant.GroupSize)),
				}
			}
			c.keys, c.values = initQ(kd), initQ(vd)
		}
	}
	c.offset += n
	kw, ks, kb := mlx.Quantize(keys, c.quant)
	vw, vs, vb := mlx.Quantize(values, c.quant)
	newK, newV := QTensor{kw, ks, kb}, QTensor{vw, vs, vb}
	for i := range c.keys {
		c.keys[i] = replace(c.keys[i], setSlice2(c.keys[i], newK[i], prev, c.offset))
		c.values[i] = replace(c.values[i], setSlice2(c.values[i], newV[i], prev, c.offset))
	}
	return c.fetch()
}

func (c *Quantized) fetch() (QTensor, QTensor) {
	var k, v QTensor
	full := c.offset == c.keys[0].Dim(2)
	for i := range c.keys {
		if full {
			k[i], v[i] = c.keys[i].Clone(), c.values[i].Clone()
		} else {
			k[i], v[i] = slice2(c.keys[i], 0, c.offset), slice2(c.values[i], 0, c.offset)
		}
	}
	return k, v
}

func (c *Quantized) Attend(q, k, v *mlx.Array, scale float32, mask Mask) *mlx.Array {
	keys, values := c.Update(k, v)
	return quantizedSDPA(q, keys, values, scale, mask, c.quant)
}

func (c *Quantized) MakeMask(n, windowSize int, returnArray bool) Mask {
	return cacheMask(n, c.offset, returnArray, windowSize)
}

func (c *Quantized) State() []*mlx.Array {
	if c.keys[0] == nil {
		return nil
	}
	return append(c.keys[:len(c.keys):len(c.keys)], c.values[:]...)
}

func (c *Quantized) Trimmable() bool { return true }

func (c *Quantized) Trim(n int) int {
	n = min(c.offset, n)
	c.offset -= n
	return n
}

func (c *Quantized) Nbytes() int {
	n := 0
	for i := range c.keys {
		if c.keys[i] != nil {
			n += c.keys[i].Nbytes() + c.values[i].Nbytes()
		}
	}
	return n
}

func (c *Quantized) Free() {
	for i := range c.keys {
		c.keys[i].Free()
		c.values[i].Free()
	}
	c.keys, c.values, c.offset = QTensor{}, QTensor{}, 0
}
