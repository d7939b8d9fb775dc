package kv

import (
	"fmt"

	"github.com/mlxgo/mlxgo/mlx"
)

// This file is the attention two newer architectures need beside Attention:
// per-head sink logits (gpt_oss) and layers that read another layer's keys
// and values instead of storing their own (gemma4's KV-shared layers). Both
// go through the cache as Attention does, so a decode batch's Rows fan out
// to each row's own cache.

// AttentionSinks is Attention with per-head attention sink logits sinks
// [heads] (mx.fast.scaled_dot_product_attention's sinks). mlx-lm's quantized
// attention takes none ("Quantized SDPA does not support attention sinks"),
// and neither does it here.
func AttentionSinks(c Cache, queries, keys, values *mlx.Array, scale float32, mask Mask, sinks *mlx.Array) *mlx.Array {
	switch c := c.(type) {
	case nil:
		return sdpaSinks(queries, keys, values, scale, mask, sinks)
	case *KVCache:
		k, v := c.Update(keys, values)
		return sdpaSinks(queries, k, v, scale, mask, sinks)
	case *Rotating:
		k, v := c.Update(keys, values)
		return sdpaSinks(queries, k, v, scale, mask, sinks)
	case *Quantized:
		return mlx.ErrorArray(fmt.Errorf("cannot attend with attention sinks over a quantized kv cache (mlx-lm: quantized SDPA does not support attention sinks)"))
	case *Rows:
		return c.each(mask, func(rc Cache, i int, m Mask) *mlx.Array {
			return AttentionSinks(rc, row(queries, i), row(keys, i), row(values, i), scale, m, sinks)
		})
	default:
		return mlx.ErrorArray(fmt.Errorf("cannot attend with attention sinks through a %T", c))
	}
}

// AttendStored is attention of queries over the keys and values c holds,
// exactly as its latest update returned them, storing nothing: a gemma4
// layer that shares the KV of an earlier layer of its kind attends to what
// that layer's update_and_fetch gave it. A quantized cache's keys are
// tuples mlx-lm's shared layers cannot attend over (it fails); so does this.
func AttendStored(c Cache, queries *mlx.Array, scale float32, mask Mask) *mlx.Array {
	switch c := c.(type) {
	case *KVCache:
		if c.keys == nil {
			return mlx.ErrorArray(fmt.Errorf("cannot attend over an empty kv cache"))
		}
		k, v := c.fetch()
		return sdpa(queries, k, v, scale, mask)
	case *Rotating:
		if c.keys == nil {
			return mlx.ErrorArray(fmt.Errorf("cannot attend over an empty kv cache"))
		}
		// update_and_fetch returns the whole ring, but the part written so
		// far while it is still growing one token at a time.
		if c.offset < c.keys.Dim(2) {
			return sdpa(queries, slice2(c.keys, 0, c.offset), slice2(c.values, 0, c.offset), scale, mask)
		}
		return sdpa(queries, c.keys.Clone(), c.values.Clone(), scale, mask)
	case *Rows:
		return c.each(mask, func(rc Cache, i int, m Mask) *mlx.Array {
			return AttendStored(rc, row(queries, i), scale, m)
		})
	case *BatchLayer:
		if c.keys == nil {
			return mlx.ErrorArray(fmt.Errorf("cannot attend over an empty decode batch"))
		}
		k, v := c.fetch()
		return sdpa(queries, k, v, scale, mask)
	default:
		return mlx.ErrorArray(fmt.Errorf("cannot attend over the keys and values of a %T (a quantized cache cannot be shared between layers)", c))
	}
}

// sdpaSinks is sdpa with sink logits.
func sdpaSinks(q, k, v *mlx.Array, scale float32, mask Mask, sinks *mlx.Array) *mlx.Array {
	switch {
	case mask.Array != nil:
		return mlx.ScaledDotProductAttention(q, k, v, scale, mlx.MaskNone, mask.Array, sinks)
	case mask.Causal:
		return mlx.ScaledDotProductAttention(q, k, v, scale, mlx.MaskCausal, nil, sinks)
	default:
		return mlx.ScaledDotProductAttention(q, k, v, scale, mlx.MaskNone, nil, sinks)
	}
}
