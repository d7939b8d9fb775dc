"""Writes safetensors test files with a fixed seed using the reference
`safetensors` package (0.8.0), and prints what that package reads back from
them, for safetensors_test.go. Usage: gen.py OUTDIR [EXTRA.safetensors ...]

  OUTDIR/all/model.safetensors      every numpy dtype, scalar and empty shapes, __metadata__
  OUTDIR/raw/model.safetensors      BF16 and F8 tensors from raw bytes (serialize_file)
  OUTDIR/sharded/                   two shards + model.safetensors.index.json

Prints JSON {path: {"metadata": {...}, "tensors": {name: {dtype, shape, sha256}}}}
for every file written and every EXTRA file named.
"""
import hashlib
import json
import os
import sys

import numpy as np
import safetensors
import safetensors.numpy
from safetensors import safe_open

rng = np.random.default_rng(20261130)
out = sys.argv[1]


def write(sub, name, tensors, metadata=None, raw=False):
    os.makedirs(os.path.join(out, sub), exist_ok=True)
    path = os.path.join(out, sub, name)
    if raw:
        # TensorSpec points at the numpy buffers, which live in `tensors`.
        specs = {k: safetensors.TensorSpec(dtype=d, shape=list(shape), data_ptr=b.ctypes.data, data_len=b.nbytes)
                 for k, (d, shape, b) in tensors.items()}
        safetensors.serialize_file(specs, path, metadata=metadata)
    else:
        safetensors.numpy.save_file(tensors, path, metadata=metadata)
    return path


def raw(dtype, shape, size):
    return (dtype, shape, rng.integers(0, 256, int(np.prod(shape)) * size, dtype=np.uint8))


def ints(dtype, shape):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


paths = [
    write("all", "model.safetensors", {
        "f64": rng.standard_normal((2, 3)),
        "f32": rng.standard_normal((4, 5, 6), dtype=np.float32),
        "f16": rng.standard_normal(7).astype(np.float16),
        "i64": ints(np.int64, (3,)), "i32": ints(np.int32, (2, 2)),
        "i16": ints(np.int16, (5,)), "i8": ints(np.int8, (9,)),
        "u64": ints(np.uint64, (3,)), "u32": ints(np.uint32, (4,)),
        "u16": ints(np.uint16, (1, 3)), "u8": ints(np.uint8, (11,)),
        "bool": rng.integers(0, 2, (3, 3)).astype(np.bool_),
        "scalar": np.array(1.5, dtype=np.float32),
        "empty": np.zeros((0, 4), dtype=np.float32),
    }, metadata={"format": "mlx", "seed": "20261130"}),
    write("raw", "model.safetensors", {
        "bf16": raw("bfloat16", (8, 16), 2),
        "f8_e4m3": raw("float8_e4m3fn", (4, 4), 1),
        "f8_e5m2": raw("float8_e5m2", (3,), 1),
    }, raw=True),
]
shards = {
    "model-00001-of-00002.safetensors": {"a.weight": rng.standard_normal((4, 4), dtype=np.float32),
                                         "b.weight": rng.standard_normal((2,), dtype=np.float32)},
    "model-00002-of-00002.safetensors": {"c.weight": rng.standard_normal((3, 2), dtype=np.float32)},
}
weight_map = {}
for shard, tensors in shards.items():
    paths.append(write("sharded", shard, tensors))
    weight_map.update({k: shard for k in tensors})
with open(os.path.join(out, "sharded", "model.safetensors.index.json"), "w") as f:
    json.dump({"metadata": {"total_size": 88}, "weight_map": weight_map}, f)

report = {}
for path in paths + sys.argv[2:]:
    entry = {"metadata": {}, "tensors": {}}
    with safe_open(path, framework="numpy") as f:
        entry["metadata"] = f.metadata() or {}
    with open(path, "rb") as f:
        for name, t in safetensors.deserialize(f.read()):
            entry["tensors"][name] = {"dtype": t["dtype"], "shape": t["shape"],
                                      "sha256": hashlib.sha256(t["data"]).hexdigest()}
    report[path] = entry
json.dump(report, sys.stdout)
