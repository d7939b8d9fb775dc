package kv

import "github.com/mlxgo/mlxgo/mlx"

// Rotary is how an attention layer rotates its queries and keys (nn.RoPE).
type Rotary interface {
	// At rotates x [B, H, L, D] whose first position is p.
	At(x *mlx.Array, p Position) *mlx.Array
	// Spec is the rotation as mlx.CacheWrite and mlx.CacheAttend take it, or
	// false when it has no such form (then RoPEAttention composes At with
	// the cache's attention).
	Spec() (mlx.RopeSpec, bool)
}

// RoPEAttention is the middle of mlx-lm's attention layers, from the heads
// to the output projection's input:
//
//	queries = rope(queries, offset=cache.offset); keys = rope(keys, ...)
//	keys, values = cache.update_and_fetch(keys, values)
//	output = scaled_dot_product_attention(queries, keys, values, ...)
//	output.transpose(0, 2, 1, 3).reshape(B, L, -1)
//
// for queries [B, heads, L, dim], keys and values [B, kvHeads, L, dim].
// On mlxgo's CPU kernels, over a plain KV cache or a decode batch's, it is
// three graph nodes (the keys' and the values' mlx.CacheWrite, then
// mlx.CacheAttend) with the same bits; otherwise it is those ops.
func RoPEAttention(c Cache, r Rotary, queries, keys, values *mlx.Array, scale float32, mask Mask) *mlx.Array {
	if f, ok := c.(cacheAttender); ok && mask.Rows == nil && mlx.CacheAttentionOn() {
		if spec, ok := r.Spec(); ok && fusable(f, queries, keys, values, mask) {
			return f.cacheAttend(spec, queries, keys, values, scale, mask)
		}
	}
	b, l := queries.Dim(0), queries.Dim(2)
	pos := PositionOf(c)
	out := Attention(c, r.At(queries, pos), r.At(keys, pos), values, scale, mask)
	return mlx.Reshape(mlx.Transpose(out, 0, 2, 1, 3), b, l, -1)
}

// cacheAttender is a cache whose update and attention can run as
// mlx.CacheWrite and mlx.CacheAttend.
type cacheAttender interface {
	// buffers is the key and value buffers (nil when empty).
	buffers() (k, v *mlx.Array)
	cacheAttend(spec mlx.RopeSpec, queries, keys, values *mlx.Array, scale float32, mask Mask) *mlx.Array
}

// fusable: the arrays are what the composition would pass to one attention
// node with the cache's buffers, in one dtype the kernels take.
func fusable(c cacheAttender, q, k, v *mlx.Array, mask Mask) bool {
	dt := q.Dtype()
	if (dt != mlx.Float32 && dt != mlx.Float16 && dt != mlx.BFloat16) || k.Dtype() != dt || v.Dtype() != dt || q.Ndim() != 4 || k.Ndim() != 4 || v.Ndim() != 4 {
		return false
	}
	if kb, vb := c.buffers(); kb != nil && (kb.Dtype() != dt || vb.Dtype() != dt) {
		return false
	}
	return mask.Array == nil || mask.Array.Dtype() == mlx.Bool || mask.Array.Dtype() == dt
}

// grown is update_and_fetch's buffer size for n new positions after prev in
// buffers of size old (0: none), and how many of the old positions the
// grown buffers keep (the concatenation keeps them all, or the first prev
// when prev is not a whole number of steps).
func grown(prev, n, old int) (capacity, keep int) {
	if old > 0 && prev+n <= old {
		return old, old
	}
	size := (step + n - 1) / step * step
	if old == 0 {
		return size, 0
	}
	keep = old
	if prev%step != 0 {
		keep = prev
	}
	return keep + size, keep
}

// cacheAttend writes the rotated keys and the values into the buffers and
// attends over them: three nodes (mlx.CacheWrite twice, mlx.CacheAttend).
// ropeOffsets are the rows' positions (nil: offset).
func cacheAttend(kbuf, vbuf **mlx.Array, offset, keep, capacity int, spec mlx.RopeSpec, ropeOffsets,
	q, k, v *mlx.Array, scale float32, mask Mask) *mlx.Array {
	*kbuf = replace(*kbuf, mlx.CacheWrite(*kbuf, k, offset, keep, capacity, true, spec, ropeOffsets))
	*vbuf = replace(*vbuf, mlx.CacheWrite(*vbuf, v, offset, keep, capacity, false, mlx.RopeSpec{}, nil))
	return mlx.CacheAttend(q, *kbuf, *vbuf, offset+k.Dim(2), spec, ropeOffsets, scale, mask.Causal, mask.Array)
}

func (c *KVCache) buffers() (k, v *mlx.Array) { return c.keys, c.values }

func (c *KVCache) cacheAttend(spec mlx.RopeSpec, q, k, v *mlx.Array, scale float32, mask Mask) *mlx.Array {
	prev, n, old := c.offset, k.Dim(2), 0
	if c.keys != nil {
		old = c.keys.Dim(2)
	}
	capacity, keep := grown(prev, n, old)
	out := cacheAttend(&c.keys, &c.values, prev, keep, capacity, spec, nil, q, k, v, scale, mask)
	c.offset = prev + n
	return out
}

func (l *BatchLayer) buffers() (k, v *mlx.Array) { return l.keys, l.values }

// cacheAttend is Attend with the rows' rotation: each row's positions start
// at its own offset (its padding excluded), as ApplyRows rotates them.
// Growing keeps the written positions, as Attend's padRight does.
func (l *BatchLayer) cacheAttend(spec mlx.RopeSpec, q, k, v *mlx.Array, scale float32, mask Mask) *mlx.Array {
	if l.keys == nil || k.Dim(0) != l.keys.Dim(0) {
		return l.Attend(q, k, v, scale, mask) // its error
	}
	prev, n, old := l.offset, k.Dim(2), l.keys.Dim(2)
	capacity, keep := old, old
	if prev+n > old {
		capacity, keep = prev+(step+n-1)/step*step, prev
	}
	out := cacheAttend(&l.keys, &l.values, prev, keep, capacity, spec, l.offsets(), q, k, v, scale, mask)
	l.offset = prev + n
	return out
}
