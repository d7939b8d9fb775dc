"""Reference logits from mlx-lm's own generate loop, for the L1 fidelity tests.

The model runs inside mlx_lm.generate.generate_step itself (the function
mlx_lm.generate / stream_generate call), not a re-implementation of it: a thin
wrapper records what the model returns on each call. So the prompt split, the
cache objects, the KV quantization switch-over and the greedy sampler are
mlx-lm's, with the same defaults as the `mlx_lm.generate` CLI.

How generate_step feeds a prompt of P tokens (mlx-lm 0.32.2):
  * while more than one token is left: one model call on the next
    min(prefill_step_size, remaining - 1) tokens (logits discarded), then
    maybe_quantize_kv_cache, then mx.eval of the cache state;
  * one call on the LAST prompt token alone: its logits are row 0 here;
  * then one call per generated token: row i (1..S) is the output of the call
    whose input is tokens[i-1]. generate_step is pipelined one step ahead, so
    with max_tokens=S it makes S decode calls and yields S tokens; the last
    row predicts a token it never yields.
  With the default prefill_step_size 2048, a short prompt is therefore one
  call on P-1 tokens plus one call on 1 token.

Output (one case): <out>/<case>.safetensors with
  prompt_ids int32 [P], tokens int32 [S] (the greedy ids generate_step yields),
  logits float32 [S+1, V] (model output at the last position of each call,
  upcast exactly from logits_dtype), logprobs float32 [S+1, V] (logits -
  logsumexp, in logits_dtype, which the greedy sampler's argmax reads),
and an entry in <out>/index.json with every setting needed to replay it.

    python logits.py --model .cache/oracle/models/qwen3-bf16 --case qwen3-bf16
    python logits.py --model DIR --case NAME --kv-bits 4 --quantized-kv-start 0
    python logits.py --suite           # every standard case over the tiny models
"""

import argparse
import json
import sys
from pathlib import Path

import mlx.core as mx
import numpy as np
from mlx_lm.generate import (
    DEFAULT_PREFILL_STEP_SIZE,
    DEFAULT_QUANTIZED_KV_START,
    generate_step,
)
from mlx_lm.models.cache import make_prompt_cache
from mlx_lm.utils import load_model

sys.path.insert(0, str(Path(__file__).resolve().parent))
from oracle_common import fingerprint_dir, oracle_device, oracle_dir, prompt_ids, versions, write_json  # noqa: E402

DEFAULT_KV_GROUP_SIZE = 64  # mlx_lm.generate's --kv-group-size default
DEFAULT_STEPS = 64


class Recorder:
    """Stands in for the model inside generate_step: calls it unchanged and
    keeps the last-position logits of every call that is not a discarded
    prefill chunk, plus a trace of each call's shape and cache kinds."""

    def __init__(self, model, cache, discard_calls: int):
        self.model = model
        self.cache = cache
        self.discard_calls = discard_calls
        self.rows = []
        self.trace = []

    def __call__(self, inputs, cache=None, input_embeddings=None):
        entry = {
            "tokens": int(inputs.shape[1]),
            # the first cache that counts tokens: mlx-lm's ArraysCache (a
            # linear-attention layer's state) has no offset (nor has any
            # cache of a pipeline stage of linear layers only: None)
            "offset": next((int(c.offset) for c in self.cache if hasattr(c, "offset")), None),
            # cache kinds as generate_step left them before this call
            "caches": sorted({type(c).__name__ for c in self.cache}),
        }
        out = self.model(inputs, cache=cache)
        if len(self.trace) >= self.discard_calls:
            self.rows.append(out[:, -1, :])
        self.trace.append(entry)
        return out

    @property
    def layers(self):
        return self.model.layers


def prefill_chunks(prompt_len: int, step: int) -> list:
    """The input lengths of generate_step's prefill calls, last one included."""
    chunks, left = [], prompt_len
    while left > 1:
        n = min(step, left - 1)
        chunks.append(n)
        left -= n
    return chunks + [1]


