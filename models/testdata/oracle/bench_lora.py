"""make bench-lora: decode speed with a LoRA adapter, mlxgo against mlx-lm, side by side.

Six settings on one model and one chat prompt, alternating round by round:
mlxgo generate (no adapter, --adapter-path, --adapter-path --fuse-adapter) and
mlx-lm's stream_generate (no adapter, mlx_lm.load(adapter_path=...), that model
fused as mlx_lm.fuse fuses it). Reports each setting's median decode tok/s, the
mlxgo / mlx-lm ratio per setting, and each side's cost of the unfused adapter
(unfused / none), with the machine, versions and commit.

    python bench_lora.py --model DIR --adapter DIR [--rounds 3] [--max-tokens 64] [--json OUT]
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

import mlx.core as mx
from mlx.utils import tree_unflatten
from mlx_lm import load, stream_generate

sys.path.insert(0, str(Path(__file__).resolve().parent))
from oracle_common import REPO_ROOT, versions  # noqa: E402

PROMPT = "Write a haiku about the sea"


def mlx_lm_tps(model_dir: str, adapter, fused: bool, max_tokens: int) -> float:
    model, tok = load(model_dir, adapter_path=adapter)
    if fused:
        fl = [(n, m.fuse(dequantize=False)) for n, m in model.named_modules() if hasattr(m, "fuse")]
        model.update_modules(tree_unflatten(fl))
    chat = tok.apply_chat_template([{"role": "user", "content": PROMPT}], tokenize=False, add_generation_prompt=True)
    ids = tok.encode(chat, add_special_tokens=False)
    last = None
    for last in stream_generate(model, tok, ids, max_tokens=max_tokens):
        pass
    return last.generation_tps


def mlxgo_tps(binary: str, model_dir: str, args: list, max_tokens: int) -> float:
    p = subprocess.run([binary, "generate", "-m", model_dir, "-p", PROMPT, "--max-tokens", str(max_tokens),
                        "--ignore-eos", "--json-stats"] + args, capture_output=True, text=True, check=True)
    return json.loads(p.stderr.strip().splitlines()[-1])["decode_tps"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--adapter", required=True)
    ap.add_argument("--mlxgo", default=str(REPO_ROOT / "mlxgo"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    mx.set_default_device(mx.cpu)
    settings = {
        "mlxgo none": lambda: mlxgo_tps(args.mlxgo, args.model, [], args.max_tokens),
        "mlx-lm none": lambda: mlx_lm_tps(args.model, None, False, args.max_tokens),
        "mlxgo unfused": lambda: mlxgo_tps(args.mlxgo, args.model, ["--adapter-path", args.adapter], args.max_tokens),
        "mlx-lm unfused": lambda: mlx_lm_tps(args.model, args.adapter, False, args.max_tokens),
        "mlxgo fused": lambda: mlxgo_tps(args.mlxgo, args.model, ["--adapter-path", args.adapter, "--fuse-adapter"],
                                         args.max_tokens),
        "mlx-lm fused": lambda: mlx_lm_tps(args.model, args.adapter, True, args.max_tokens),
    }
    runs = {k: [] for k in settings}
    for r in range(args.rounds):
        for name, f in settings.items():
            runs[name].append(f())
            print(f"round {r}: {name}: {runs[name][-1]:.1f} tok/s", file=sys.stderr, flush=True)
    med = {k: statistics.median(v) for k, v in runs.items()}
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=REPO_ROOT).stdout.strip()
    report = {
        "model": args.model, "adapter": args.adapter, "max_tokens": args.max_tokens, "rounds": args.rounds,
        "decode_tps": runs, "median_decode_tps": med,
        "mlxgo_over_mlx_lm": {s: med[f"mlxgo {s}"] / med[f"mlx-lm {s}"] for s in ("none", "unfused", "fused")},
        "unfused_over_none": {side: med[f"{side} unfused"] / med[f"{side} none"] for side in ("mlxgo", "mlx-lm")},
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                    "load_average": os.getloadavg()},
        "versions": versions(), "commit": commit,
    }
    out = json.dumps(report, indent=2, sort_keys=True)
    print(out)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(out + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
