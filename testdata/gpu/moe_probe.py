"""What a mixture of experts' weight layout does to MLX's sorted gather_mm and
gather_qmm on a GPU (testdata/gpu/run.sh moeprobe), and which layout mlx-lm
itself gives gemma4 and qwen3_5_moe.

1. Kernels: the experts' gate half of a fused gate_up [E, 2I, H] as a plain
   slice (a view, what a sanitize without mx.contiguous leaves) and as a
   contiguous copy, through gather_mm / gather_qmm with sorted and unsorted
   indices, each against per-row matmuls of the same numbers. Shapes of the
   L1 suite's tiny gemma4_text_moe (E=8, I=32, H=64, 39 tokens x top 2).
2. Models through mlx-lm's own generate_step (logits.py's run), prefill of
   39 + 1 tokens (the sorted path) and 4 steps: as mlx-lm loads it (twice:
   is it deterministic?), with every expert weight copied contiguous, and for
   gemma4 with the parts of gate_up_proj left as views (what mlxgo did before
   334b745, whose L1 runs of 2026-12-02..07 had -0.46963486 for row 0's first
   logit), each against the first. The tiny gemma4_text_moe-f32 and
   qwen3_5_moe-f32 are in the Hugging Face layout (gate_up_proj fused);
   gemma4_text_moe-q4g32 was converted by mlx-lm. Run it again with "cpu" for
   the CPU's numbers (generate_step's stream is made on the default device
   when mlx_lm.generate is imported, so one process runs on one device).
3. poison: the quantized matmuls of the tiny q4g32 model, and the router's
   shape family, right after MLX's buffer cache was filled with NaN.

    python testdata/gpu/moe_probe.py MODELS_DIR   # prints one line per result
    python testdata/gpu/moe_probe.py MODELS_DIR gpu MODEL   # which module first makes a NaN
    python testdata/gpu/moe_probe.py MODELS_DIR gpu MODEL run   # row 0 of one run
    python testdata/gpu/moe_probe.py MODELS_DIR poison   # the q4g32 model's matmuls on a NaN-filled cache
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
                try:
                    y1 = mx.gather_qmm(x, w, s, b, **kw)
                    y2 = mx.gather_qmm(x, w, s, b, **kw)
                    mx.eval(y1, y2)
                except RuntimeError as e:
                    print(f"probe: gather_qmm q4g{gs} {name} sorted={sort}: {str(e)[:160]}")
                    continue
                print(f"probe: gather_qmm q4g{gs} {name} sorted={sort}: max|y - per-row| {maxdiff(y1, ref):.6g}, "
                      f"second call differs by {maxdiff(y1, y2):.6g}")


def poisoned_kernels() -> None:
    """The quantized matmuls of the tiny gemma4_text_moe-q4g32, each right
    after MLX's buffer cache was filled with NaN: a kernel that reads memory
    it never wrote shows a NaN or a large difference from x @ dequantize(w).T."""
    mx.random.seed(3)

    def poison():
        for n in (1 << 10, 1 << 14, 1 << 18):
            p = mx.full((n,), float("nan"))
            mx.eval(p)
            del p

    def check(name, x, w, bits, gs, idx=None, sort=False):
        qw, qs, qb = mx.quantize(w, group_size=gs, bits=bits)
        deq = mx.dequantize(qw, qs, qb, group_size=gs, bits=bits)
        if idx is None:
            ref = x @ deq.T
        else:
            ref = mx.stack([x[r, 0] @ deq[int(idx[r].item())].T for r in range(idx.size)])[:, None, :]
        mx.eval(qw, qs, qb, ref)
        worst = 0.0
        for _ in range(3):
            poison()
            if idx is None:
                y = mx.quantized_matmul(x, qw, qs, qb, transpose=True, group_size=gs, bits=bits)
            else:
                y = mx.gather_qmm(x, qw, qs, qb, rhs_indices=idx, transpose=True, group_size=gs, bits=bits,
                                  sorted_indices=sort)
            d = maxdiff(y, ref)
            if worst == worst:  # a NaN stays
                worst = d if d != d else max(worst, d)
        print(f"probe: poisoned cache, {name}: max |y - x @ dequantize(w).T| over 3 calls {worst:.6g}")

    # the router's shape family: 8-bit g64 (mlx-lm's quant_predicate for gemma4's router), a
    # few experts (N), the tiny and the real hidden sizes (K), and prompt lengths (M)
    for n in (8, 128):
        for k in (64, 2816):
            for m in (2, 39, 512):
                for bits, gs in ((8, 64), (4, 64)):
                    check(f"{bits}-bit g{gs} [{n}, {k}], {m} tokens", mx.random.normal((1, m, k)),
                          mx.random.normal((n, k)) * 0.1, bits, gs)
    idx = mx.sort(mx.random.randint(0, 8, (78,)).astype(mx.uint32))
    for t in (39, 1):
        x64 = mx.random.normal((1, t, 64))
        check(f"router 8-bit g64, {t} tokens", x64, mx.random.normal((8, 64)) * 0.1, 8, 64)
        check(f"mlp gate 4-bit g32 [64, 64], {t} tokens", x64, mx.random.normal((64, 64)) * 0.1, 4, 32)
        check(f"q_proj 4-bit g32 [128, 64], {t} tokens", x64, mx.random.normal((128, 64)) * 0.1, 4, 32)
        check(f"o_proj 4-bit g32 [64, 128], {t} tokens", mx.random.normal((1, t, 128)), mx.random.normal((64, 128)) * 0.1, 4, 32)
    for sort in (True, False):
        check(f"experts down 4-bit g32 [8, 64, 32], 78 rows sorted={sort}", mx.random.normal((78, 1, 32)),
              mx.random.normal((8, 64, 32)) * 0.1, 4, 32, idx, sort)
        check(f"experts gate 4-bit g32 [8, 32, 64], 78 rows sorted={sort}", mx.random.normal((78, 1, 64)),
              mx.random.normal((8, 32, 64)) * 0.1, 4, 32, idx, sort)


def first_logits(model_dir: Path, variant: str):
    """Prefill and 4 steps through mlx-lm's generate_step: variant "mlx-lm" (as
    mlx-lm loads it), "views" (gemma4's sanitize without mx.contiguous),
    "contiguous" (every expert weight copied contiguous after loading)."""
    import logits as oracle
    from mlx_lm.models import gemma4_text
    from mlx_lm.utils import load_model

    saved = mx.contiguous
    if variant == "views":  # gemma4's sanitize calls mx.contiguous on each part: make it the identity
        gemma4_text.mx.contiguous = lambda a, *args, **kw: a
    try:
        model, config = load_model(model_dir)
    finally:
        gemma4_text.mx.contiguous = saved
    if variant == "contiguous":
        oracle.contiguous_experts(model)
    prompt = oracle.prompt_ids(1, 40, oracle.vocab_size(config))
    return oracle.run(model, prompt, steps=4, prefill_step_size=oracle.DEFAULT_PREFILL_STEP_SIZE, kv_bits=None,
                      kv_group_size=64, quantized_kv_start=oracle.DEFAULT_QUANTIZED_KV_START,
                      max_kv_size=None)["logits"]


def models(models_dir: Path) -> None:
    for name in ("gemma4_text_moe-f32", "qwen3_5_moe-f32", "gemma4_text_moe-q4g32"):
        m = models_dir / name
        if not m.exists():
            continue
        first = None
        for v in ["mlx-lm", "mlx-lm", "contiguous"] + (["views"] if name.startswith("gemma4") else []):
            try:
                out = first_logits(m, v)
            except Exception as e:  # noqa: BLE001 - report and go on
                print(f"probe: {name} {v}: {type(e).__name__}: {str(e)[:200]}")
                continue
            if first is None:
                first = out
            print(f"probe: {name} {v}: row 0 logit 0 {float(out[0, 0])!r}; "
                  f"max |difference| from the first run {float(np.abs(out - first).max()):.6g}")


def nan_hunt(model_dir: Path) -> None:
    """The first modules whose output holds a NaN though their inputs hold
    none, over the prefill call's 39 tokens (each output evaluated as it is
    made: the same kernels, one at a time)."""
    import logits as oracle
    import mlx.nn as nn
    from mlx_lm.models import switch_layers
    from mlx_lm.models.cache import make_prompt_cache
    from mlx_lm.utils import load_model

    model, config = load_model(model_dir)
    oracle.contiguous_experts(model)
    found = []

    def has_nan(v) -> bool:
        if isinstance(v, mx.array) and mx.issubdtype(v.dtype, mx.floating):
            return bool(mx.any(mx.isnan(v)).item())
        if isinstance(v, (tuple, list)):
            return any(has_nan(x) for x in v)
        return False

    def wrap(cls):
        call = cls.__call__

        def probe(self, *args, **kw):
            out = call(self, *args, **kw)
            if len(found) < 6 and has_nan(out) and not has_nan(args):
                shapes = [tuple(a.shape) for a in args if isinstance(a, mx.array)]
                found.append(f"{cls.__name__} inputs {shapes} ({getattr(self, 'bits', '')} bits, "
                             f"group {getattr(self, 'group_size', '')})")
            return out
        cls.__call__ = probe
        return call

    classes = [nn.QuantizedLinear, nn.QuantizedEmbedding, nn.Linear, nn.RMSNorm, switch_layers.QuantizedSwitchLinear,
               switch_layers.SwitchGLU, type(model)]
    saved = [(c, wrap(c)) for c in classes]
    try:
        prompt = oracle.prompt_ids(1, 40, oracle.vocab_size(config))
        out = model(mx.array(prompt[:39])[None], cache=make_prompt_cache(model))
        print(f"probe: {model_dir.name} prefill of 39 tokens: NaN in the logits {has_nan(out)}; first modules to make "
              f"a NaN from none: {found or 'none'}")
    finally:
        for c, call in saved:
            c.__call__ = call


def main() -> int:
    mx.set_default_device(mx.gpu if len(sys.argv) < 3 or sys.argv[2] != "cpu" else mx.cpu)
    print(f"probe: device {mx.default_device()}, mlx {mx.__version__}")
    if len(sys.argv) > 2 and sys.argv[2] == "poison":  # MODELS_DIR poison
        poisoned_kernels()
        return 0
    if len(sys.argv) > 4:  # MODELS_DIR DEVICE MODEL run: row 0 of one generate_step run, as loaded
        out = first_logits(Path(sys.argv[1]) / sys.argv[3], "mlx-lm")
        print(f"probe: {sys.argv[3]}: row 0 logit 0 {float(out[0, 0])!r}, NaN rows {np.isnan(out).any(axis=1).tolist()}")
        return 0
    if len(sys.argv) > 3:  # MODELS_DIR DEVICE MODEL: the NaN hunt only
        nan_hunt(Path(sys.argv[1]) / sys.argv[3])
        return 0
    kernels()
    models(Path(sys.argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
