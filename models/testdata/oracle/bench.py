"""A/B benchmark harness for `make bench`: mlx-lm (A) against mlxgo (B).

Runs the two commands alternately (A B A B ...) for several rounds on the same
model, prompt and settings, then prints medians, ratios B/A, the machine and
the versions. Each command is a shell template; these placeholders are filled
in: {python} {oracle} {model} {prompt_file} {prompt_tokens} {max_tokens}.

Measured by the harness, the same way for both commands:
  first_byte_s  process start -> first byte on stdout (the first token's text)
  wall_s        process start -> exit
  max_rss_bytes the child's peak resident set (wait4 rusage)
Reported by the command itself, when its stderr's last line is a JSON object
(bench_ref.py's format): prefill_tps, decode_tps, ttft_s, peak_memory_bytes,
weight_bytes, kv_bytes_per_token.

--bandwidth measures this machine's memory bandwidth (numpy copy, mx add) and
puts decode tok/s beside the ceiling bandwidth / bytes read per token.

    python bench.py --model .cache/oracle/models/smollm2-q4_1 --rounds 3
    python bench.py --model M --b-cmd './mlxgo generate -m {model} --max-tokens {max_tokens} --temp 0 --raw --verbose < {prompt_file}'
"""

import argparse
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from oracle_common import REPO_ROOT, oracle_dir, versions  # noqa: E402

HERE = Path(__file__).resolve().parent
DEFAULT_A = "{python} {oracle}/bench_ref.py --model {model} --prompt-file {prompt_file} --max-tokens {max_tokens}"

FILLER_SEED = 512