def run(model, prompt: list, steps: int, prefill_step_size: int, kv_bits, kv_group_size: int,
        quantized_kv_start: int, max_kv_size) -> dict:
    """One greedy generation through generate_step; returns numpy arrays + trace."""
    chunks = prefill_chunks(len(prompt), prefill_step_size)
    cache = make_prompt_cache(model, max_kv_size=max_kv_size)
    rec = Recorder(model, cache, discard_calls=len(chunks) - 1)
    tokens = []
    try:
        for tok, _ in generate_step(
            mx.array(prompt, dtype=mx.uint32),
            rec,
            max_tokens=steps,
            prompt_cache=cache,
            prefill_step_size=prefill_step_size,
            kv_bits=kv_bits,
            kv_group_size=kv_group_size,
            quantized_kv_start=quantized_kv_start,
        ):
            tokens.append(int(tok))
    except RuntimeError as e:
        # The model call whose graph MLX could not evaluate is the last one
        # traced (generate_step queues each call, then evaluates it).
        raise Unsupported(str(e), len(rec.trace), chunks) from e
    if len(rec.rows) != steps + 1:
        raise RuntimeError(f"recorded {len(rec.rows)} logit rows, want {steps + 1}")
    logits = mx.concatenate(rec.rows, axis=0)
    # The same op mlx-lm applies before sampling, in the logits' own dtype.
    logprobs = logits - mx.logsumexp(logits, axis=-1, keepdims=True)
    mx.eval(logits, logprobs)
    greedy = np.array(mx.argmax(logprobs, axis=-1)).astype(np.int32)
    if list(greedy[:steps]) != tokens:
        raise RuntimeError("argmax of the recorded logprobs differs from generate_step's tokens")
    return {
        "logits_dtype": str(logits.dtype).removeprefix("mlx.core."),
        "logits": np.array(logits.astype(mx.float32)),
        "logprobs": np.array(logprobs.astype(mx.float32)),
        "tokens": np.array(tokens, dtype=np.int32),
        "trace": rec.trace,
        "chunks": chunks,
    }


def contiguous_experts(model) -> None:
    """Every mixture-of-experts weight as a contiguous copy, on a GPU only.

    qwen3_5_moe's sanitize splits a Hugging Face checkpoint's fused
    experts.gate_up_proj into two strided slices, and MLX 0.32.4's CUDA
    sorted gather_mm (a CUTLASS grouped GEMM) takes an expert's offset from
    the shape, not the stride: mlx-lm then computes such a prefill with the
    wrong experts (testdata/gpu/moe_probe.py). mlxgo copies the parts
    (nn.Weights.Split), so on a GPU the reference is mlx-lm with the same
    copies; for weights already contiguous, and on the CPU, nothing changes."""
    from mlx_lm.models.switch_layers import QuantizedSwitchLinear, SwitchLinear

    for _, m in model.named_modules():
        if isinstance(m, (SwitchLinear, QuantizedSwitchLinear)):
            m.update({k: mx.contiguous(v) for k, v in m.parameters().items() if isinstance(v, mx.array)})


class Unsupported(RuntimeError):
    """MLX itself cannot evaluate a case on this device (e.g. MLX's CUDA backend has
    no quantized-matmul kernel for a tiny seeded shape): the message, the 1-based
    model call that failed, and the prefill chunks."""

    def __init__(self, message: str, failed_call: int, chunks: list):
        super().__init__(message)
        self.failed_call = failed_call
        self.chunks = chunks


def unsupported_case(case: str, model_dir: Path, out: Path, err: Unsupported, *, prompt_len=24, prompt_seed=1,
                     steps=DEFAULT_STEPS, prefill_step_size=DEFAULT_PREFILL_STEP_SIZE, kv_bits=None,
                     kv_group_size=DEFAULT_KV_GROUP_SIZE, quantized_kv_start=DEFAULT_QUANTIZED_KV_START,
                     max_kv_size=None, dtype=None) -> dict:
    """The index entry of a case MLX cannot run on a GPU, with its prompt: mlxgo's
    TestL1 then requires the same MLX error at the same model call."""
    _, config = load_model(model_dir)
    prompt = prompt_ids(prompt_seed, prompt_len, vocab_size(config))
    entry = {
        "file": f"{case}.safetensors",
        "model": str(model_dir.resolve().relative_to(oracle_dir().resolve())),
        "model_files": fingerprint_dir(model_dir),
        "model_type": config["model_type"],
        "prompt_len": len(prompt),
        "prompt_seed": prompt_seed,
        "prefill_chunks": err.chunks,
        "unsupported": str(err),
        "failed_call": err.failed_call,
        "steps": steps, "prefill_step_size": prefill_step_size, "kv_bits": kv_bits, "kv_group_size": kv_group_size,
        "quantized_kv_start": quantized_kv_start, "max_kv_size": max_kv_size,
    }
    if dtype:
        entry["dtype"] = dtype
    if oracle_device() != mx.cpu:
        entry["experts_contiguous"] = True  # contiguous_experts
    out.mkdir(parents=True, exist_ok=True)
    mx.save_safetensors(str(out / entry["file"]), {"prompt_ids": mx.array(np.array(prompt, dtype=np.int32))},
                        metadata={"case": case, "format": "mlxgo-oracle-v1"})
    return entry


