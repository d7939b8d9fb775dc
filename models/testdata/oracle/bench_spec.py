"""`make bench-spec`: speculative decoding's speed-up, mlxgo against mlx-lm.

Four runs per round, alternating in this order (A B C D, A B C D, ...) on the
same target, draft, prompt ids and settings (greedy, EOS ignored so every run
makes the same number of tokens):
  mlx-lm plain        generate_step (what mlx_lm.generate runs without --draft-model)
  mlx-lm speculative  speculative_generate_step (mlx_lm.generate --draft-model)
  mlxgo plain         mlxgo generate
  mlxgo speculative   mlxgo generate --draft-model
Each run is its own process. The figure is decode tok/s, measured the same way
on both sides: (generated - 1) / seconds from the first token to the last. The
report gives medians, each implementation's speed-up (speculative / plain),
mlxgo's speculative against mlx-lm's, the acceptance rates, the machine and the
versions.

    python bench_spec.py --model .cache/oracle/models/smollm2-q4_1 --rounds 3
    python bench_spec.py --ref --model M --draft D --max-tokens 64   # one mlx-lm run (used by the harness)
"""

import argparse
import json
import platform
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from oracle_common import REPO_ROOT, versions  # noqa: E402

PROMPT = "Write a short story about a lighthouse keeper who finds a message in a bottle."


def prompt_ids(model: Path) -> list:
    """The chat prompt as mlx_lm.generate encodes it (template, then no special tokens)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model))
    text = tok.apply_chat_template([{"role": "user", "content": PROMPT}], tokenize=False, add_generation_prompt=True)
    return tok.encode(text, add_special_tokens=False), text


def ref(args) -> int:
    """One mlx-lm generation, timed; one JSON line on stderr."""
    import mlx.core as mx
    from mlx_lm import load
    from mlx_lm.generate import generate_step, speculative_generate_step

    mx.set_default_device(mx.cpu)
    model, _ = load(str(args.model))
    ids = json.loads(Path(args.prompt_ids).read_text())
    prompt = mx.array(ids, dtype=mx.uint32)
    if args.draft:
        draft, _ = load(str(args.draft))
        steps = speculative_generate_step(prompt, model, draft, num_draft_tokens=args.num_draft_tokens,
                                          max_tokens=args.max_tokens)
    else:
        steps = ((t, lp, False) for t, lp in generate_step(prompt, model, max_tokens=args.max_tokens))
    t0 = time.perf_counter()
    first = last = None
    n = accepted = 0
    for tok, _, from_draft in steps:
        last = time.perf_counter()
        if first is None:
            first = last
        n += 1
        accepted += int(bool(from_draft))
    out = {"impl": "mlx-lm", "generated_tokens": n, "prefill_s": first - t0,
           "decode_tps": (n - 1) / (last - first) if n > 1 else 0.0, "accepted_tokens": accepted}
    print(json.dumps(out), file=sys.stderr)
    return 0


def run_once(cmd: list) -> dict:
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO_ROOT)
    if p.returncode != 0:
        raise RuntimeError(f"{shlex.join(cmd)} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    lines = [l for l in p.stderr.strip().splitlines() if l.startswith("{")]
    if not lines:
        raise RuntimeError(f"{shlex.join(cmd)} printed no JSON line:\n{p.stderr[-2000:]}")
    return json.loads(lines[-1])


def machine() -> dict:
    out = {"machine": platform.machine(), "system": platform.platform()}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                out["cpu"] = line.split(":", 1)[1].strip()
                break
        out["cpus"] = len([l for l in Path("/proc/cpuinfo").read_text().splitlines() if l.startswith("processor")])
        out["loadavg"] = Path("/proc/loadavg").read_text().split()[:3]
    except OSError:
        pass
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, type=Path)
    ap.add_argument("--draft", type=Path, help="the draft model (default: the model itself)")
    ap.add_argument("--num-draft-tokens", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--mlxgo", default="./mlxgo")
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("--ref", action="store_true", help="run one mlx-lm generation (internal)")
    ap.add_argument("--prompt-ids", help="with --ref: a JSON file of prompt ids")
    args = ap.parse_args()
    if args.ref:
        return ref(args)
    draft = args.draft or args.model
    ids, text = prompt_ids(args.model)
    ids_file = REPO_ROOT / ".cache" / "bench" / "spec-prompt.json"
    ids_file.parent.mkdir(parents=True, exist_ok=True)
    ids_file.write_text(json.dumps(ids))
    py, me = sys.executable, str(Path(__file__).resolve())
    common = ["--model", str(args.model), "--prompt-ids", str(ids_file), "--max-tokens", str(args.max_tokens)]
    k = str(args.num_draft_tokens)
    gen = [args.mlxgo, "generate", "-m", str(args.model), "-p", PROMPT, "--temp", "0", "--ignore-eos",
           "--max-tokens", str(args.max_tokens), "--json-stats"]
    cmds = {
        "mlx-lm plain": [py, me, "--ref", *common],
        "mlx-lm speculative": [py, me, "--ref", *common, "--draft", str(draft), "--num-draft-tokens", k],
        "mlxgo plain": gen,
        "mlxgo speculative": gen + ["--draft-model", str(draft), "--num-draft-tokens", k],
    }
    rows = {name: [] for name in cmds}
    for r in range(args.rounds):
        for name, cmd in cmds.items():
            res = run_once(cmd)
            rows[name].append(res)
            print(f"bench-spec: round {r + 1} {name}: {res['decode_tps']:.2f} tok/s, {res['generated_tokens']} tokens"
                  + (f", accepted {res.get('accepted_tokens', 0)}" if "speculative" in name else ""), file=sys.stderr)
    med = {name: statistics.median(x["decode_tps"] for x in rs) for name, rs in rows.items()}
    report = {
        "machine": machine(), "versions": versions(),
        "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                 cwd=REPO_ROOT).stdout.strip(),
        "model": str(args.model), "draft": str(draft), "num_draft_tokens": args.num_draft_tokens,
        "max_tokens": args.max_tokens, "rounds": args.rounds, "prompt_tokens": len(ids), "prompt": PROMPT,
        "median_decode_tps": med,
        "speedup_mlx_lm": med["mlx-lm speculative"] / med["mlx-lm plain"],
        "speedup_mlxgo": med["mlxgo speculative"] / med["mlxgo plain"],
        "mlxgo_vs_mlx_lm_speculative": med["mlxgo speculative"] / med["mlx-lm speculative"],
        # accepted draft tokens per run (greedy: the same in every round)
        "accepted_tokens_mlx_lm": statistics.median(x["accepted_tokens"] for x in rows["mlx-lm speculative"]),
        "accepted_tokens_mlxgo": statistics.median(x.get("accepted_tokens", 0) for x in rows["mlxgo speculative"]),
        "acceptance_rate_mlxgo": statistics.median(x.get("acceptance_rate", 0) for x in rows["mlxgo speculative"]),
        "runs": rows,
    }
    print(json.dumps({k: v for k, v in report.items() if k != "runs"}, indent=2))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
