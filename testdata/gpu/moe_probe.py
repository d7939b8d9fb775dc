"""What a mixture of experts' weight layout does to MLX's sorted gather_mm and
gather_qmm on a GPU (testdata/gpu/run.sh moeprobe), and which layout mlx-lm
itself gives gemma4 and qwen3_5_moe.

1. Kernels: the experts' gate half of a fused gate_up [E, 2I, H] as a plain
   slice (a view, what a sanitize without mx.contiguous leaves) and as a
   contiguous copy, through gather_mm / gather_qmm with sorted and unsorted
   indices, each against per-row matmuls of the same numbers. Shapes of the
   L1 suite's tiny gemma4_text_moe (E=8, I=32, H=64, 39 tokens x top 2).
2. Models: the tiny gemma4_text_moe-f32 (Hugging Face layout, gate_up_proj
   fused) through mlx-lm's own generate_step (logits.py's run), once as
   mlx-lm loads it (gemma4's sanitize: contiguous parts) and once with the
   parts left as views (what mlxgo did before 334b745). Row 0's first logit
   and the difference between the two say which layout mlxgo's old result
   (-0.46963486, the L1 runs of 2026-12-02..07) came from.
3. The tiny gemma4_text_moe-q4g32 twice in one process: is the sorted
   quantized path deterministic on this GPU?

    python testdata/gpu/moe_probe.py MODELS_DIR   # prints one line per result
"""

import sys
from pathlib import Path

import mlx.core as mx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "models/testdata/oracle"))


def maxdiff(a, b) -> float:
    return float(mx.max(mx.abs(a.astype(mx.float32) - b.astype(mx.float32))).item())


def kernels() -> None:
    e, i, h, tokens, k = 8, 32, 64, 39, 2
    mx.random.seed(7)
    gate_up = mx.random.normal((e, 2 * i, h)) * 0.1
    idx = mx.sort(mx.random.randint(0, e, (tokens * k,)).astype(mx.uint32))
    x = mx.random.normal((tokens * k, 1, h))
    view = gate_up[:, :i, :]
    copy = mx.contiguous(view)
    mx.eval(gate_up, idx, x, view, copy)
    ref = mx.stack([x[r, 0] @ copy[int(idx[r].item())].T for r in range(tokens * k)])[:, None, :]
    for name, w in (("view", view), ("contiguous", copy)):
        for sort in (True, False):
            y = mx.gather_mm(x, w.swapaxes(-1, -2), rhs_indices=idx, sorted_indices=sort)
            print(f"probe: gather_mm f32 {name} sorted={sort}: max|y - per-row matmul| {maxdiff(y, ref):.6g}")
    for gs in (32, 64):
        qw, qs, qb = mx.quantize(gate_up, group_size=gs, bits=4)
        parts = {"view": (qw[:, :i], qs[:, :i], qb[:, :i])}
        parts["contiguous"] = tuple(mx.contiguous(p) for p in parts["view"])
        deq = mx.dequantize(*parts["contiguous"], group_size=gs, bits=4)
        ref = mx.stack([x[r, 0] @ deq[int(idx[r].item())].T for r in range(tokens * k)])[:, None, :]
        for name, (w, s, b) in parts.items():
            for sort in (True, False):
                kw = dict(rhs_indices=idx, transpose=True, group_size=gs, bits=4, sorted_indices=sort)
                y1 = mx.gather_qmm(x, w, s, b, **kw)
                y2 = mx.gather_qmm(x, w, s, b, **kw)
                print(f"probe: gather_qmm q4g{gs} {name} sorted={sort}: max|y - per-row| {maxdiff(y1, ref):.6g}, "
                      f"second call differs by {maxdiff(y1, y2):.6g}")


def first_logits(model_dir: Path, views: bool):
    import logits as oracle
    from mlx_lm.models import gemma4_text
    from mlx_lm.utils import load_model

    saved = mx.contiguous
    if views:  # gemma4's sanitize calls mx.contiguous on each part: make it the identity
        gemma4_text.mx.contiguous = lambda a, *args, **kw: a
    try:
        model, config = load_model(model_dir)
    finally:
        gemma4_text.mx.contiguous = saved
    prompt = oracle.prompt_ids(1, 40, oracle.vocab_size(config))
    return oracle.run(model, prompt, steps=4, prefill_step_size=oracle.DEFAULT_PREFILL_STEP_SIZE, kv_bits=None,
                      kv_group_size=64, quantized_kv_start=oracle.DEFAULT_QUANTIZED_KV_START,
                      max_kv_size=None)["logits"]


def models(models_dir: Path) -> None:
    m = models_dir / "gemma4_text_moe-f32"
    if m.exists():
        a, b = first_logits(m, views=False), first_logits(m, views=True)
        print(f"probe: gemma4_text_moe-f32 as mlx-lm loads it (contiguous parts): row 0 logit 0 {a[0, 0]!r}")
        print(f"probe: gemma4_text_moe-f32 with the parts as views: row 0 logit 0 {b[0, 0]!r}; "
              f"max |difference| {float(np.abs(a - b).max()):.6g}")
    m = models_dir / "gemma4_text_moe-q4g32"
    if m.exists():
        a, b = first_logits(m, views=False), first_logits(m, views=False)
        print(f"probe: gemma4_text_moe-q4g32 twice in one process: row 0 logit 0 {a[0, 0]!r} / {b[0, 0]!r}; "
              f"max |difference| {float(np.abs(a - b).max()):.6g}")


def main() -> int:
    mx.set_default_device(mx.gpu if len(sys.argv) < 3 or sys.argv[2] != "cpu" else mx.cpu)
    print(f"probe: device {mx.default_device()}, mlx {mx.__version__}")
    kernels()
    models(Path(sys.argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
