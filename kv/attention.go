package kv

import (
	"math"

	"github.com/mlxgo/mlxgo/mlx"
)

// Mask is an attention mask in mlx-lm's three forms: none (the zero value),
// the "causal" string handled inside fast SDPA, or a boolean array; or, made
// by a Rows cache, one mask per row of a decode batch.
type Mask struct {
	Causal bool
	Array  *mlx.Array
	Rows   []Mask
}

// CausalMask is base.create_causal_mask: query i (at position offset+i) sees
// key j when j <= offset+i and, with a window, j > offset+i-window.
func CausalMask(n, offset, windowSize int) *mlx.Array {
	rinds := mlx.Arange(0, float64(offset+n), 1, mlx.Int32)
	linds := rinds
	if offset != 0 {
		linds = mlx.Arange(float64(offset), float64(offset+n), 1, mlx.Int32)
	}
	linds = mlx.ExpandDims(linds, 1)
	rinds = mlx.ExpandDims(rinds, 0)
	mask := mlx.GreaterEqual(linds, rinds)
	if windowSize > 0 {
		win := mlx.Less(linds, mlx.Add(rinds, mlx.ScalarInt(int64(windowSize), mlx.Int32)))
		mask = mlx.LogicalAnd(mask, win)
	}
	return mask
}

// cacheMask is cache.py's create_attention_mask (what KVCache.make_mask
// calls): a window always gives an array, even for one token.
func cacheMask(n, offset int, returnArray bool, windowSize int) Mask {
	switch {
	case windowSize > 0:
		return Mask{Array: CausalMask(n, offset, windowSize)}
	case n == 1:
		return Mask{}
	case returnArray:
		return Mask{Array: CausalMask(n, offset, 0)}
	default:
		return Mask{Causal: true}
	}
}

// AttentionMask is base.create_attention_mask for h of n tokens: the cache's
// own mask when there is a KV cache, otherwise causal (an array when a
// window is narrower than n).
func AttentionMask(n int, c Cache, windowSize int) Mask {
	if k, ok := c.(KV); ok {
		return k.MakeMask(n, windowSize, false)
	}
	if n == 1 {
		return Mask{}
	}
	if windowSize > 0 && n > windowSize {
		return Mask{Array: CausalMask(n, 0, windowSize)}
	}
	return Mask{Causal: true}
}

// lowest is mx.finfo(dt).min, what a boolean mask puts on masked scores.
func lowest(dt mlx.Dtype) float32 {
	switch dt {
	case mlx.Float16:
		return -65504
	case mlx.BFloat16:
		return mlx.BFloat16ToFloat32(0xff7f)
	default:
		return -math.MaxFloat32
	}
}

// quantizedSDPA is base.quantized_scaled_dot_product_attention: attention
// over quantized keys and values with two quantized matmuls, grouped-query
// heads folded into a broadcast axis.
func quantizedSDPA(queries *mlx.Array, keys, values QTensor, scale float32, mask Mask, q mlx.Quant) *mlx.Array {
	sh := queries.Shape()
	if len(sh) != 4 {
		return mlx.Reshape(queries, -1, 0) // carries a shape error
	}
	b, nq, l, d := sh[0], sh[1], sh[2], sh[3]
	nkv := keys[0].Dim(-3)
	repeats := nq / max(nkv, 1)

	queries = mlx.Multiply(queries, mlx.ScalarLike(scale, queries))
	if repeats > 1 {
		queries = mlx.Reshape(queries, b, nkv, repeats, l, d)
		for i := range keys {
			keys[i] = mlx.ExpandDims(keys[i], -3)
			values[i] = mlx.ExpandDims(values[i], -3)
		}
	}
	scores := mlx.QuantizedMatmul(queries, keys[0], keys[1], keys[2], true, q)
	m := mask.Array
	if mask.Causal {
		ql, kl := scores.Dim(-2), scores.Dim(-1)
		qi := mlx.Arange(float64(kl-ql), float64(kl), 1, mlx.Int32)
		ki := mlx.Arange(0, float64(kl), 1, mlx.Int32)
		m = mlx.GreaterEqual(mlx.ExpandDims(qi, 1), mlx.ExpandDims(ki, 0))
	}
	if m != nil {
		if repeats > 1 && m.Ndim() > 3 {
			m = mlx.ExpandDims(m, -3)
		}
		if m.Dtype() == mlx.Bool {
			scores = mlx.Where(m, scores, mlx.Scalar(lowest(scores.Dtype()), scores.Dtype()))
		} else {
			scores = mlx.Add(scores, m)
		}
	}
	scores = mlx.Softmax(scores, []int{-1}, true)
	out := mlx.QuantizedMatmul(scores, values[0], values[1], values[2], false, q)
	if repeats > 1 {
		out = mlx.Reshape(out, b, nq, l, d)
	}
	return out
}
