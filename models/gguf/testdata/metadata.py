"""Oracle: print a GGUF file's metadata and tensor directory as JSON, read by
llama.cpp's gguf-py (pinned gguf==0.19.0). Used by metadata_test.go."""
import json
import sys

import gguf

r = gguf.GGUFReader(sys.argv[1])
out = {"metadata": {}, "tensors": []}
for key, field in r.fields.items():
    if key.startswith("GGUF."):
        continue
    types = [gguf.GGUFValueType(t).name for t in field.types]
    val = field.contents()
    out["metadata"][key] = {"types": types, "value": val}
for t in r.tensors:
    out["tensors"].append({
        "name": t.name,
        "type": t.tensor_type.name,
        "dims": [int(d) for d in t.shape],
        "offset": int(t.data_offset),
        "size": int(t.n_bytes),
    })
json.dump(out, sys.stdout, default=float)
