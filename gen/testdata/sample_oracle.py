"""mlx-lm's samplers and logits processors on fixed logits: the oracle for gen's
sampler tests.

Reads a JSON object {"samplers": [...], "processors": [...]} on stdin and
writes the results as JSON on stdout. Logits for step i are
mx.random.normal([1, vocab], dtype, 0, scale, key=mx.random.key(logits_seed + i))
(an explicit key: the global random state is untouched), so the Go test builds
the same arrays with the same MLX calls.

sampler case: {name, seed, vocab, steps, dtype, scale, logits_seed, temp, top_p,
  min_p, min_tokens_to_keep, top_k, xtc_probability, xtc_threshold, xtc_special_tokens}
  mx.random.seed(seed), then for each step the token that mlx-lm's
  make_sampler(...) draws from logits - logsumexp(logits, keepdims=True),
  exactly as generate_step computes it. -> {"tokens": [...]}
processor case: {name, vocab, dtype, scale, logits_seed, tokens, logit_bias,
  repetition_penalty, repetition_context_size, presence_penalty,
  presence_context_size, frequency_penalty, frequency_context_size}
  the logits after make_logits_processors(...), upcast to float32, as the
  uint32 bit patterns. -> {"bits": [...]}

    echo '{"samplers": [...], "processors": []}' | python sample_oracle.py
"""

import json
import sys

import mlx.core as mx
import numpy as np
from mlx_lm.sample_utils import make_logits_processors, make_sampler


def logits(case, step):
    dtype = getattr(mx, case["dtype"])
    key = mx.random.key(case["logits_seed"] + step)
    return mx.random.normal([1, case["vocab"]], dtype, 0.0, case["scale"], key=key)


def run_sampler(case):
    sampler = make_sampler(case["temp"], case["top_p"], case["min_p"], case["min_tokens_to_keep"],
                           top_k=case["top_k"], xtc_probability=case.get("xtc_probability") or 0.0,
                           xtc_threshold=case.get("xtc_threshold") or 0.0,
                           xtc_special_tokens=case.get("xtc_special_tokens"))
    mx.random.seed(case["seed"])
    out = []
    for i in range(case["steps"]):
        x = logits(case, i)
        logprobs = x - mx.logsumexp(x, keepdims=True)
        out.append(int(sampler(logprobs).item()))
    return {"tokens": out}


def run_processors(case):
    bias = {int(k): v for k, v in (case.get("logit_bias") or {}).items()} or None
    procs = make_logits_processors(bias, case.get("repetition_penalty"), case.get("repetition_context_size", 20),
                                   case.get("presence_penalty"), case.get("presence_context_size", 20),
                                   case.get("frequency_penalty"), case.get("frequency_context_size", 20))
    x = logits(case, 0)
    tokens = mx.array(case["tokens"], dtype=mx.int32)
    for p in procs:
        x = p(tokens, x)
    bits = np.array(x.astype(mx.float32)).view(np.uint32).reshape(-1)
    return {"bits": [int(b) for b in bits]}


def main():
    mx.set_default_device(mx.cpu)
    req = json.load(sys.stdin)
    out = {"samplers": {c["name"]: run_sampler(c) for c in req.get("samplers", [])},
           "processors": {c["name"]: run_processors(c) for c in req.get("processors", [])}}
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
