package nn

import (
	"slices"

	"github.com/mlxgo/mlxgo/mlx"
)

// QKV takes an attention's q_proj, k_proj and v_proj under path (packed as
// one when Projections can), for q queries and kv keys and values wide.
func (ws *Weights) QKV(path string, hidden, q, kv int, bias bool) *Projections {
	return ws.Projections([]string{path + "q_proj", path + "k_proj", path + "v_proj"}, hidden, []int{q, kv, kv}, bias)
}

// MLP is llama.py's MLP, the gated feed-forward block that llama, qwen2 and
// qwen3 share: down(silu(gate(x)) * up(x)), swiglu as one node.
type MLP struct {
	gateUp *Projections
	down   *Linear
}

// MLP takes gate_proj, up_proj (packed as one when Projections can) and
// down_proj under path.
func (ws *Weights) MLP(path string, hidden, width int, bias bool) *MLP {
	return &MLP{
		gateUp: ws.Projections([]string{path + "gate_proj", path + "up_proj"}, hidden, []int{width, width}, bias),
		down:   ws.Linear(path+"down_proj", width, hidden, bias),
	}
}

// Apply is MLP.__call__.
func (m *MLP) Apply(x *mlx.Array) *mlx.Array {
	if gu, d := m.packed(x); gu != nil {
		return mlx.PackedMLP(x, nil, 0, gu, d, nil)
	}
	return m.down.Apply(m.hidden(x))
}

// ApplyAdd is res + Apply(x), the down projection adding res (AddApply).
func (m *MLP) ApplyAdd(x, res *mlx.Array) *mlx.Array {
	if gu, d := m.packed(x); gu != nil && res.Dtype() == mlx.Float32 && sameShape(res, x) {
		return mlx.PackedMLP(x, nil, 0, gu, d, res)
	}
	return m.down.ApplyAdd(m.hidden(x), res)
}

// NormApplyAdd is res + Apply(RMSNorm(res, norm, eps)), a pre-norm block's
// MLP half (AddNormApply).
func (m *MLP) NormApplyAdd(res, norm *mlx.Array, eps float32) *mlx.Array {
	if gu, d := m.packed(res); gu != nil && norm.Dtype().IsFloat() {
		return mlx.PackedMLP(res, norm, eps, gu, d, res)
	}
	return m.ApplyAdd(mlx.RMSNorm(res, norm, eps), res)
}

// packed is the MLP's packed gate/up and down weights when the whole MLP
// can run as one node on x (mlx.PackedMLP: float32, no biases or
// adapters), else nils. One node where the norm, the gate/up matmul,
// swiglu and the down matmul with its residual were four or five: MLX's
// CPU schedules each for several microseconds whatever it computes, and
// the same kernels inside one node give the same bits.
func (m *MLP) packed(x *mlx.Array) (gateUp, down *mlx.Packed) {
	if m.gateUp.fused == nil || x.Dtype() != mlx.Float32 {
		return nil, nil
	}
	gateUp, down = m.gateUp.fused.plainPacked(), m.down.plainPacked()
	if gateUp == nil || down == nil {
		return nil, nil
	}
	return gateUp, down
}

func sameShape(a, b *mlx.Array) bool { return slices.Equal(a.Shape(), b.Shape()) }

// hidden is silu(gate(x)) * up(x). Fused, gate and up are the halves of one
// output: swiglu reads them in place, one node where two slices and the op
// were three.
func (m *MLP) hidden(x *mlx.Array) *mlx.Array {
	if y := m.gateUp.joined(x); y != nil {
		return mlx.SwiGLUHalves(y)
	}
	p := m.gateUp.Apply(x)
	return mlx.SwiGLU(p[0], p[1])
}

// Head is a model's output projection: lm_head, or the embedding's
// as_linear when tied.
type Head struct {
	embed  *Embedding
	lmHead *Linear
}

// Head takes lm_head unless tied to embed.
func (ws *Weights) Head(embed *Embedding, hidden, vocab int, tied bool) *Head {
	h := &Head{embed: embed}
	if !tied {
		h.lmHead = ws.Linear("lm_head", hidden, vocab, false)
	}
	return h
}

// Apply is the logits of hidden states x.
func (h *Head) Apply(x *mlx.Array) *mlx.Array {
	if h.lmHead != nil {
		return h.lmHead.Apply(x)
	}
	return h.embed.AsLinear(x)
}
