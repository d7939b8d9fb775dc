"""Per-step CUDA graph nodes of two decode loops, from MLX's own dumps.

MLX's CUDA backend writes each CUDA graph it commits as a dot file when
MLX_SAVE_CUDA_GRAPHS_DOT_FILE is set (cudaGraphDebugDotPrint). run.sh's graphs
stage runs each engine's decode loop twice, with few and with more steps; the
difference between the two runs is what the extra steps put on the GPU, so
setup (loading, prefill, warm-up) cancels out:

    python graphs.py --steps 16 NAME=SMALL_DIR,BIG_DIR NAME=SMALL_DIR,BIG_DIR

prints, per engine, commits (graphs) and nodes per step, and the node labels
(kernel names where CUDA prints them) side by side, per step.
"""

import argparse
import collections
import re
from pathlib import Path

LABEL = re.compile(r'label="((?:[^"\\]|\\.)*)"', re.S)


def clean(label: str) -> str:
    """A label without the parts that change from node to node: ids,
    addresses, sizes, launch dimensions."""
    label = label.replace("\\n", "\n").replace("\\l", "\n")
    lines = [l.strip() for l in label.splitlines() if l.strip()]
    keep = []
    for l in lines:
        if re.fullmatch(r"[\d\s:,x()\[\]{}.-]*", l) or l.lower().startswith(("id", "0x", "node")):
            continue
        l = re.sub(r"0x[0-9a-fA-F]+", "#", l)
        l = re.sub(r"\b\d+\b", "N", l)
        keep.append(l)
    return " | ".join(keep[:3])[:160] or "(no label)"


def scan(d: Path):
    files = sorted(d.glob("*.dot"), key=lambda p: int(re.findall(r"(\d+)\.dot$", p.name)[0]))
    hist = collections.Counter()
    nodes = 0
    for f in files:
        text = f.read_text(errors="replace")
        for m in LABEL.finditer(text):
            if re.fullmatch(r"graph_\d+", m.group(1)):
                continue  # a subgraph's own label (cudaGraphDebugDotPrint names each cluster), not a node
            hist[clean(m.group(1))] += 1
            nodes += 1
    return len(files), nodes, hist


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, required=True, help="how many more decode steps the big runs made")
    ap.add_argument("runs", nargs="+", help="NAME=SMALL_DIR,BIG_DIR")
    args = ap.parse_args()
    per = {}
    for r in args.runs:
        name, dirs = r.split("=", 1)
        small, big = (scan(Path(x)) for x in dirs.split(","))
        graphs = (big[0] - small[0]) / args.steps
        nodes = (big[1] - small[1]) / args.steps
        hist = collections.Counter({k: (big[2][k] - small[2][k]) / args.steps for k in big[2] | small[2]})
        per[name] = hist
        print(f"{name}: {graphs:.2f} graphs committed a step, {nodes:.1f} labelled nodes a step "
              f"(runs: {small[0]} and {big[0]} dot files)")
    names = list(per)
    keys = sorted(set().union(*per.values()), key=lambda k: -max(abs(per[n][k]) for n in names))
    print("per step: " + " | ".join(names) + " | label")
    for k in keys:
        vals = [per[n][k] for n in names]
        if all(abs(v) < 0.05 for v in vals):
            continue
        print(" | ".join(f"{v:6.2f}" for v in vals) + " | " + k)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
