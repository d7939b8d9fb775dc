"""mlx-lm's side of run.sh's hostcost stage: the same three loops as
models/bench_test.go's BenchmarkSmolLM2BuildStep and BenchmarkSmolLM2Decode,
on the same model, so the host's share of a decode step can be compared:

  build      building one decode step's graph (forward for one token and its
             argmax, nothing evaluated), caches renewed every 32 steps
  sync       forward, argmax, eval, read the token, one step at a time
  pipelined  generate_step's loop: step n+1 built and async_eval'd before
             token n is read

    python hostcost_mlxlm.py --model DIR [--steps 200] [--only build|sync|pipelined] [--prompt-tokens 32]

--prompt-tokens sets the prompt the decode loops start from (the Go loops'
MLXGO_BENCH_PROMPT_TOKENS): token i is (100 + 37 i) mod the vocabulary, as
there.
"""

import argparse
import time
from pathlib import Path

import mlx.core as mx
from mlx_lm.models.cache import make_prompt_cache
from mlx_lm.utils import load_model


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, type=Path)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--only", choices=("build", "sync", "pipelined"), help="run one loop only (run.sh's graphs and hostprof stages)")
    ap.add_argument("--prompt-tokens", type=int, default=32, help="the decode loops' prompt length (run.sh's ctxcost stage)")
    args = ap.parse_args()
    model, _ = load_model(args.model)
    mx.eval(model.parameters())
    n = args.steps
    loops = ("build", "sync", "pipelined") if args.only is None else (args.only,)
    tok = mx.array([[100]])

    if "build" in loops:
        t = 0.0
        for done in range(0, n, 32):
            cache = make_prompt_cache(model)
            t0 = time.perf_counter()
            for _ in range(min(32, n - done)):
                mx.argmax(model(tok, cache=cache), -1)
            t += time.perf_counter() - t0
            del cache
        print(f"mlx-lm build: {t / n * 1e6:.0f} us/step")

    vocab = model.args.vocab_size
    prompt = mx.array([[(100 + 37 * i) % vocab for i in range(args.prompt_tokens)]])

    def step(x, cache):
        return mx.argmax(model(x, cache=cache)[:, -1, :], -1).reshape(1, 1)

    for name in (x for x in loops if x != "build"):
        cache = make_prompt_cache(model)
        y = step(prompt, cache)
        mx.eval(y)
        t0 = time.perf_counter()
        if name == "sync":
            for _ in range(n):
                y = step(y, cache)
                mx.eval(y)
                y.item()
        else:
            mx.async_eval(y)
            for _ in range(n):
                nxt = step(y, cache)
                mx.async_eval(nxt)
                y.item()
                y = nxt
            y.item()
        dt = time.perf_counter() - t0
        print(f"mlx-lm decode/{name}: {dt / n * 1e6:.0f} us/step {n / dt:.1f} tok/s (prompt {args.prompt_tokens})")
        del cache
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
