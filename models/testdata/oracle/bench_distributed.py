"""`make bench-distributed`: tensor-parallel decode, 1 rank against N, mlxgo against mlx-lm.

Each round runs, in turn (A B A B ...), on the same model, prompt and token count:
  mlx-lm, 1 process:   this script with --ref (generate_step on the whole model)
  mlxgo,  1 process:   mlxgo generate --json-stats
  mlx-lm, N ranks:     mlx.launch -n N --backend ring this script --ref (model.shard(group))
  mlxgo,  N ranks:     mlxgo launch -n N -- generate --shard tensor --json-stats
and reports medians of decode tok/s and rank 0's peak memory, the ratios, and
the communication time of one decode step: the latency of one all_sum of a
[1, 1, hidden] activation (timed by the --ref ranks over 200 calls) times the
2 all_sums per layer (o_proj and down_proj). Ranks are local processes on
loopback: on a machine with fewer cores than ranks x threads they share
cores, which this figure does not separate out. Greedy, EOS ignored (random
weights). JSON in <oracle>/../bench/distributed.json.

    python bench_distributed.py --model .cache/oracle/models/llama1b-q4g64 --ranks 2 --max-tokens 32 --rounds 2
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from oracle_common import REPO_ROOT, oracle_dir, versions, write_json  # noqa: E402

PROMPT = "Write a short story about a lighthouse keeper who finds a message in a bottle."


def ref(args) -> int:
    import mlx.core as mx
    from mlx_lm.generate import generate_step
    from mlx_lm.utils import load

    group = mx.distributed.init()
    model, tokenizer = load(args.model)
    if group.size() > 1:
        model.shard(group)
    mx.eval(model.parameters())
    ids = mx.array(tokenizer.encode(PROMPT), dtype=mx.uint32)
    times = []
    for _ in generate_step(ids, model, max_tokens=args.max_tokens):
        times.append(time.perf_counter())
    decode_tps = (len(times) - 1) / (times[-1] - times[0])
    comm = 0.0
    if group.size() > 1:
        cfg = json.loads((Path(args.model) / "config.json").read_text())
        x = mx.zeros((1, 1, cfg["hidden_size"]), dtype=model.model.embed_tokens.weight.dtype
                     if hasattr(model.model.embed_tokens, "weight") else mx.bfloat16)
        mx.eval(mx.distributed.all_sum(x, group=group))
        t0 = time.perf_counter()
        for _ in range(200):
            mx.eval(mx.distributed.all_sum(x, group=group))
        comm = (time.perf_counter() - t0) / 200 * 2 * cfg["num_hidden_layers"]
    if group.rank() == 0:
        print(json.dumps({"impl": "mlx-lm", "ranks": group.size(), "decode_tps": decode_tps,
                          "peak_memory_bytes": mx.get_peak_memory(), "comm_s_per_step": comm}), file=sys.stderr)
    return 0


def mlx_launch(py: str) -> list:
    """mlx.launch: the venv's script, else its entry point run by this python
    (a pip --target install has no scripts on the path)."""
    script = Path(py).parent / "mlx.launch"
    if script.exists():
        return [str(script)]
    return [py, "-c", "import sys; from mlx._distributed_utils.launch import main; sys.argv[0] = 'mlx.launch'; sys.exit(main())"]


def last_json(stderr: str) -> dict:
    for line in reversed(stderr.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError("no JSON line in:\n" + stderr)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--mlxgo", default=str(REPO_ROOT / "mlxgo"))
    ap.add_argument("--ref", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.ref:
        return ref(args)
    py, me, n, t = sys.executable, str(Path(__file__).resolve()), args.ranks, str(args.max_tokens)
    gen = ["generate", "-m", args.model, "-p", PROMPT, "--raw", "--max-tokens", t, "--ignore-eos", "--json-stats"]
    cmds = {
        ("mlx-lm", 1): [py, me, "--ref", "--model", args.model, "--max-tokens", t],
        ("mlxgo", 1): [args.mlxgo, *gen],
        ("mlx-lm", n): [*mlx_launch(py), "-n", str(n), "--backend", "ring", "--hosts", "127.0.0.1",
                        "--python", py, me, "--ref", "--model", args.model, "--max-tokens", t],
        ("mlxgo", n): [args.mlxgo, "launch", "-n", str(n), "--starting-port", "0", "--", *gen, "--shard", "tensor"],
    }
    rows = {k: [] for k in cmds}
    for r in range(args.rounds):
        for k, cmd in cmds.items():
            p = subprocess.run(cmd, capture_output=True, text=True, env=os.environ | {"PYTHONUNBUFFERED": "1"})
            if p.returncode != 0:
                raise RuntimeError(f"{k}: exit {p.returncode}\n{p.stderr}")
            j = last_json(p.stderr)
            rows[k].append(j)
            print(f"round {r + 1} {k[0]:6} x{k[1]}: {j['decode_tps']:.2f} tok/s, peak {j['peak_memory_bytes'] / 1e9:.3f} GB"
                  + (f", comm {1e3 * j['comm_s_per_step']:.2f} ms/step" if j.get("comm_s_per_step") else ""), flush=True)
    med = {f"{k[0]} x{k[1]}": {"decode_tps": statistics.median(x["decode_tps"] for x in v),
                               "peak_memory_bytes": statistics.median(x["peak_memory_bytes"] for x in v)}
           for k, v in rows.items()}
    comm = statistics.median(x["comm_s_per_step"] for x in rows[("mlx-lm", n)])
    report = {"model": args.model, "ranks": n, "max_tokens": args.max_tokens, "rounds": args.rounds,
              "nproc": os.cpu_count(), "load_average": os.getloadavg(), "versions": versions(), "medians": med,
              "mlxgo_over_mlx_lm": {f"x{k}": med[f"mlxgo x{k}"]["decode_tps"] / med[f"mlx-lm x{k}"]["decode_tps"] for k in (1, n)},
              "comm_s_per_step": comm, "runs": {f"{k[0]} x{k[1]}": v for k, v in rows.items()}}
    out = oracle_dir().parent / "bench" / "distributed.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    write_json(out, report)
    for k, v in med.items():
        print(f"median {k}: {v['decode_tps']:.2f} tok/s, peak {v['peak_memory_bytes'] / 1e9:.3f} GB")
    print(f"mlxgo/mlx-lm: {report['mlxgo_over_mlx_lm']}; all_sum comm per step {1e3 * comm:.2f} ms; wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
