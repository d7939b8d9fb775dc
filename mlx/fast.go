package mlx

// RMSNorm is mx.fast.rms_norm: x / sqrt(mean(x²) + eps) * weight, with
// weight optional (nil).
func RMSNorm(x, weight *Array, eps float32) *Array {
	c := begin("rms_norm")
	hx, hw := c.in(x), c.opt(weight)
	return c.do(func(out *uintptr) int32 { return fn.rmsNorm(hx, hw, &eps, out) })
}

// LayerNorm is mx.fast.layer_norm; weight and bias may be nil.
func LayerNorm(x, weight, bias *Array, eps float32) *Array {
	c := begin("layer_norm")
	hx, hw, hb := c.in(x), c.opt(weight), c.opt(bias)
	return c.do(func(out *uintptr) int32 { return fn.layerNorm(hx, hw, hb, &eps, out) })
}

// RoPE is mx.fast.rope: rotary embeddings over the first dims features of the
// last axis, positions starting at offset. With freqs nil the frequencies
// come from base; with freqs given (Llama 3 scaling) base is not used, as MLX
// accepts only one of them. traditional rotates adjacent pairs rather than
// the two halves.
func RoPE(x *Array, dims int, traditional bool, base, scale float32, offset int, freqs *Array) *Array {
	c := begin("rope")
	hx, hf := c.in(x), c.opt(freqs)
	return c.do(func(out *uintptr) int32 {
		return fn.rope(hx, int32(dims), flag(traditional), flag(freqs == nil), &base, &scale, int32(offset), hf, out)
	})
}

// RoPEDynamic is RoPE with the offset held in an array (a scalar, or one
// offset per batch row), so the graph does not change as positions advance.
func RoPEDynamic(x *Array, dims int, traditional bool, base, scale float32, offset, freqs *Array) *Array {
	c := begin("rope")
	hx, ho, hf := c.in(x), c.in(offset), c.opt(freqs)
	return c.do(func(out *uintptr) int32 {
		return fn.ropeDynamic(hx, int32(dims), flag(traditional), flag(freqs == nil), &base, &scale, ho, hf, out)
	})
}

// Attention masks for ScaledDotProductAttention.
const (
	MaskNone   = ""       // no mask, or the array mask passed beside it
	MaskCausal = "causal" // query i sees keys up to i (aligned at the end)
)

// ScaledDotProductAttention is mx.fast.scaled_dot_product_attention:
// softmax(q·kᵀ·scale + mask)·v over [batch, heads, seq, dim] arrays, with
// grouped-query heads handled inside. maskMode is MaskNone or MaskCausal;
// mask is an additive or boolean array mask (with MaskNone) or nil; sinks,
// per-head attention sink logits, may be nil.
func ScaledDotProductAttention(q, k, v *Array, scale float32, maskMode string, mask, sinks *Array) *Array {
	c := begin("scaled_dot_product_attention")
	hq, hk, hv, hm, hs := c.in(q), c.in(k), c.in(v), c.opt(mask), c.opt(sinks)
	return c.do(func(out *uintptr) int32 { return fn.sdpa(hq, hk, hv, &scale, maskMode, hm, hs, out) })
}

// GeluApprox is mlx.nn.gelu_approx, 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))),
// built op for op as mlx-lm's Python builds it. On a GPU it is compiled, as
// mlx-lm's is: MLX's fused kernel for it computes differently from the ops
// run one by one (native/shim/compiled.cpp).
func GeluApprox(x *Array) *Array {
	c := begin("gelu_approx")
	hx := c.in(x)
	return c.do(func(out *uintptr) int32 { return fn.geluApprox(hx, out) })
}

// GeGLU is mlx-lm's gemma4 geglu, gelu_approx(gate) * x. On a GPU it is
// compiled as one function, as mlx-lm's is: MLX fuses the product into
// gelu's kernel, which rounds differently from GeluApprox then Multiply.
func GeGLU(gate, x *Array) *Array {
	c := begin("geglu")
	hg, hx := c.in(gate), c.in(x)
	return c.do(func(out *uintptr) int32 { return fn.geglu(hg, hx, out) })
}

// ComputeG is mlx-lm's gated_delta.py compute_g, exp(-exp(float32(aLog)) *
// softplus(a + dtBias)) with softplus MLX's logaddexp(x, 0), compiled on a
// GPU as mlx-lm's is (models/nn uses it there; on the CPU it builds the same
// bits from ops).
func ComputeG(aLog, a, dtBias *Array) *Array {
	c := begin("compute_g")
	hl, ha, hd := c.in(aLog), c.in(a), c.in(dtBias)
	return c.do(func(out *uintptr) int32 { return fn.computeG(hl, ha, hd, out) })
}

// GatedDeltaStep is mlx-lm's _gated_delta_step_ops with a scalar gate per
// head and no mask (q, k [B, H, Dk], v [B, H, Dv], g and beta [B, H], state
// [B, H, Dv, Dk]): y in q's dtype and the new state, compiled on a GPU as
// mlx-lm's is.
func GatedDeltaStep(q, k, v, g, beta, state *Array) (y, newState *Array) {
	c := begin("gated_delta_step")
	h := c.ins([]*Array{q, k, v, g, beta, state})
	out := c.many(2, func(out *uintptr) int32 { return fn.deltaStep(h[0], h[1], h[2], h[3], h[4], h[5], out, 2) })
	return out[0], out[1]
}

// LogitSoftcap is mlx-lm's logit_softcap, tanh(x / softcap) * softcap with
// softcap in x's dtype (a weak scalar); compiled on a GPU, as mlx-lm's is.
func LogitSoftcap(x *Array, softcap float32) *Array {
	c := begin("logit_softcap")
	hx := c.in(x)
	return c.do(func(out *uintptr) int32 { return fn.softcap(hx, &softcap, out) })
}

// SwiGLU is mlx-lm's swiglu, nn.silu(gate) * x: multiply(multiply(gate,
// sigmoid(gate)), x). With mlxgo's CPU kernels on float32 it is one node
// doing those float operations per element; otherwise MLX's three ops.
func SwiGLU(gate, x *Array) *Array {
	c := begin("swiglu")
	hg, hx := c.in(gate), c.in(x)
	return c.do(func(out *uintptr) int32 { return fn.swiglu(hg, hx, out) })
}

// SwiGLUHalves is SwiGLU of the two halves of gu's last axis, the gate then
// x: a fused gate/up projection's output as one node, without the slices.
func SwiGLUHalves(gu *Array) *Array {
	c := begin("swiglu")
	h := c.in(gu)
	return c.do(func(out *uintptr) int32 { return fn.swigluHalves(h, out) })
}
