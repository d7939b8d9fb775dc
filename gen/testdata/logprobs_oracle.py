"""mlx-lm's generate_step log-probabilities: the oracle for gen's Logprobs.

Reads a JSON list of cases on stdin; for each, loads the model directory with
mlx_lm.utils.load_model, seeds MLX's global random state after loading (as
generate_oracle.py does), and runs generate_step with make_sampler and
make_logits_processors (repetition, presence and frequency penalties). For
every step it records the token, the float32 bits of logprobs[token] (the
logprobs generate_step yields, in the logits' dtype, widened exactly), and
the `top` most likely tokens with their bits, ordered by value descending and
then by token id (a stable sort: the order gen documents; mlx_lm.server's
_format_top_logprobs leaves argpartition's order).

case: {name, model, prompt, steps, seed, temp, top_p, min_p, top_k,
  repetition_penalty, presence_penalty, frequency_penalty,
  frequency_context_size, top}
-> {name: [{"token", "bits", "top_ids", "top_bits"}, ...]}
"""

import json
from pathlib import Path
import sys

import mlx.core as mx
import numpy as np
from mlx_lm.generate import generate_step
from mlx_lm.sample_utils import make_logits_processors, make_sampler
from mlx_lm.utils import load_model


def run(case):
    model, _ = load_model(Path(case["model"]))
    mx.random.seed(case["seed"])
    sampler = make_sampler(case["temp"], case["top_p"], case["min_p"], 1, top_k=case["top_k"])
    procs = make_logits_processors(None, case.get("repetition_penalty") or None, 20,
                                   case.get("presence_penalty") or None, 20,
                                   case.get("frequency_penalty") or None,
                                   case.get("frequency_context_size") or 20)
    out = []
    for tok, logprobs in generate_step(mx.array(case["prompt"], dtype=mx.int32), model,
                                       max_tokens=case["steps"], sampler=sampler,
                                       logits_processors=procs):
        vals = np.array(logprobs.astype(mx.float32))
        bits = vals.view(np.uint32)
        order = np.argsort(-vals, kind="stable")[: case["top"]]
        out.append({"token": int(tok), "bits": int(bits[tok]),
                    "top_ids": [int(i) for i in order], "top_bits": [int(bits[i]) for i in order]})
    return out


def main():
    mx.set_default_device(mx.cpu)
    cases = json.load(sys.stdin)
    json.dump({c["name"]: run(c) for c in cases}, sys.stdout)


if __name__ == "__main__":
    main()
