package models

import (
	"fmt"

	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
)

// ForwardPadded implements gen.PaddedModel: one forward pass over the
// [B, 1] batch whose rows sit in one kv.Batch. The layers see a KV cache
// whose positions are per row (kv.PositionOf) and whose mask hides each
// row's padding; the rest runs as for one row.
func (m *lm) ForwardPadded(tokens *mlx.Array, caches []kv.Cache) *mlx.Array {
	if err := tokens.Err(); err != nil {
		return tokens
	}
	if tokens.Ndim() != 2 || tokens.Dim(1) != 1 {
		return mlx.ErrorArray(fmt.Errorf("cannot run the model on rows: token ids of shape %v, want [rows, 1]", tokens.Shape()))
	}
	if len(caches) != m.layers {
		return mlx.ErrorArray(fmt.Errorf("cannot run the model on rows: %d caches for %d layers", len(caches), m.layers))
	}
	for i, c := range caches {
		if _, ok := c.(*kv.BatchLayer); !ok {
			return mlx.ErrorArray(fmt.Errorf("cannot run the model on rows: layer %d's cache is a %T, not a decode batch's", i, c))
		}
	}
	return m.logits(tokens, caches)
}
