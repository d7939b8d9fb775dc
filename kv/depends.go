package kv

import "github.com/mlxgo/mlxgo/mlx"

// DependOn ties dep to c's stored keys (mlx-lm's `cache.keys =
// mx.depends(cache.keys, h)`), or to a recurrent cache's first slot, its
// convolution state (`cache[0] = mx.depends(cache[0], h)`, as qwen3_5 and
// qwen3_next do for an ArraysCache): evaluating the cache's State evaluates
// dep too. Pipeline parallelism ties a rank's send of its hidden state to its
// last layer's cache, so a prefill chunk whose logits nobody reads (only
// kv.States is evaluated) still hands the hidden state on. It reports
// whether c is a cache it can tie to (an empty one is not).
func DependOn(c Cache, dep *mlx.Array) bool {
	switch c := c.(type) {
	case *KVCache:
		if c.keys != nil {
			c.keys = replace(c.keys, mlx.Depends(c.keys, dep))
			return true
		}
	case *Rotating:
		if c.keys != nil {
			c.keys = replace(c.keys, mlx.Depends(c.keys, dep))
			return true
		}
	case *Quantized:
		if c.keys[0] != nil {
			c.keys[0] = replace(c.keys[0], mlx.Depends(c.keys[0], dep))
			return true
		}
	case *Arrays:
		if c.slots[0] != nil {
			c.slots[0] = replace(c.slots[0], mlx.Depends(c.slots[0], dep))
			return true
		}
	case *Rows:
		ok := len(c.rows) > 0
		for _, r := range c.rows {
			ok = DependOn(r, dep) && ok
		}
		return ok
	}
	return false
}