def max_abs_diff(a: np.ndarray, b: np.ndarray) -> float:
    if a.shape != b.shape:
        return float("inf")
    both_nan = np.isnan(a) & np.isnan(b)
    d = np.where(both_nan, 0.0, np.abs(a.astype(np.float64) - b.astype(np.float64)))
    return float(np.nanmax(d)) if d.size else 0.0


def make_case(case: str, model_dir: Path, out: Path, *, prompt=None, prompt_len=24, prompt_seed=1,
              steps=DEFAULT_STEPS, prefill_step_size=DEFAULT_PREFILL_STEP_SIZE, kv_bits=None,
              kv_group_size=DEFAULT_KV_GROUP_SIZE, quantized_kv_start=DEFAULT_QUANTIZED_KV_START,
              max_kv_size=None, checks=True, extra=None, dtype=None) -> dict:
    """Generate one case, write <out>/<case>.safetensors, return its index entry.
    dtype: cast every floating-point parameter after loading (model.set_dtype),
    what mlxgo's --dtype does."""
    model, config = load_model(model_dir)
    if dtype:
        model.set_dtype(getattr(mx, dtype))
    if oracle_device() != mx.cpu:
        contiguous_experts(model)
    if prompt is None:
        prompt = prompt_ids(prompt_seed, prompt_len, vocab_size(config))
    settings = dict(steps=steps, prefill_step_size=prefill_step_size, kv_bits=kv_bits,
                    kv_group_size=kv_group_size, quantized_kv_start=quantized_kv_start,
                    max_kv_size=max_kv_size)
    res = run(model, prompt, **settings)
    entry = {
        "file": f"{case}.safetensors",
        "model": str(model_dir.resolve().relative_to(oracle_dir().resolve()))
        if model_dir.resolve().is_relative_to(oracle_dir().resolve()) else str(model_dir),
        "model_files": fingerprint_dir(model_dir),
        "model_type": config["model_type"],
        "quantization": config.get("quantization"),
        "prompt_len": len(prompt),
        "prompt_seed": prompt_seed if extra is None or "prompt_text" not in extra else None,
        "logits_dtype": res["logits_dtype"],
        "prefill_chunks": res["chunks"],
        "calls": res["trace"],
        "sampler": "greedy: argmax(logprobs) with logprobs = logits - logsumexp(logits)",
        **settings,
    }
    if dtype:
        entry["dtype"] = dtype
    if oracle_device() != mx.cpu:
        entry["experts_contiguous"] = True  # contiguous_experts
    if max_kv_size is not None and hasattr(model, "make_cache"):
        # make_prompt_cache lets the model's own make_cache win: mlx-lm ignores
        # --max-kv-size for llama and gemma3_text.
        entry["max_kv_size_ignored"] = True
    if checks:
        # Same process, second run: CPU results must not depend on timing.
        again = run(model, prompt, **settings)
        entry["rerun_max_abs_diff"] = max_abs_diff(res["logits"], again["logits"])
        # mlx-lm wraps swiglu, gelu_approx and gemma's residual add in
        # mx.compile; a Go port without compile must know whether it matters.
        mx.disable_compile()
        try:
            plain = run(model, prompt, **settings)
        finally:
            mx.enable_compile()
        entry["no_compile_max_abs_diff"] = max_abs_diff(res["logits"], plain["logits"])
        entry["no_compile_same_tokens"] = bool(np.array_equal(res["tokens"], plain["tokens"]))
    if extra:
        entry.update(extra)
    out.mkdir(parents=True, exist_ok=True)
    arrays = {
        "prompt_ids": mx.array(np.array(prompt, dtype=np.int32)),
        "tokens": mx.array(res["tokens"]),
        "logits": mx.array(res["logits"]),
        "logprobs": mx.array(res["logprobs"]),
    }
    mx.save_safetensors(str(out / entry["file"]), arrays, metadata={"case": case, "format": "mlxgo-oracle-v1"})
    return entry


