"""Shared helpers for the mlx-lm oracle scripts (see README.md beside this file).

Everything the oracle writes goes under .cache/oracle/ (git-ignored); these
helpers find that directory, record the versions a fixture was made with, and
fingerprint model files so a Go test can tell which weights a fixture belongs to.
"""

import hashlib
import json
import os
import platform
import sys
from pathlib import Path

# models/testdata/oracle/ -> repository root
REPO_ROOT = Path(__file__).resolve().parents[3]


def oracle_dir() -> Path:
    """Where generated fixtures live: $MLXGO_ORACLE_DIR or <repo>/.cache/oracle."""
    d = os.environ.get("MLXGO_ORACLE_DIR")
    return Path(d) if d else REPO_ROOT / ".cache" / "oracle"


def data_dir() -> Path:
    """Registry data fetched by `make data` ($MLXGO_DATA_DIR or <repo>/.cache/data)."""
    d = os.environ.get("MLXGO_DATA_DIR")
    return Path(d) if d else REPO_ROOT / ".cache" / "data"


def versions() -> dict:
    """The library versions a fixture depends on; recorded beside every fixture."""
    import mlx.core as mx
    import mlx_lm
    import numpy as np

    out = {
        "python": sys.version.split()[0],
        "mlx": mx.__version__,
        "mlx_lm": mlx_lm.__version__,
        "numpy": np.__version__,
        "device": str(mx.default_device()),
        "machine": platform.machine(),
    }
    from importlib import metadata

    for dist in ("mlx-cpu", "transformers", "tokenizers", "gguf"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return out


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fingerprint_dir(model_dir: Path) -> dict:
    """sha256 of config.json and every safetensors file: the artifact fingerprint."""
    out = {}
    for p in sorted(model_dir.iterdir()):
        if p.name == "config.json" or p.suffix == ".safetensors":
            out[p.name] = sha256_file(p)
    return out


def write_json(path: Path, obj) -> None:
    """Write JSON atomically so an interrupted run never leaves half a file."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


def prompt_ids(seed: int, length: int, vocab_size: int) -> list:
    """Fixed random prompt token ids: numpy's PCG64 stream, stable across versions."""
    import numpy as np

    rng = np.random.default_rng(seed)
    return [int(t) for t in rng.integers(0, vocab_size, size=length)]


def oracle_device():
    """The MLX device the oracle runs on: the CPU unless MLXGO_ORACLE_DEVICE=gpu
    (testdata/gpu/run.sh, where the oracle and mlxgo share the CUDA libmlx.so)."""
    import mlx.core as mx

    return mx.gpu if os.environ.get("MLXGO_ORACLE_DEVICE") == "gpu" else mx.cpu
