package bert

import (
	"fmt"
	"math"

	"github.com/mlxgo/mlxgo/mlx"
)

// Forward runs token ids [B, L] (int32) whose valid positions are given by
// mask [B, L] (bool, true = token; nil: all valid) and returns the last
// hidden state [B, L, hidden] in float32. Token type ids are all 0, as
// sentence-transformers passes them for single texts. Padded positions get
// values but no valid position attends to them, so a padded row equals the
// same row alone up to float rounding.
func (m *Model) Forward(ids, mask *mlx.Array) *mlx.Array {
	if err := ids.Err(); err != nil {
		return ids
	}
	if ids.Ndim() != 2 {
		return mlx.ErrorArray(fmt.Errorf("cannot run bert: token ids of shape %v, want [batch, length]", ids.Shape()))
	}
	b, n := ids.Dim(0), ids.Dim(1)
	if n > m.cfg.MaxPositionEmbeddings {
		return mlx.ErrorArray(fmt.Errorf("cannot run bert: %d tokens, the model takes at most %d", n, m.cfg.MaxPositionEmbeddings))
	}
	if mask != nil && !equalShape(mask.Shape(), []int{b, n}) {
		return mlx.ErrorArray(fmt.Errorf("cannot run bert: mask of shape %v, want [%d %d]", mask.Shape(), b, n))
	}
	// Only the hidden state leaves: intermediate handles would keep MLX
	// from freeing activations while it is evaluated.
	s := mlx.NewScope()
	defer s.Close()
	out := m.forward(ids, mask)
	s.Keep(out)
	return out
}

func (m *Model) forward(ids, mask *mlx.Array) *mlx.Array {
	n := ids.Dim(1)
	pos := mlx.Slice(m.pos, []int{0, 0}, []int{n, m.cfg.HiddenSize})
	typ := mlx.Slice(m.tokType, []int{0, 0}, []int{1, m.cfg.HiddenSize})
	// words + token types + positions, in BertEmbeddings' order.
	h := mlx.Add(mlx.Add(mlx.Take(m.word, ids, 0), typ), pos)
	h = mlx.LayerNorm(h, m.embNorm.w, m.embNorm.b, m.eps)

	var attnMask *mlx.Array
	if mask != nil {
		// [B, 1, 1, L]: every query of a row sees that row's tokens only.
		attnMask = mlx.ExpandDims(mlx.AsType(mask, mlx.Bool), 1, 2)
	}
	for i := range m.layers {
		h = m.layers[i].apply(h, attnMask, m.cfg.NumAttentionHeads, m.eps)
	}
	return h
}

func (l *layer) apply(x, mask *mlx.Array, heads int, eps float32) *mlx.Array {
	b, n, hid := x.Dim(0), x.Dim(1), x.Dim(2)
	hd := hid / heads
	split := func(t *mlx.Array) *mlx.Array {
		return mlx.Transpose(mlx.Reshape(t, b, n, heads, hd), 0, 2, 1, 3)
	}
	q, k, v := split(l.q.apply(x)), split(l.k.apply(x)), split(l.v.apply(x))
	scale := float32(1 / math.Sqrt(float64(hd)))
	a := mlx.ScaledDotProductAttention(q, k, v, scale, mlx.MaskNone, mask, nil)
	a = mlx.Reshape(mlx.Transpose(a, 0, 2, 1, 3), b, n, hid)
	// Post-norm residuals (BertSelfOutput, BertOutput).
	h := mlx.LayerNorm(mlx.Add(l.attnOut.apply(a), x), l.attnNorm.w, l.attnNorm.b, eps)
	f := gelu(l.intermediate.apply(h))
	return mlx.LayerNorm(mlx.Add(l.out.apply(f), h), l.outNorm.w, l.outNorm.b, eps)
}

// gelu is the exact GELU, x·Φ(x) = x·(1 + erf(x/√2))/2, that BERT's "gelu" names.
func gelu(x *mlx.Array) *mlx.Array {
	e := mlx.Erf(mlx.Multiply(x, mlx.ScalarLike(float32(1/math.Sqrt2), x)))
	return mlx.Multiply(mlx.Multiply(x, mlx.Add(e, mlx.ScalarLike(1, x))), mlx.ScalarLike(0.5, x))
}

func equalShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
