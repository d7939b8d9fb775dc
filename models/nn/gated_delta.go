package nn

import (
	"math"

	"github.com/mlxgo/mlxgo/mlx"
)

// This file is mlx_lm/models/gated_delta.py of mlx-lm 0.32.2, the Gated
// DeltaNet recurrence of qwen3_next and qwen3_5's linear-attention layers,
// on the path mlx-lm takes without Metal: gated_delta_update goes to
// gated_delta_ops (the Metal kernels need a GPU with Metal), a loop over the
// tokens of _gated_delta_step_ops. mlx-lm wraps compute_g and the step in
// mx.compile; on the CPU the compiled graph computes the same bits as its
// ops one by one (the oracle's no_compile check), so they run as ops here,
// and on a GPU, where MLX's fused kernels round float32 differently, they
// are compiled as mlx-lm's are (mlx.ComputeG, mlx.GatedDeltaStep).

// NormalizeQK is normalize_qk: q and k RMS-normalized without weight, the
// readout scale invScale² folded into q and invScale into k; eps (added to
// sum(x²) in the reference l2norm) becomes eps·invScale² on the mean.
func NormalizeQK(q, k *mlx.Array, invScale, eps float64) (*mlx.Array, *mlx.Array) {
	sq := invScale * invScale
	rmsEps := float32(eps * sq)
	q = mlx.Multiply(mlx.RMSNorm(q, nil, rmsEps), mlx.ScalarLike(float32(sq), q))
	k = mlx.Multiply(mlx.RMSNorm(k, nil, rmsEps), mlx.ScalarLike(float32(invScale), k))
	return q, k
}

// GatedDeltaUpdate is gated_delta_update without a mask or lower bound:
// beta = sigmoid(b), the decay g = compute_g(A_log, a, dt_bias), and the
// recurrence over q, k [B, T, Hk, Dk], v [B, T, Hv, Dv] from state
// [B, Hv, Dv, Dk] (float32; nil: zeros). It returns y [B, T, Hv, Dv] in q's
// dtype and the new state.
func GatedDeltaUpdate(q, k, v, a, b, aLog, dtBias, state *mlx.Array) (y, newState *mlx.Array) {
	beta := mlx.Sigmoid(b)
	g := computeG(aLog, a, dtBias)
	if state == nil {
		state = mlx.Zeros(mlx.Float32, q.Dim(0), v.Dim(-2), v.Dim(-1), q.Dim(-1))
	}
	return gatedDeltaOps(q, k, v, g, beta, state)
}

// computeG is compute_g: exp(-exp(float32(A_log)) * softplus(a + dt_bias)).
func computeG(aLog, a, dtBias *mlx.Array) *mlx.Array {
	if onGPU() {
		return mlx.ComputeG(aLog, a, dtBias)
	}
	decay := mlx.Negative(mlx.Exp(mlx.AsType(aLog, mlx.Float32)))
	return mlx.Exp(mlx.Multiply(decay, softplus(mlx.Add(a, dtBias))))
}

// softplus is mlx.nn.softplus, mx.logaddexp(x, 0). The shim has no
// logaddexp, so this is MLX's CPU LogAddExp kernel (backend/cpu/binary_ops.h)
// in MLX ops: maxval + log1p(exp(minval - maxval)), maxval where minval is
// -inf or maxval is inf. Each step is an op of x's own dtype, as each step
// of the kernel is (a bfloat16 difference, exp and sum round to bfloat16
// there too), so the result has the kernel's bits.
func softplus(x *mlx.Array) *mlx.Array {
	zero := mlx.ScalarLike(0, x)
	maxv, minv := mlx.Maximum(x, zero), mlx.Minimum(x, zero)
	out := mlx.Add(maxv, mlx.Log1p(mlx.Exp(mlx.Subtract(minv, maxv))))
	inf := float32(math.Inf(1))
	edge := mlx.LogicalOr(mlx.Equal(minv, mlx.ScalarLike(-inf, x)), mlx.Equal(maxv, mlx.ScalarLike(inf, x)))
	return mlx.Where(edge, maxv, out)
}

// gatedDeltaOps is gated_delta_ops: the key heads repeated up to the value
// heads, then one recurrent step per token (compiled on a GPU: the device is
// asked once, not per token).
func gatedDeltaOps(q, k, v, g, beta, state *mlx.Array) (*mlx.Array, *mlx.Array) {
	if r := v.Dim(-2) / q.Dim(-2); r > 1 {
		q = mlx.Repeat(q, r, -2)
		k = mlx.Repeat(k, r, -2)
	}
	step := gatedDeltaStep
	if onGPU() {
		step = mlx.GatedDeltaStep
	}
	t := q.Dim(1)
	ys := make([]*mlx.Array, t)
	for i := range t {
		ys[i], state = step(at(q, i), at(k, i), at(v, i), at(g, i), at(beta, i), state)
	}
	return mlx.Stack(ys, 1), state
}

// at is x[:, t].
func at(x *mlx.Array, t int) *mlx.Array {
	sh := x.Shape()
	start, stop := make([]int, len(sh)), append([]int(nil), sh...)
	start[1], stop[1] = t, t+1
	return mlx.Squeeze(mlx.Slice(x, start, stop), 1)
}

// gatedDeltaStep is _gated_delta_step_ops with a scalar gate per head:
// q, k [B, H, Dk], v [B, H, Dv], g and beta [B, H], state [B, H, Dv, Dk].
func gatedDeltaStep(q, k, v, g, beta, state *mlx.Array) (*mlx.Array, *mlx.Array) {
	state = mlx.Multiply(state, mlx.ExpandDims(g, 2, 3))
	kt := mlx.ExpandDims(k, -2)
	kvMem := mlx.Sum(mlx.Multiply(state, kt), []int{-1}, false)
	delta := mlx.Multiply(mlx.Subtract(v, kvMem), mlx.ExpandDims(beta, -1))
	state = mlx.Add(state, mlx.Multiply(kt, mlx.ExpandDims(delta, -1)))
	y := mlx.Sum(mlx.Multiply(state, mlx.ExpandDims(q, -2)), []int{-1}, false)
	return mlx.AsType(y, q.Dtype()), state
}

// onGPU reports whether arrays are made on the GPU (the default device).
func onGPU() bool {
	d, err := mlx.DefaultDevice()
	return err == nil && d.Type == mlx.GPU
}
