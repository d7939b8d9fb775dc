package models

import (
	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
)

// qkNormPlace says where an architecture normalizes queries and keys per
// head: qwen3 before moving the head axis, gemma3 after. The math is the
// same; the op graph (and so the bits) follows mlx-lm.
type qkNormPlace int

const (
	noQKNorm qkNormPlace = iota
	qkNormBeforeTranspose
	qkNormAfterTranspose
)

// attention is one layer's self-attention.
type attention struct {
	q, k, v, o     *linear
	qkv            *linear // q, k and v as one, when weightSet.linears can (then q, k, v are nil)
	headDim        int
	qNorm, kNorm   *mlx.Array
	normPlace      qkNormPlace
	eps            float32
	heads, kvHeads int
	scale          float32
	rope           *rope
}

func (a *attention) apply(x *mlx.Array, mask kv.Mask, c kv.Cache) *mlx.Array {
	b, l := x.Dim(0), x.Dim(1)
	queries, keys, values := a.project(x)
	return a.output(a.attend(queries, keys, values, mask, c), b, l)
}

// project is the per-token half of attention: the q/k/v projections and
// q/k norms, heads moved to axis 1 ([B, heads, L, dim]), before RoPE. Rows
// are independent here, so a decode batch runs it once for all rows.
func (a *attention) project(x *mlx.Array) (queries, keys, values *mlx.Array) {
	b, l := x.Dim(0), x.Dim(1)
	if a.qkv != nil {
		p := split(a.qkv.apply(x), a.heads*a.headDim, a.kvHeads*a.headDim, a.kvHeads*a.headDim)
		queries, keys, values = p[0], p[1], p[2]
	} else {
		queries, keys, values = a.q.apply(x), a.k.apply(x), a.v.apply(x)
	}
	queries = mlx.Reshape(queries, b, l, a.heads, -1)
	keys = mlx.Reshape(keys, b, l, a.kvHeads, -1)
	if a.normPlace == qkNormBeforeTranspose {
		queries = mlx.RMSNorm(queries, a.qNorm, a.eps)
		keys = mlx.RMSNorm(keys, a.kNorm, a.eps)
	}
	queries = mlx.Transpose(queries, 0, 2, 1, 3)
	keys = mlx.Transpose(keys, 0, 2, 1, 3)
	values = mlx.Transpose(mlx.Reshape(values, b, l, a.kvHeads, -1), 0, 2, 1, 3)
	if a.normPlace == qkNormAfterTranspose {
		queries = mlx.RMSNorm(queries, a.qNorm, a.eps)
		keys = mlx.RMSNorm(keys, a.kNorm, a.eps)
	}
	return queries, keys, values
}

// attend is the half that reads a cache: RoPE at the cache's offset, then
// attention through the cache. Its result is [B, heads, L, dim].
func (a *attention) attend(queries, keys, values *mlx.Array, mask kv.Mask, c kv.Cache) *mlx.Array {
	offset := 0
	if c != nil {
		offset = c.Offset()
	}
	queries = a.rope.apply(queries, offset)
	keys = a.rope.apply(keys, offset)
	return kv.Attention(c, queries, keys, values, a.scale, mask)
}

// output moves the heads back and applies the output projection.
func (a *attention) output(out *mlx.Array, b, l int) *mlx.Array {
	out = mlx.Reshape(mlx.Transpose(out, 0, 2, 1, 3), b, l, -1)
	return a.o.apply(out)
}

// mlp is the gated feed-forward block: swiglu (silu(gate)·up) or, for
// gemma, gelu_approx(gate)·up.
type mlp struct {
	gate, up, down *linear
	gateUp         *linear // gate and up as one, when weightSet.linears can (then gate, up are nil)
	width          int
	gelu           bool
}

func (m *mlp) apply(x *mlx.Array) *mlx.Array {
	var g, u *mlx.Array
	if m.gateUp != nil {
		p := split(m.gateUp.apply(x), m.width, m.width)
		g, u = p[0], p[1]
	} else {
		g, u = m.gate.apply(x), m.up.apply(x)
	}
	var h *mlx.Array
	if m.gelu {
		h = mlx.Multiply(mlx.GeluApprox(g), u)
	} else {
		h = mlx.SwiGLU(g, u)
	}
	return m.down.apply(h)
}

// block is one transformer layer. Llama-style blocks have two norms; gemma3
// adds a norm after attention and after the MLP (sandwich norms).
type block struct {
	attn                    *attention
	mlp                     *mlp
	inputNorm, postAttnNorm *mlx.Array
	preFFNorm, postFFNorm   *mlx.Array // gemma3 only
	eps                     float32
	sandwich                bool
	sliding                 bool
}

func (b *block) apply(x *mlx.Array, mask kv.Mask, c kv.Cache) *mlx.Array {
	return b.around(x, func(n *mlx.Array) *mlx.Array { return b.attn.apply(n, mask, c) })
}

// around is the block with attention abstracted: the norms, residuals and
// MLP around attn, which maps the normed input to attention's output. A
// decode batch passes an attn that attends row by row (rows.go).
func (b *block) around(x *mlx.Array, attn func(*mlx.Array) *mlx.Array) *mlx.Array {
	r := attn(mlx.RMSNorm(x, b.inputNorm, b.eps))
	if !b.sandwich {
		h := mlx.Add(x, r)
		r = b.mlp.apply(mlx.RMSNorm(h, b.postAttnNorm, b.eps))
		return mlx.Add(h, r)
	}
	h := clipResidual(x, mlx.RMSNorm(r, b.postAttnNorm, b.eps))
	r = b.mlp.apply(mlx.RMSNorm(h, b.preFFNorm, b.eps))
	return clipResidual(h, mlx.RMSNorm(r, b.postFFNorm, b.eps))
}

// clipResidual is gemma3's residual add: plain for bfloat16 and float32,
// computed in float32 and clipped to the float16 range for float16.
func clipResidual(x, y *mlx.Array) *mlx.Array {
	if x.Dtype() != mlx.Float16 {
		return mlx.Add(x, y)
	}
	bound := float32(65504)
	s := mlx.Add(mlx.AsType(x, mlx.Float32), mlx.AsType(y, mlx.Float32))
	s = mlx.Clip(s, mlx.Scalar(-bound, mlx.Float32), mlx.Scalar(bound, mlx.Float32))
	return mlx.AsType(s, mlx.Float16)
}
