"""Computes ops with Python mlx for mlx/oracle_test.go: same libmlx version,
same inputs, same op graph, so the Go bindings must match bit for bit.

Inputs are float32 from a seeded numpy generator; every array crosses as its
raw bit patterns (uint32 for float32, uint16 for bfloat16), never as decimal
text. Run by the test with the pinned venv: .venv/bin/python oracle_ops.py
"""
import json
import sys

import mlx.core as mx
import numpy as np

rng = np.random.default_rng(20261130)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def bits(a):
    a = mx.contiguous(a)
    if a.dtype == mx.bfloat16 or a.dtype == mx.float16:
        v = np.array(a.view(mx.uint16))
    elif a.dtype == mx.float32:
        v = np.array(a.view(mx.uint32))
    else:
        v = np.array(a.astype(mx.int64))
    return {"dtype": str(a.dtype).replace("mlx.core.", ""), "shape": list(a.shape), "bits": v.reshape(-1).tolist()}


inputs = {
    "x": f32(2, 5, 64),      # activations [batch, seq, dim]
    "w": f32(96, 64) * 0.1,  # a linear layer's weight [out, in]
    "g": f32(64),            # a norm weight
    "b": f32(64) * 0.1,      # a norm bias
    "q": f32(1, 4, 5, 16),   # [batch, heads, seq, head_dim]
    "k": f32(1, 2, 7, 16),   # grouped-query: 2 kv heads
    "v": f32(1, 2, 7, 16),
    "audio": f32(1, 40, 8),  # [batch, length, channels]
    "cw": f32(12, 3, 8) * 0.2,
    "sig": f32(64),
}
X = {k: mx.array(v) for k, v in inputs.items()}
bf = {k: v.astype(mx.bfloat16) for k, v in X.items()}

out = {}
out["matmul_bf16"] = bf["x"] @ bf["w"].T
out["addmm_bf16"] = mx.addmm(bf["g"], bf["x"], bf["w"][:64].T, alpha=0.5, beta=2.0)
out["rms_norm_bf16"] = mx.fast.rms_norm(bf["x"], bf["g"], 1e-5)
out["layer_norm_bf16"] = mx.fast.layer_norm(bf["x"], bf["g"], bf["b"], 1e-5)
out["rope_bf16"] = mx.fast.rope(bf["q"], 16, traditional=False, base=10000.0, scale=1.0, offset=3)
out["rope_dynamic_bf16"] = mx.fast.rope(bf["q"], 16, traditional=True, base=500000.0, scale=0.5, offset=mx.array(9))
out["sdpa_causal_bf16"] = mx.fast.scaled_dot_product_attention(bf["q"], bf["k"], bf["v"], scale=0.25, mask="causal")
out["softmax_precise_bf16"] = mx.softmax(bf["x"], axis=-1, precise=True)
out["silu_bf16"] = bf["x"] * mx.sigmoid(bf["x"])
out["gelu_f32"] = X["x"] * (1 + mx.erf(X["x"] / 1.4142135623730951)) / 2
out["scale_weak_bf16"] = bf["x"] * 0.125
wq, sc, bi = mx.quantize(bf["w"], group_size=64, bits=4)
out["quantized_w"] = wq
out["quantized_scales"] = sc
out["quantized_biases"] = bi
out["qmm_bf16"] = mx.quantized_matmul(bf["x"], wq, sc, bi, transpose=True, group_size=64, bits=4)
out["logsumexp_f32"] = mx.logsumexp(X["x"], axis=-1)
out["argmax_f32"] = mx.argmax(X["x"], axis=-1)
out["conv1d_f32"] = mx.conv1d(X["audio"], X["cw"], stride=2, padding=1)
out["rfft_abs_f32"] = mx.abs(mx.fft.rfft(X["sig"]))
out["astype_bf16"] = X["x"].astype(mx.bfloat16)
out["astype_f16"] = (X["x"] * 1000).astype(mx.float16)

json.dump({"inputs": {k: bits(v) for k, v in X.items()}, "outputs": {k: bits(v) for k, v in out.items()}}, sys.stdout)