def make_prompt(model: Path, tokens: int) -> Path:
    """A fixed English text of about `tokens` tokens for this model's tokenizer
    (faker, seeded), cut at a token boundary and written once."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model))
    text = ""
    try:
        from faker import Faker
    except ImportError:  # the GPU machine has no faker: seeded common words instead
        import random

        rng = random.Random(FILLER_SEED)
        words = "the of and to in is was for on that with as by at from it an be this which or are".split()
        while len(tok.encode(text, add_special_tokens=False)) < tokens + 16:
            text += " ".join(rng.choice(words) for _ in range(64)) + ".\n\n"
    else:
        fake = Faker("en_US")
        Faker.seed(FILLER_SEED)
        while len(tok.encode(text, add_special_tokens=False)) < tokens + 16:
            text += fake.paragraph(nb_sentences=8) + "\n\n"
    ids = tok.encode(text, add_special_tokens=False)[:tokens]
    out = oracle_dir() / "bench" / f"prompt-{model.name}-{tokens}.txt"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(tok.decode(ids))
    return out


def run_once(cmd: str) -> dict:
    """Run one shell command; time its first stdout byte and exit, read its rusage."""
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        # exec: the shell becomes the command, so wait4's rusage is the command's own.
        proc = subprocess.Popen(["/bin/sh", "-c", "exec " + cmd], stdout=subprocess.PIPE, stderr=err,
                                cwd=REPO_ROOT)
        first = proc.stdout.read(1)
        t_first = time.perf_counter() if first else None
        rest = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        t_end = time.perf_counter()
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    res = {
        "rc": proc.returncode,
        "first_byte_s": (t_first - t0) if t_first else None,
        "wall_s": t_end - t0,
        "max_rss_bytes": usage.ru_maxrss * 1024,
        "stdout_bytes": len(first) + len(rest),
    }
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    if lines:
        try:
            reported = json.loads(lines[-1])
            if isinstance(reported, dict):
                res.update({k: v for k, v in reported.items() if k not in res})
        except json.JSONDecodeError:
            pass
    if proc.returncode != 0:
        res["stderr_tail"] = stderr[-2000:]
    return res


def measure_bandwidth(mib: int = 512, repeats: int = 5) -> dict:
    """Streaming bandwidth, best of `repeats`: numpy copy (read + write) and an
    MLX CPU add (two reads + one write)."""
    import mlx.core as mx
    import numpy as np

    n = mib * (1 << 20) // 4
    a = np.ones(n, dtype=np.float32)
    b = np.empty_like(a)
    np.copyto(b, a)
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        np.copyto(b, a)
        best = min(best, time.perf_counter() - t)
    np_copy = 2 * a.nbytes / best
    del a, b
    x = mx.ones((n,), dtype=mx.float32)
    y = mx.ones((n,), dtype=mx.float32)
    mx.eval(x, y, x + y)
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        mx.eval(x + y)
        best = min(best, time.perf_counter() - t)
    mx_add = 3 * x.nbytes / best
    return {"numpy_copy_GBps": np_copy / 1e9, "mx_add_GBps": mx_add / 1e9, "array_MiB": mib}


def machine() -> dict:
    cpu = ""
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        cpu = platform.processor()
    mem = 0
    try:
        mem = int(next(line.split()[1] for line in open("/proc/meminfo") if line.startswith("MemTotal"))) * 1024
    except (OSError, StopIteration):
        pass
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=REPO_ROOT, capture_output=True,
                            text=True).stdout.strip()
    info = {
        "cpu": cpu,
        "cores_online": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)),
        "memory_bytes": mem,
        "kernel": platform.release(),
        "loadavg": os.getloadavg(),
        "commit": commit,
    }
    mlxgo = REPO_ROOT / "mlxgo"
    if mlxgo.exists():
        info["mlxgo"] = subprocess.run([str(mlxgo), "version"], capture_output=True, text=True).stdout.strip()
    return info


def median(rows: list, key: str):
    vals = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
    return statistics.median(vals) if vals else None


METRICS = ["prefill_tps", "decode_tps", "ttft_s", "first_byte_s", "wall_s", "peak_memory_bytes", "max_rss_bytes"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, type=Path)
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--a-name", default="mlx-lm")
    ap.add_argument("--a-cmd", default=DEFAULT_A)
    ap.add_argument("--b-name", default="mlxgo")
    ap.add_argument("--b-cmd", help="the mlxgo command template; without it only A runs")
    ap.add_argument("--bandwidth", action="store_true", help="measure memory bandwidth and the decode ceiling")
    ap.add_argument("--json", type=Path, help="also write the full results here")
    args = ap.parse_args()

    model = args.model.resolve()
    prompt_file = make_prompt(model, args.prompt_tokens)
    fill = dict(python=shlex.quote(sys.executable), oracle=shlex.quote(str(HERE)), model=shlex.quote(str(model)),
                prompt_file=shlex.quote(str(prompt_file)), prompt_tokens=args.prompt_tokens,
                max_tokens=args.max_tokens)
    sides = [(args.a_name, args.a_cmd.format(**fill))]
    if args.b_cmd:
        sides.append((args.b_name, args.b_cmd.format(**fill)))

    results = {name: [] for name, _ in sides}
    for r in range(args.rounds):
        for name, cmd in sides:
            res = run_once(cmd)
            results[name].append(res)
            print(f"bench: round {r + 1} {name}: " + " ".join(
                f"{k}={res[k]:.4g}" for k in METRICS if isinstance(res.get(k), (int, float))) +
                (f" rc={res['rc']}" if res["rc"] else ""), file=sys.stderr)

    summary = {name: {k: median(rows, k) for k in METRICS + ["weight_bytes", "kv_bytes_per_token",
                                                               "prompt_tokens", "generated_tokens"]}
               for name, rows in results.items()}
    report = {"machine": machine(), "versions": versions(), "model": str(model), "prompt_file": str(prompt_file),
              "max_tokens": args.max_tokens, "rounds": args.rounds,
              "commands": dict(sides), "medians": summary, "runs": results}
    if len(sides) == 2:
        a, b = summary[sides[0][0]], summary[sides[1][0]]
        report["ratios_b_over_a"] = {k: (b[k] / a[k]) if a.get(k) and b.get(k) is not None else None
                                     for k in METRICS}
    if args.bandwidth:
        bw = measure_bandwidth()
        report["bandwidth"] = bw
        ceiling_bw = max(bw["numpy_copy_GBps"], bw["mx_add_GBps"]) * 1e9
        for name, s in summary.items():
            if s.get("weight_bytes") and s.get("decode_tps"):
                ctx = (s.get("prompt_tokens") or args.prompt_tokens) + args.max_tokens / 2
                per_token = s["weight_bytes"] + (s.get("kv_bytes_per_token") or 0) * ctx
                s["bytes_per_token"] = per_token
                s["ceiling_tps"] = ceiling_bw / per_token
                s["fraction_of_ceiling"] = s["decode_tps"] / s["ceiling_tps"]

    print(json.dumps({k: report[k] for k in report if k != "runs"}, indent=2))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0 if all(r["rc"] == 0 for rows in results.values() for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
