"""Writes GGUF test files with a fixed seed, plus reference values, for
convert_test.go. Usage: gen_quants.py OUTDIR

  OUTDIR/affine.gguf   F32/F16/BF16/Q4_0/Q4_1/Q8_0 tensors (readable by mx.load)
  OUTDIR/kquants.gguf  Q5_0/Q5_1/Q4_K/Q5_K/Q6_K tensors from random blocks (and
                       quantized from floats), and a Q2_K one
  OUTDIR/ref.gguf      F32 "deq/<name>": gguf-py's gguf.quants.dequantize of each
                       tensor; "mx/<name>.{weight,scales,biases}": mx.load's arrays
                       (uint32 weights stored as I32 bit patterns)

Edge blocks cover negative, zero, subnormal and huge float16 scales (huge ones
overflow a float16 bias, which the Go converter must catch).
"""
import os
import sys

import gguf
import mlx.core as mx
import numpy as np
from gguf import GGMLQuantizationType as T

rng = np.random.default_rng(20261130)
out = sys.argv[1]


def half(values):
    return np.asarray(values, dtype=np.float16).view(np.uint8).reshape(-1, 2)


def edge_scales(n):
    # A mix of ordinary, negative, zero, subnormal and extreme float16 values.
    pool = np.array([0.0125, -0.0031, 0.0, -0.0, 6e-8, -3e-6, 1.0, 2.5e-4, 0.5, -7.0], dtype=np.float16)
    return pool[rng.integers(0, len(pool), n)]


def raw_blocks(qtype, rows, cols, scale_fields, huge=None):
    """Random block bytes with the float16 fields at scale_fields set to
    finite values (random bytes would include NaN and inf)."""
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    nb = rows * cols // block
    b = rng.integers(0, 256, (nb, size), dtype=np.uint8)
    for off in scale_fields:
        b[:, off:off + 2] = half(edge_scales(nb))
    if huge is not None:
        b[0, scale_fields[0]:scale_fields[0] + 2] = half([huge])[0]
    return b.reshape(rows, cols // block * size)


w = gguf.GGUFWriter(os.path.join(out, "affine.gguf"), "test")
x = rng.standard_normal((8, 96), dtype=np.float32) * 0.05
affine = {
    "f32": (rng.standard_normal((3, 5, 64), dtype=np.float32), None),
    "f16": (rng.standard_normal((4, 64)).astype(np.float16), None),
    "bf16": (gguf.quants.quantize(rng.standard_normal((4, 64), dtype=np.float32), T.BF16), T.BF16),
    "q4_0": (gguf.quants.quantize(x, T.Q4_0), T.Q4_0),
    "q4_1": (gguf.quants.quantize(x, T.Q4_1), T.Q4_1),
    "q8_0": (gguf.quants.quantize(x, T.Q8_0), T.Q8_0),
    "q4_0_3d": (gguf.quants.quantize(rng.standard_normal((2, 3, 64), dtype=np.float32), T.Q4_0), T.Q4_0),
    "q4_0_edge": (raw_blocks(T.Q4_0, 4, 64, [0]), T.Q4_0),
    "q4_1_edge": (raw_blocks(T.Q4_1, 4, 64, [0, 2]), T.Q4_1),
    "q8_0_edge": (raw_blocks(T.Q8_0, 4, 64, [0]), T.Q8_0),
    "q4_0_huge": (raw_blocks(T.Q4_0, 2, 64, [0], huge=10000.0), T.Q4_0),
    "q8_0_huge": (raw_blocks(T.Q8_0, 2, 64, [0], huge=600.0), T.Q8_0),
}
affine = {k + ".weight": v for k, v in affine.items()}  # mx.load names quantized parts after .weight
for name, (data, qt) in affine.items():
    w.add_tensor(name, data, raw_dtype=qt)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()

w = gguf.GGUFWriter(os.path.join(out, "kquants.gguf"), "test")
kquants = {
    "q5_0": (gguf.quants.quantize(x, T.Q5_0), T.Q5_0),
    "q5_1": (gguf.quants.quantize(x, T.Q5_1), T.Q5_1),
    "q5_0_edge": (raw_blocks(T.Q5_0, 4, 64, [0]), T.Q5_0),
    "q5_1_edge": (raw_blocks(T.Q5_1, 4, 64, [0, 2]), T.Q5_1),
    "q5_0_huge": (raw_blocks(T.Q5_0, 2, 64, [0], huge=5000.0), T.Q5_0),
    "q4_k": (raw_blocks(T.Q4_K, 3, 512, [0, 2]), T.Q4_K),
    "q5_k": (raw_blocks(T.Q5_K, 3, 512, [0, 2]), T.Q5_K),
    "q6_k": (raw_blocks(T.Q6_K, 3, 512, [208]), T.Q6_K),
    "q2_k": (raw_blocks(T.Q2_K, 1, 256, [80, 82]), T.Q2_K),
}
for name, (data, qt) in kquants.items():
    w.add_tensor(name, data, raw_dtype=qt)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()

ref = gguf.GGUFWriter(os.path.join(out, "ref.gguf"), "test")
for name, (data, qt) in list(affine.items()) + list(kquants.items()):
    if name == "q2_k":
        continue
    d = np.asarray(data) if qt is None else gguf.quants.dequantize(data, qt)
    ref.add_tensor("deq/" + name, d.astype(np.float32))
for name, arr in mx.load(os.path.join(out, "affine.gguf")).items():
    a = np.array(arr)
    if a.dtype == np.uint32:
        a = a.view(np.int32)
    elif a.dtype not in (np.float32, np.float16):
        a = np.array(arr.astype(mx.float32))  # bfloat16: compare as float32
    ref.add_tensor("mx/" + name, a)
ref.write_header_to_file()
ref.write_kv_data_to_file()
ref.write_tensors_to_file()
ref.close()