def update_index(out: Path, entries: dict) -> None:
    path = out / "index.json"
    index = json.loads(path.read_text()) if path.exists() else {}
    cases = index.get("cases", {})
    cases.update(entries)
    write_json(path, {"format": "mlxgo-oracle-v1", "versions": versions(), "cases": cases})


def merge_shards(out: Path, n: int) -> int:
    """Joins the suite's shards (--shard I/N) into index.json. Exit status 3
    when a shard is missing or did not finish (its time ran out): index.json
    then holds the cases made, and the caller says the comparison is partial."""
    cases, complete = {}, True
    for i in range(n):
        p = out / f"index.partial-{i}.json"
        if not p.exists():
            complete = False
            continue
        shard = json.loads(p.read_text())
        cases.update(shard["cases"])
        complete = complete and shard.get("complete", False)
    write_json(out / "index.json", {"format": "mlxgo-oracle-v1", "versions": versions(), "cases": cases})
    print(f"logits: {len(cases)} cases from {n} shards{'' if complete else ' (PARTIAL: a shard did not finish)'}",
          file=sys.stderr)
    return 0 if complete else 3


def vocab_size(config: dict) -> int:
    """A multimodal wrapper's (mistral3) vocabulary is its text_config's."""
    return config.get("vocab_size") or config["text_config"]["vocab_size"]


# MLX's CPU backend has no gather_mm for other dtypes than float32, so an
# unquantized bf16 mixture-of-experts model cannot run there: mlxgo must stop
# with the same error (TestL1 checks it on either device).
CPU_UNSUPPORTED = "[GatherMM::eval] Currently only supports float32"


def recordable(err: "Unsupported") -> bool:
    """Whether a case MLX cannot evaluate is recorded (as unsupported_case)
    rather than failing the run: a kernel missing on a GPU, or gather_mm of
    another dtype than float32 on the CPU."""
    if CPU_UNSUPPORTED in str(err):
        return True
    return oracle_device() != mx.cpu and "No implementation" in str(err)


