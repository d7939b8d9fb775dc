package models

import (
	"fmt"

	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
)

// Hidden runs m without its output projection and returns the final
// normalized hidden states [B, L, hidden], exactly mlx-lm's
// model.model(tokens) with no cache (causal mask): what decoder embedding
// models (Qwen3-Embedding) pool. Call it inside mlx.Do.
func Hidden(m Model, tokens *mlx.Array) *mlx.Array {
	d, ok := m.(*decoder)
	if !ok {
		return mlx.ErrorArray(fmt.Errorf("cannot take hidden states of %T", m))
	}
	if err := tokens.Err(); err != nil {
		return tokens
	}
	if tokens.Ndim() != 2 {
		return mlx.ErrorArray(fmt.Errorf("cannot run the model: token ids of shape %v, want [batch, length]", tokens.Shape()))
	}
	s := mlx.NewScope()
	defer s.Close()
	// The same steps as decoder.forward up to the final norm.
	h := d.embed.lookup(tokens)
	if d.embedMul != nil {
		h = mlx.Multiply(h, mlx.AsType(d.embedMul, h.Dtype()))
	}
	n := h.Dim(1)
	full := kv.AttentionMask(n, nil, 0)
	var sliding kv.Mask
	if d.slidingIdx >= 0 {
		sliding = kv.AttentionMask(n, nil, d.window)
	}
	for _, l := range d.layers {
		mask := full
		if l.sliding {
			mask = sliding
		}
		h = l.apply(h, mask, nil)
	}
	h = mlx.RMSNorm(h, d.norm, d.eps)
	s.Keep(h)
	return h
}
