"""Oracle digests of every tensor of a GGUF file, for convert_test.go.
Usage: smollm2_digest.py FILE.gguf

Prints JSON {name: {"deq": sha256 of gguf-py's float32 dequantization,
"mx": {part: sha256 of mx.load's array bytes}}}. Zeros are normalised to +0
before hashing (x + 0.0), since an affine sum yields +0 where ggml may give -0.
"""
import hashlib
import json
import sys

import gguf
import mlx.core as mx
import numpy as np


def digest(a):
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


r = gguf.GGUFReader(sys.argv[1])
out = {}
for t in r.tensors:
    deq = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32) + np.float32(0)
    out[t.name] = {"deq": digest(deq), "mx": {}}
for name, arr in mx.load(sys.argv[1]).items():
    base, part = name.rsplit(".", 1)
    key = base + ".weight" if part in ("scales", "biases") else name
    out[key]["mx"][part] = digest(np.array(arr))
json.dump(out, sys.stdout)
