"""mlx-lm's generate_step with sampling: the oracle for gen.Generate.

Reads a JSON list of cases on stdin; for each, loads the model directory with
mlx_lm.utils.load_model, seeds MLX's global random state with
mx.random.seed(seed) AFTER loading (so the draws made while mlx-lm builds the
model do not count), and runs generate_step with make_sampler and
make_logits_processors. Writes {name: [token ids]} as JSON on stdout.

case: {name, model, prompt, steps, seed, temp, top_p, min_p, top_k,
  repetition_penalty, repetition_context_size, prefill_step_size, kv_bits,
  quantized_kv_start, max_kv_size}

    echo '[{"name": "x", "model": ".cache/oracle/models/qwen3-bf16", ...}]' | python generate_oracle.py
"""

import json
from pathlib import Path
import sys

import mlx.core as mx
from mlx_lm.generate import generate_step
from mlx_lm.sample_utils import make_logits_processors, make_sampler
from mlx_lm.utils import load_model


def run(case):
    model, _ = load_model(Path(case["model"]))
    mx.random.seed(case["seed"])
    sampler = make_sampler(case["temp"], case["top_p"], case["min_p"], 1, top_k=case["top_k"])
    procs = make_logits_processors(None, case.get("repetition_penalty") or None,
                                   case.get("repetition_context_size") or 20)
    out = []
    for tok, _ in generate_step(mx.array(case["prompt"], dtype=mx.int32), model, max_tokens=case["steps"],
                                sampler=sampler, logits_processors=procs,
                                prefill_step_size=case["prefill_step_size"],
                                kv_bits=case.get("kv_bits") or None, kv_group_size=64,
                                quantized_kv_start=case.get("quantized_kv_start", 5000),
                                max_kv_size=case.get("max_kv_size") or None):
        out.append(int(tok))
    return out


def main():
    mx.set_default_device(mx.cpu)
    cases = json.load(sys.stdin)
    json.dump({c["name"]: run(c) for c in cases}, sys.stdout)


if __name__ == "__main__":
    main()