def suite_cases(models: Path) -> dict:
    """The standard cases: every tiny model once, plus chunked prefill, KV
    quantization and rotating-cache cases. gemma3_text prompts (40) are longer
    than its sliding window (16)."""
    cases = {}
    for d in sorted(p for p in models.iterdir() if (p / "config.json").exists()):
        if d.name.startswith("llama1b") or "-bench-" in d.name:
            continue  # benchmark-only (make_tiny --big, --gemma4-bench-only, make_bench_*.py)
        # gemma3, gemma4, gpt_oss: longer than their windows; qwen3_moe and
        # gpt_oss: 39 prefill tokens x top 2 >= 64 indices, so SwitchGLU takes
        # its sorted path
        plen = 40 if d.name.startswith(("gemma3", "qwen3_moe", "gpt_oss", "gemma4", "qwen3_next", "qwen3_5_moe")) else 24
        cases[d.name] = dict(model=d.name, prompt_len=plen)
    cases.update({
        "llama-f32-prefill8": dict(model="llama-f32", prefill_step_size=8),
        "gemma3_text-bf16-prefill8": dict(model="gemma3_text-bf16", prompt_len=40, prefill_step_size=8),
        "gemma3_text-f32-prefill16": dict(model="gemma3_text-f32", prompt_len=40, prefill_step_size=16),
        # 8 tokens x top 2 < 64: SwitchGLU's unsorted path for a multi-token call
        "qwen3_moe-f32-prefill8": dict(model="qwen3_moe-f32", prompt_len=40, prefill_step_size=8),
        "qwen3_moe-q4g64-prefill8": dict(model="qwen3_moe-q4g64", prompt_len=40, prefill_step_size=8),
        # the rotating caches of the sliding layers and the attention scale
        # across chunks (position 16 is where the scale first grows)
        "ministral3-bf16-prefill8": dict(model="ministral3-bf16", prefill_step_size=8),
        "phi3-f32-maxkv16": dict(model="phi3-f32", max_kv_size=16),
        # chunks across gpt_oss's window: the rotating caches and sinks over
        # a concatenated prefill; 8 x top 2 < 64: SwitchGLU's unsorted path
        "gpt_oss-f32-prefill8": dict(model="gpt_oss-f32", prompt_len=40, prefill_step_size=8),
        "minicpm-f32-prefill8": dict(model="minicpm-f32", prefill_step_size=8),
        # gemma4: the KV-shared layers read the rotating and growable caches
        # of earlier layers across chunks; 8 x top 2 < 64: the unsorted path
        "gemma4_text-bf16-prefill8": dict(model="gemma4_text-bf16", prompt_len=40, prefill_step_size=8),
        "gemma4_text_moe-f32-prefill8": dict(model="gemma4_text_moe-f32", prompt_len=40, prefill_step_size=8),
        "gemma4-f32-prefill16": dict(model="gemma4-f32", prompt_len=40, prefill_step_size=16),
        # the hybrids' recurrent state and conv inputs carried across chunks;
        # kv bits quantize the attention layers only; --max-kv-size is
        # ignored (make_cache)
        "qwen3_5-bf16-prefill8": dict(model="qwen3_5-bf16", prefill_step_size=8),
        "qwen3_5-q4g32-prefill5": dict(model="qwen3_5-q4g32", prefill_step_size=5),
        "qwen3_next-q4g64-prefill8": dict(model="qwen3_next-q4g64", prompt_len=40, prefill_step_size=8),
        "qwen3_5-bf16-kv4-start0": dict(model="qwen3_5-bf16", kv_bits=4, quantized_kv_start=0),
        "qwen3_5-f32-maxkv16": dict(model="qwen3_5-f32", max_kv_size=16),
        "gemma3-bf16-prefill16": dict(model="gemma3-bf16", prompt_len=40, prefill_step_size=16),
        # --kv-bits: the default start (5000) is never reached by a short
        # prompt; start 0 switches right after the first prefill call, start
        # 40 switches during decode.
        "qwen3-bf16-kv4": dict(model="qwen3-bf16", kv_bits=4),
        "qwen3-bf16-kv4-start0": dict(model="qwen3-bf16", kv_bits=4, quantized_kv_start=0),
        "qwen3-bf16-kv8-start40": dict(model="qwen3-bf16", kv_bits=8, quantized_kv_start=40),
        "llama_rope3-f32-kv8-start0-prefill8": dict(model="llama_rope3-f32", kv_bits=8, quantized_kv_start=0, prefill_step_size=8),
        "llama_rope3-q4g32-kv4-start40": dict(model="llama_rope3-q4g32", kv_bits=4, quantized_kv_start=40),
        # --max-kv-size: RotatingKVCache(keep=4) for models without make_cache
        "qwen2-f32-maxkv32": dict(model="qwen2-f32", max_kv_size=32),
        "qwen3-q4g64-maxkv16-prefill8": dict(model="qwen3-q4g64", max_kv_size=16, prefill_step_size=8),
        "qwen2-bf16-maxkv16": dict(model="qwen2-bf16", max_kv_size=16),
        # --dtype: every floating-point weight (quantization scales and biases
        # too) cast after loading, as model.set_dtype does
        "llama-bf16-as-float32": dict(model="llama-bf16", dtype="float32"),
        "qwen3-q4g64-as-float32": dict(model="qwen3-q4g64", dtype="float32"),
        "qwen2-f32-as-float16": dict(model="qwen2-f32", dtype="float16"),
        "llama-f32-as-bfloat16": dict(model="llama-f32", dtype="bfloat16"),
    })
    return cases


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, help="MLX model directory")
    ap.add_argument("--case", help="case name (file stem and index key)")
    ap.add_argument("--suite", action="store_true", help="all standard cases over .cache/oracle/models")
    ap.add_argument("--out", type=Path, default=oracle_dir() / "cases")
    ap.add_argument("--prompt-len", type=int, default=24)
    ap.add_argument("--prompt-seed", type=int, default=1)
    ap.add_argument("--steps", type=int, default=DEFAULT_STEPS, help="greedy decode steps (max_tokens)")
    ap.add_argument("--prefill-step-size", type=int, default=DEFAULT_PREFILL_STEP_SIZE)
    ap.add_argument("--kv-bits", type=int, choices=[4, 8])
    ap.add_argument("--kv-group-size", type=int, default=DEFAULT_KV_GROUP_SIZE)
    ap.add_argument("--quantized-kv-start", type=int, default=DEFAULT_QUANTIZED_KV_START)
    ap.add_argument("--max-kv-size", type=int)
    ap.add_argument("--dtype", choices=["float32", "float16", "bfloat16"], help="cast the model after loading")
    ap.add_argument("--no-checks", action="store_true", help="skip the rerun and no-compile comparisons")
    ap.add_argument("--resume", action="store_true",
                    help="with --suite: keep the cases an earlier, stopped run left in index.partial.json")
    ap.add_argument("--shard", help="with --suite: I/N, only the cases at positions I mod N, into "
                    "index.partial-I.json (a GPU machine runs N at once: MLX's JIT compiles on one core each)")
    ap.add_argument("--merge-shards", type=int, metavar="N",
                    help="join the N shards' index.partial-I.json into index.json and exit")
    args = ap.parse_args()
    if args.merge_shards:
        return merge_shards(args.out, args.merge_shards)
    mx.set_default_device(oracle_device())

    if args.suite:
        models = oracle_dir() / "models"
        entries = {}
        shard, nshards = (int(x) for x in args.shard.split("/")) if args.shard else (0, 1)
        partial = args.out / (f"index.partial-{shard}.json" if args.shard else "index.partial.json")
        if args.resume and partial.exists():
            # A GPU call's time can end mid-suite (testdata/gpu/run.sh l1): the next call
            # goes on from the cases already made rather than making them again.
            entries = json.loads(partial.read_text())["cases"]
            print(f"logits: resuming after {len(entries)} cases", file=sys.stderr)
        for i, (case, spec) in enumerate(suite_cases(models).items()):
            if case in entries or i % nshards != shard:
                continue
            spec = dict(spec)
            model_dir = models / spec.pop("model")
            try:
                entries[case] = make_case(case, model_dir, args.out, steps=args.steps, checks=not args.no_checks, **spec)
            except Unsupported as err:
                # On the CPU every case must run; on a GPU a kernel MLX lacks is
                # recorded, and mlxgo must stop with the same error.
                if not recordable(err):
                    raise
                entries[case] = unsupported_case(case, model_dir, args.out, err, steps=args.steps, **spec)
                print(f"logits: {case}: MLX cannot run it on this device (call {err.failed_call}): {err}",
                      file=sys.stderr)
                continue
            # The entries so far, for a GPU run whose time ends before the suite does
            # (testdata/gpu/run.sh l1 then compares the cases made); index.json itself is
            # written only when every case is, so a CPU test never reads a partial suite.
            write_json(partial, {"format": "mlxgo-oracle-v1", "versions": versions(), "cases": entries})
            e = entries[case]
            print(f"logits: {case}: {e['logits_dtype']} chunks={e['prefill_chunks']} "
                  f"rerun={e.get('rerun_max_abs_diff')} no_compile={e.get('no_compile_max_abs_diff')}",
                  file=sys.stderr)
        if args.shard:
            write_json(partial, {"format": "mlxgo-oracle-v1", "versions": versions(), "cases": entries,
                                 "complete": True})
        else:
            update_index(args.out, entries)
        return 0
    if not args.model or not args.case:
        ap.error("--model and --case are required without --suite")
    spec = dict(prompt_len=args.prompt_len, prompt_seed=args.prompt_seed, steps=args.steps,
                prefill_step_size=args.prefill_step_size, kv_bits=args.kv_bits, kv_group_size=args.kv_group_size,
                quantized_kv_start=args.quantized_kv_start, max_kv_size=args.max_kv_size, dtype=args.dtype)
    try:
        entry = make_case(args.case, args.model, args.out, checks=not args.no_checks, **spec)
    except Unsupported as err:
        if not recordable(err):
            raise
        entry = unsupported_case(args.case, args.model, args.out, err, **spec)
        update_index(args.out, {args.case: entry})
        print(f"logits: {args.case}: MLX cannot run it on this device (call {err.failed_call}): {err}", file=sys.stderr)
        return 0
    update_index(args.out, {args.case: entry})
    print(json.dumps({k: entry[k] for k in ("file", "logits_dtype", "prefill_chunks")}), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
