"""The mlx-lm half of `make bench`: one generation, timed, as one JSON line.

Runs mlx-lm's own generate_step (the loop mlx_lm.generate uses) on a model
directory with a prompt of about 512 tokens and greedy decoding, printing
each generated token's text to stdout as it is produced (so a harness can
time the first byte, as it does for `mlxgo generate`) and, at the end, one
JSON line on stderr:

  prompt_tokens, generated_tokens
  prefill_tps     prompt tokens / seconds from the start of the prefill until
                  the first generated token is available (mlx-lm's prompt_tps)
  decode_tps      (generated - 1) / seconds from the first to the last token
  ttft_s          first token, measured from this process's start as the kernel
                  recorded it (/proc/self/stat field 22), so interpreter start,
                  imports and model load all count
  load_s          seconds spent in mlx_lm.load (included in ttft_s)
  peak_memory_bytes  mx.get_peak_memory() at the end
  weight_bytes    bytes of all parameters (what one decode step must read)
  kv_bytes_per_token  bytes of K and V one token adds to the cache

With MLXGO_BENCH_STEP_TIMES=FILE it also writes each decode step's wall time
(ms, one a line) there.

Generation does not stop at EOS: random-weight models would stop at random
points, and both sides of the comparison must do the same work.

    python bench_ref.py --model .cache/oracle/models/smollm2-q4_1 --prompt-file P --max-tokens 128
    python bench_ref.py --model DIR --prompt-tokens 512 --dtype float16   # cast first (1B dtype study)
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path


def process_start_epoch() -> float:
    """When the kernel started this process, as a time.time() value."""
    with open("/proc/self/stat") as f:
        # comm (field 2) may contain spaces; fields after the closing paren are fixed.
        fields = f.read().rsplit(")", 1)[1].split()
    start_ticks = int(fields[19])  # field 22 overall: starttime in clock ticks since boot
    # /proc/stat's btime is whole seconds; /proc/uptime is exact to 10 ms, so
    # "now minus the process's age" is the sharper start time (mlxgo does the same).
    with open("/proc/uptime") as f:
        uptime = float(f.read().split()[0])
    age = uptime - start_ticks / os.sysconf("SC_CLK_TCK")
    return time.time() - age


T_START = process_start_epoch()

import mlx.core as mx  # noqa: E402  (imports count towards time to first token)
from mlx.utils import tree_flatten, tree_map_with_path  # noqa: E402
from mlx_lm import load  # noqa: E402
from mlx_lm.generate import generate_step  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from oracle_common import oracle_device  # noqa: E402


def cast_model(model, dtype):
    """mlx_lm.convert's cast: every floating parameter except quantized scales' kin."""
    target = getattr(mx, dtype)
    pred = getattr(model, "cast_predicate", lambda _: True)
    model.update(tree_map_with_path(
        lambda k, v: v.astype(target) if pred(k) and mx.issubdtype(v.dtype, mx.floating) else v,
        model.parameters()))
    mx.eval(model.parameters())


def kv_bytes_per_token(model, dtype_size: int) -> int:
    args = vars(model.args)
    if isinstance(args.get("text_config"), dict):  # a multimodal wrapper (qwen3_5, gemma3): its language model's
        args = args["text_config"]
    heads = args["num_attention_heads"]
    kv_heads = args.get("num_key_value_heads") or heads
    head_dim = args.get("head_dim") or args["hidden_size"] // heads
    # a hybrid's linear-attention layers (is_linear) keep a fixed-size state, no K and V
    layers = sum(1 for layer in model.layers if not getattr(layer, "is_linear", False))
    return 2 * layers * kv_heads * head_dim * dtype_size


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, type=Path)
    ap.add_argument("--prompt-file", type=Path, help="raw prompt text (no chat template)")
    ap.add_argument("--prompt-tokens", type=int, default=512, help="random prompt length when there is no --prompt-file")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--prefill-step-size", type=int, default=2048)
    ap.add_argument("--dtype", choices=["float32", "float16", "bfloat16"], help="cast parameters after loading")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    mx.set_default_device(oracle_device())

    t = time.time()
    model, tokenizer = load(str(args.model))
    if args.dtype:
        cast_model(model, args.dtype)
    load_s = time.time() - t

    if args.prompt_file:
        prompt = tokenizer.encode(args.prompt_file.read_text(), add_special_tokens=True)
    else:
        import numpy as np

        rng = np.random.default_rng(args.seed)
        prompt = rng.integers(0, model.args.vocab_size, size=args.prompt_tokens).tolist()

    detok = tokenizer.detokenizer
    detok.reset()
    stamps = []
    t_prefill = time.time()
    for tok, _ in generate_step(mx.array(prompt), model, max_tokens=args.max_tokens,
                                prefill_step_size=args.prefill_step_size):
        stamps.append(time.time())
        detok.add_token(tok)
        sys.stdout.write(detok.last_segment)
        sys.stdout.flush()
    detok.finalize()
    sys.stdout.write(detok.last_segment + "\n")
    sys.stdout.flush()

    params = tree_flatten(model.parameters())
    weight_bytes = sum(v.nbytes for _, v in params)
    act_dtype = next((v.dtype for k, v in params if k.endswith("norm.weight")), mx.float32)
    n = len(stamps)
    out = {
        "impl": "mlx-lm",
        "model": str(args.model),
        "dtype": args.dtype or "as saved",
        "prompt_tokens": len(prompt),
        "generated_tokens": n,
        "prefill_tps": len(prompt) / (stamps[0] - t_prefill),
        "decode_tps": (n - 1) / (stamps[-1] - stamps[0]) if n > 1 else None,
        "ttft_s": stamps[0] - T_START,
        "load_s": load_s,
        "peak_memory_bytes": mx.get_peak_memory(),
        "weight_bytes": weight_bytes,
        "kv_bytes_per_token": kv_bytes_per_token(model, act_dtype.size),
        "mlx": mx.__version__,
    }
    print(json.dumps(out), file=sys.stderr)
    if os.environ.get("MLXGO_BENCH_STEP_TIMES"):
        # each decode step's wall time in ms, one a line (testdata/gpu/run.sh steps)
        Path(os.environ["MLXGO_BENCH_STEP_TIMES"]).write_text(
            "".join(f"{(b - a) * 1e3:.3f}\n" for a, b in zip(stamps, stamps[1:])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
