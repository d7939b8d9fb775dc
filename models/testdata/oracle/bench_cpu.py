"""`make bench-cpu`: mlxgo against llama.cpp on the CPU, same GGUF files, one run.

Engines
  mlxgo      ./mlxgo generate -m FILE --raw --temp 0 --ignore-eos --max-tokens N --json-stats
             (a fresh process per run; its own --json-stats figures, stderr's last line)
  llama.cpp  llama-cpp-python (pinned, built from source with GGML_NATIVE=ON in
             .cache/bench-venv), in this process: a fresh Llama per run,
             n_threads = n_threads_batch = physical cores, logits_all off; the
             prompt's token ids go to eval() in one call (prefill), then greedy
             (argmax of the last logits) one token per eval() (decode), EOS ignored.
  mlxgo-mlx  mlxgo with --kernels mlx (MLX's own scalar kernels), fewer rounds.
  mlxgo-fast mlxgo with --kernels fast (int8 activations in 4-/8-bit matmuls: L3), in the same rounds.

Files: SmolLM2-135M-Instruct Q4_1 (make data-smollm2) and a Q8_0 made from it by
llama.cpp's own quantize (llama_model_quantize, allow_requantize; cached in
.cache/bench/).

Prompt: a fixed, seeded text whose tokenization is exactly --prompt-tokens ids
with mlxgo's tokenizer (mlxgo tokenize) and with llama.cpp's; the two id lists
are asserted equal, mlxgo gets the text, llama.cpp the ids.

Rounds alternate the engines (A B A B, the order flipping each round); medians
and ratios mlxgo/llama.cpp are reported. Timings, the same way for both:
  prefill_tps   prompt tokens / prefill time (mlxgo: its own figure)
  decode_tps    tokens after the first / time after the first (mlxgo: its own figure)
  ttft_s        time from the start of prefill to the first token (mlxgo: its
                ttft_s less load_s, as its ttft_s counts from process start)
  cores_busy    CPU time / wall time: mlxgo from wait4's rusage of the child
                (whole process, load included); llama.cpp from time.process_time
                around prefill + decode
The machine is shared: before each run the harness waits (up to --quiet-wait
s) for it to go idle, records the cores everything else kept busy during the
run (others_cores, from /proc/stat) and repeats a run where that was >= 0.1
(--retries times at most, keeping the cleanest).
Bandwidth: reads of a 1 GiB array by numpy reductions (float32 sum and max,
int64 sum) in `threads` threads, best of 5, at the start and the end of the run,
the fastest taken (a ceiling; the machine is shared); the decode ceiling is bandwidth / bytes read per token (weights +
KV of the mean context), and each engine's fraction is decode_tps / ceiling.

Also: a long prefill (--long-prompt tokens, max tokens 1) for mlxgo and
llama.cpp, and `mlxgo serve --batch B`: aggregate tok/s of B concurrent
streamed completions against one stream on the same server
(server/testdata/bench_serve.py's client).
"""
import argparse
import ctypes
import json
import os
import platform
import random
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "server" / "testdata"))
from bench import machine  # noqa: E402  (stdlib only at import time)
import bench_serve  # noqa: E402

import numpy as np  # noqa: E402
import llama_cpp  # noqa: E402

LLAMA_CPP_PYTHON = "0.3.36"
SEED = 512

# ---------------------------------------------------------------- machine, versions


def physical_cores() -> int:
    """Distinct (physical id, core id) pairs in /proc/cpuinfo."""
    cores, phys, core = set(), None, None
    try:
        for line in open("/proc/cpuinfo"):
            k, _, v = line.partition(":")
            k = k.strip()
            if k == "physical id":
                phys = v.strip()
            elif k == "core id":
                core = v.strip()
            elif not k and core is not None:
                cores.add((phys, core))
                phys = core = None
        if core is not None:
            cores.add((phys, core))
    except OSError:
        pass
    return len(cores) or os.cpu_count() or 1


def ggml_build() -> str:
    """ggml_version() and ggml_commit() of the libggml the llama_cpp package loaded."""
    for lib in sorted((Path(llama_cpp.__file__).parent / "lib").glob("libggml*.so")):
        try:
            dll = ctypes.CDLL(str(lib))
            dll.ggml_version.restype = ctypes.c_char_p
            dll.ggml_commit.restype = ctypes.c_char_p
            return f"ggml {dll.ggml_version().decode()} ({dll.ggml_commit().decode()})"
        except (OSError, AttributeError):
            continue
    return "ggml version unknown"


def versions(mlxgo: str) -> dict:
    from importlib import metadata
    out = {
        "mlxgo": subprocess.run([mlxgo, "version"], capture_output=True, text=True).stdout.strip(),
        "commit": subprocess.run(["git", "describe", "--always", "--dirty"], cwd=REPO, capture_output=True,
                                 text=True).stdout.strip(),
        "commit_full": subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True,
                                      text=True).stdout.strip(),
        "llama_cpp_python": metadata.version("llama-cpp-python"),
        "llama_cpp_system_info": llama_cpp.llama_print_system_info().decode().strip(),
        "go": subprocess.run(["go", "version"], capture_output=True, text=True).stdout.strip(),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
    }
    out["llama_cpp_build"] = ggml_build()
    stamp = Path(sys.prefix) / ".stamp"
    if stamp.exists() and stamp.read_text().strip():
        out["llama_cpp_build"] += "; " + stamp.read_text().strip()
    return out


# ---------------------------------------------------------------- files, prompt


def quantize_q8(src: Path, dst: Path) -> dict:
    """dst = src requantized to Q8_0 by llama.cpp (allow_requantize: src is Q4_1)."""
    info = {"source": str(src), "path": str(dst), "ftype": "MOSTLY_Q8_0", "allow_requantize": True}
    if dst.exists():
        info["cached"] = True
        return info
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_suffix(".tmp")
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0
    params.allow_requantize = True
    params.nthread = physical_cores()
    rc = llama_cpp.llama_model_quantize(str(src).encode(), str(tmp).encode(), ctypes.byref(params))
    if rc != 0 or not tmp.exists():
        raise SystemExit(f"bench-cpu: llama_model_quantize {src} -> Q8_0 refused (rc={rc})")
    tmp.rename(dst)
    info["cached"] = False
    return info


WORDS = ("the of and to in is was for on that with as by at from his her their it an be this are which or had "
         "not but have were one all they new more when who first after two been would also time there year city "
         "river music water people school family history world house small light north south early during "
         "village church market garden mountain island station bridge letter winter summer morning evening "
         "teacher doctor farmer engine paper story country company language science number second large "
         "between under against because without through before around across").split()


def base_text(n_words: int) -> str:
    """Seeded pseudo-English: sentences of common words, paragraphs of 8 sentences."""
    rng = random.Random(SEED)
    paras = []
    while sum(len(p.split()) for p in paras) < n_words:
        sents = []
        for _ in range(8):
            w = [rng.choice(WORDS) for _ in range(rng.randint(6, 16))]
            sents.append(" ".join(w).capitalize() + ".")
        paras.append(" ".join(sents))
    return "\n\n".join(paras)


def mlxgo_tokenize(mlxgo: str, model: Path, text: str) -> list:
    out = subprocess.run([mlxgo, "tokenize", "-m", str(model)], input=text + "\n", capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout)


def make_prompt(mlxgo: str, model: Path, tokens: int, vocab_llama) -> tuple:
    """Text of exactly `tokens` tokens for both tokenizers; returns (text, ids)."""
    text = base_text(tokens * 2)
    ids = mlxgo_tokenize(mlxgo, model, text)
    assert len(ids) > tokens + 8, "base text too short"
    for n in range(tokens, tokens + 64):
        cut = vocab_llama.detokenize(ids[:n]).decode("utf-8", errors="strict").rstrip()
        got = mlxgo_tokenize(mlxgo, model, cut)
        if len(got) == tokens:
            theirs = vocab_llama.tokenize(cut.encode(), add_bos=True, special=True)  # add_special: BOS as the file says
            if theirs != got:
                raise SystemExit(f"bench-cpu: mlxgo and llama.cpp tokenize the {tokens}-token prompt differently "
                                 f"(first difference at {next(i for i, (a, b) in enumerate(zip(got, theirs)) if a != b) if any(a != b for a, b in zip(got, theirs)) else min(len(got), len(theirs))})")
            return cut, got
    raise SystemExit(f"bench-cpu: no cut of the text tokenizes to exactly {tokens} tokens")


# ---------------------------------------------------------------- bandwidth


def measure_bandwidth(threads: int, gib: float = 1.0, repeats: int = 5) -> dict:
    """Read bandwidth: numpy reductions (float32 sum, float32 max, int64 sum) over a
    1 GiB array split across 1 and `threads` threads, best of `repeats` each; the
    ceiling is the fastest of them on `threads` threads."""
    n = int(gib * (1 << 30)) // 4
    a = np.ones(n, dtype=np.float32)
    kernels = {"sum_f32": lambda p: np.add.reduce(p), "max_f32": lambda p: np.maximum.reduce(p),
               "sum_i64": lambda p: np.add.reduce(p.view(np.int64))}

    def once(fn, parts):
        ts = [threading.Thread(target=fn, args=(p,)) for p in parts]
        t = time.perf_counter()
        for th in ts:
            th.start()
        for th in ts:
            th.join()
        return time.perf_counter() - t

    res = {"array_GiB": gib, "method": f"numpy reductions in threads, best of {repeats}", "GBps": {}}
    for k in sorted({1, threads}):
        parts = np.array_split(a, k)
        for name, fn in kernels.items():
            once(fn, parts)
            res["GBps"][f"{name}_{k}t"] = a.nbytes / min(once(fn, parts) for _ in range(repeats)) / 1e9
    res["read_GBps_1t"] = max(v for key, v in res["GBps"].items() if key.endswith("_1t"))
    res["read_GBps"] = max(v for key, v in res["GBps"].items() if key.endswith(f"_{threads}t"))
    del a
    return res


# ---------------------------------------------------------------- engines

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_stat() -> tuple:
    """(busy, steal) seconds of the whole machine so far, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    busy = v[0] + v[1] + v[2] + v[5] + v[6]  # user nice system irq softirq
    steal = v[7] if len(v) > 7 else 0
    return busy / CLK_TCK, steal / CLK_TCK


QUIET = {"max_wait_s": 30.0, "threshold_cores": 0.3, "waited_s": 0.0}


def wait_quiet() -> float:
    """Before a measured run: wait (up to QUIET's max_wait_s) until the machine
    keeps fewer than threshold_cores busy over half a second; returns the
    cores busy at the last sample."""
    t_end = time.perf_counter() + QUIET["max_wait_s"]
    while True:
        a, t = cpu_stat()[0], time.perf_counter()
        time.sleep(0.5)
        busy = (cpu_stat()[0] - a) / (time.perf_counter() - t)
        if busy < QUIET["threshold_cores"] or time.perf_counter() > t_end:
            return busy
        QUIET["waited_s"] += 1.0
        time.sleep(0.5)


def measured(run, retries: int, limit: float = 0.1) -> dict:
    """run() until the rest of the machine kept fewer than `limit` cores busy
    during it, at most 1 + retries times; the cleanest run is kept."""
    best = None
    for attempt in range(1 + retries):
        res = run()
        res["attempts"] = attempt + 1
        if best is None or res.get("others_cores", 0) < best.get("others_cores", 0):
            best = res
        if res.get("rc") or res.get("others_cores", 0) < limit:
            break
        log(f"  (the machine was busy: others={res['others_cores']:.2f} cores; again)")
    best["attempts"] = attempt + 1
    return best


def others(stat0: tuple, stat1: tuple, own_cpu_s: float, wall_s: float) -> dict:
    """Cores that everything but the measured engine kept busy during the run
    (the machine is shared: a busy neighbour makes a run worthless), and steal."""
    return {"others_cores": max(0.0, (stat1[0] - stat0[0] - own_cpu_s) / wall_s),
            "steal_cores": (stat1[1] - stat0[1]) / wall_s}


def run_mlxgo(mlxgo: str, model: Path, prompt: str, max_tokens: int, extra: list = ()) -> dict:
    cmd = [mlxgo, "generate", "-m", str(model), "--raw", "--temp", "0", "--ignore-eos", "--max-tokens",
           str(max_tokens), "--json-stats", *extra]
    before = wait_quiet()
    with tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as inp:
        inp.write(prompt.encode())
        inp.seek(0)
        st0, t0 = cpu_stat(), time.perf_counter()
        proc = subprocess.Popen(cmd, stdin=inp, stdout=subprocess.DEVNULL, stderr=err, cwd=REPO)
        _, status, ru = os.wait4(proc.pid, 0)
        wall, st1 = time.perf_counter() - t0, cpu_stat()
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    rc = os.waitstatus_to_exitcode(status)
    res = {"rc": rc, "wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime, "max_rss_bytes": ru.ru_maxrss * 1024,
           "cmd": " ".join(shlex.quote(c) for c in cmd)}
    res["cores_busy"] = res["cpu_s"] / wall
    res.update(others(st0, st1, res["cpu_s"], wall), busy_before_cores=before)
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    try:
        rep = json.loads(lines[-1]) if lines else {}
        if isinstance(rep, dict):
            res.update({k: v for k, v in rep.items() if k not in res})
    except json.JSONDecodeError:
        pass
    if rc != 0:
        res["stderr_tail"] = stderr[-2000:]
    if isinstance(res.get("ttft_s"), (int, float)) and isinstance(res.get("load_s"), (int, float)):
        res["ttft_incl_load_s"] = res["ttft_s"]
        res["ttft_s"] = res["ttft_s"] - res["load_s"]
    return res


def llama_kv_bytes_per_token(llm) -> int:
    md = llm.metadata
    arch = md.get("general.architecture", "llama")
    layers = int(md[f"{arch}.block_count"])
    heads = int(md[f"{arch}.attention.head_count"])
    kv_heads = int(md.get(f"{arch}.attention.head_count_kv", heads))
    dim = int(md[f"{arch}.embedding_length"])
    head_dim = int(md.get(f"{arch}.attention.key_length", dim // heads))
    return layers * 2 * kv_heads * head_dim * 2  # K and V, f16 cache (llama.cpp's default type)


def run_llama(model: Path, ids: list, max_tokens: int, threads: int) -> dict:
    n_ctx = len(ids) + max_tokens + 16
    t0 = time.perf_counter()
    llm = llama_cpp.Llama(model_path=str(model), n_ctx=n_ctx, n_batch=min(2048, len(ids)), n_threads=threads,
                          n_threads_batch=threads, logits_all=False, verbose=False, seed=0)
    load = time.perf_counter() - t0
    n_vocab = llm.n_vocab()
    ctx = llm._ctx.ctx

    def argmax():
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, -1), shape=(n_vocab,))
        return int(np.argmax(logits))

    llama_cpp.llama_perf_context_reset(ctx)
    before = wait_quiet()
    st0, c0, w0 = cpu_stat(), time.process_time(), time.perf_counter()
    llm.eval(ids)
    tok = argmax()
    w1 = time.perf_counter()
    out = [tok]
    for _ in range(max_tokens - 1):
        llm.eval([tok])  # EOS ignored: the loop never looks at it
        tok = argmax()
        out.append(tok)
    w2, c2, st1 = time.perf_counter(), time.process_time(), cpu_stat()
    perf = llama_cpp.llama_perf_context(ctx)
    res = {"rc": 0, "load_s": load, "prompt_tokens": len(ids), "generated_tokens": len(out),
           "ttft_s": w1 - w0, "prefill_tps": len(ids) / (w1 - w0),
           "decode_tps": (len(out) - 1) / (w2 - w1) if len(out) > 1 else None,
           "wall_s": w2 - w0, "cpu_s": c2 - c0, "cores_busy": (c2 - c0) / (w2 - w0),
           "weight_bytes": int(llm.model_size() if hasattr(llm, "model_size") else
                               llama_cpp.llama_model_size(llm._model.model)),
           "kv_bytes_per_token": llama_kv_bytes_per_token(llm),
           **others(st0, st1, c2 - c0, w2 - w0), "busy_before_cores": before,
           "perf": {"t_p_eval_ms": perf.t_p_eval_ms, "n_p_eval": perf.n_p_eval, "t_eval_ms": perf.t_eval_ms,
                    "n_eval": perf.n_eval},
           "first_ids": out[:16]}
    if perf.n_p_eval and perf.t_p_eval_ms:
        res["perf_prefill_tps"] = perf.n_p_eval / perf.t_p_eval_ms * 1e3
    if perf.n_eval and perf.t_eval_ms:
        res["perf_decode_tps"] = perf.n_eval / perf.t_eval_ms * 1e3
    llm.close() if hasattr(llm, "close") else None
    del llm
    return res


# ---------------------------------------------------------------- serve


def bench_serve_batch(mlxgo: str, model: Path, prompt: str, batch: int, max_tokens: int) -> dict:
    port = bench_serve.free_port()
    base = f"http://127.0.0.1:{port}"
    cmd = [mlxgo, "serve", "-m", str(model), "--port", str(port), "--batch", str(batch), "--max-tokens",
           str(max_tokens)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    name = str(model)
    try:
        row = {"ready_s": bench_serve.wait_ready(proc, base + "/health", 300), "cmd": " ".join(cmd)}
        bench_serve.stream_completion(base, name, prompt, 2)  # warm-up
        c1 = bench_serve.stream_completion(base, name, prompt, max_tokens)
        row.update({"c1_decode_tps": c1.get("decode_tps"), "c1_ttft_s": c1["ttft_s"], "c1_tokens": c1["tokens"]})
        cb = bench_serve.concurrent(base, name, prompt, max_tokens, batch)
        row.update({f"c{batch}_aggregate_tps": cb["aggregate_tps"], f"c{batch}_tokens": cb["tokens"],
                    f"c{batch}_wall_s": cb["wall_s"], f"c{batch}_ttft_median_s": cb["ttft_median_s"]})
        row["aggregate_over_single"] = cb["aggregate_tps"] / c1["decode_tps"] if c1.get("decode_tps") else None
        return row
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# ---------------------------------------------------------------- report

METRICS = ["prefill_tps", "decode_tps", "ttft_s", "cores_busy", "others_cores", "steal_cores", "load_s", "wall_s", "prompt_tokens",
           "generated_tokens", "weight_bytes", "kv_bytes_per_token", "max_rss_bytes", "perf_prefill_tps",
           "perf_decode_tps"]


def median(rows, key):
    vals = [r[key] for r in rows if isinstance(r.get(key), (int, float)) and r.get("rc") == 0]
    return statistics.median(vals) if vals else None


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def brief(res) -> str:
    keys = ["prefill_tps", "decode_tps", "ttft_s", "cores_busy", "others_cores", "prompt_tokens", "generated_tokens"]
    s = " ".join(f"{k}={res[k]:.4g}" for k in keys if isinstance(res.get(k), (int, float)))
    return s + (f" rc={res['rc']} {res.get('stderr_tail', '')[-300:]}" if res.get("rc") else "")


def fmt(v, spec=".1f"):
    return "-" if v is None else format(v, spec)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--q4", type=Path, required=True, help="SmolLM2 Q4_1 GGUF")
    ap.add_argument("--q8", type=Path, required=True, help="the Q8_0 made from it (made here if missing)")
    ap.add_argument("--mlxgo", default="./mlxgo")
    ap.add_argument("--threads", type=int, default=0, help="llama.cpp threads (default: physical cores)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--mlx-rounds", type=int, default=1, help="rounds of mlxgo --kernels mlx (slow)")
    ap.add_argument("--mlx-max-tokens", type=int, default=128)
    ap.add_argument("--long-prompt", type=int, default=4096)
    ap.add_argument("--long-rounds", type=int, default=1)
    ap.add_argument("--serve-batch", type=int, default=8)
    ap.add_argument("--serve-tokens", type=int, default=128)
    ap.add_argument("--serve-prompt", type=int, default=32)
    ap.add_argument("--serve-rounds", type=int, default=1)
    ap.add_argument("--quiet-wait", type=float, default=30.0,
                    help="before each run, wait up to this many seconds for the machine to go idle")
    ap.add_argument("--retries", type=int, default=2,
                    help="run a measurement again (keeping the cleanest) when others kept >= 0.1 cores busy")
    ap.add_argument("--json", type=Path, default=REPO / ".cache" / "bench" / "cpu.json")
    args = ap.parse_args()
    mlxgo = str(Path(args.mlxgo).resolve())
    threads = args.threads or physical_cores()
    QUIET["max_wait_s"] = args.quiet_wait
    llama_cpp.llama_backend_init()

    load_start = os.getloadavg()
    mach = machine()
    mach["cores_physical"] = physical_cores()
    vers = versions(mlxgo)
    log(f"bench-cpu: {mach['cpu']}, {mach['cores_physical']} physical cores, "
        f"{mach['memory_bytes'] / 2**30:.1f} GiB; {vers['mlxgo']}, commit {vers['commit']}; "
        f"llama-cpp-python {vers['llama_cpp_python']}; {vers['go']}; Python {vers['python']}")

    q4 = args.q4.resolve()
    q8info = quantize_q8(q4, args.q8.resolve())
    q8 = Path(q8info["path"])
    files = {"Q4_1": q4, "Q8_0": q8}
    for f in files.values():
        if not f.exists():
            raise SystemExit(f"bench-cpu: {f} missing")

    vocab = llama_cpp.Llama(model_path=str(q4), n_ctx=64, vocab_only=True, verbose=False)
    n_ctx_train = int(vocab.metadata.get("llama.context_length", 0))
    prompt, ids = make_prompt(mlxgo, q4, args.prompt_tokens, vocab)
    long_prompt, long_ids = make_prompt(mlxgo, q4, args.long_prompt, vocab)
    serve_prompt, _ = make_prompt(mlxgo, q4, args.serve_prompt, vocab)
    # the Q8_0 file carries the same tokenizer
    assert mlxgo_tokenize(mlxgo, q8, prompt) == ids, "Q8_0's tokenizer differs from Q4_1's"
    log(f"bench-cpu: prompts of {len(ids)} / {len(long_ids)} / {args.serve_prompt} tokens, same ids for both "
        f"engines; context length {n_ctx_train}")
    if n_ctx_train and args.long_prompt + 1 > n_ctx_train:
        raise SystemExit(f"bench-cpu: --long-prompt {args.long_prompt} exceeds the model's context {n_ctx_train}")
    del vocab

    bw = measure_bandwidth(threads)  # again at the end; the ceiling is the better of the two
    log(f"bench-cpu: read bandwidth {bw['read_GBps']:.1f} GB/s on {threads} threads "
        f"({bw['read_GBps_1t']:.1f} GB/s on 1)")

    engines = {
        "mlxgo": lambda f, p, i, n: run_mlxgo(mlxgo, f, p, n),
        "llama.cpp": lambda f, p, i, n: run_llama(f, i, n, threads),
    }
    # --kernels fast (int8 activations, L3) takes its turn in the same rounds;
    # the 4096-token prefill and serve rows stay the exact kernels'.
    short = dict(engines, **{"mlxgo-fast": lambda f, p, i, n: run_mlxgo(mlxgo, f, p, n, ["--kernels", "fast"])})
    runs = {q: {e: [] for e in list(short) + ["mlxgo-mlx"]} for q in files}
    for r in range(args.rounds):
        order = list(short) if r % 2 == 0 else list(short)[::-1]
        for q, f in files.items():
            for e in order:
                res = measured(lambda: short[e](f, prompt, ids, args.max_tokens), args.retries)
                runs[q][e].append(res)
                log(f"round {r + 1}/{args.rounds} {q} {e}: {brief(res)}")
    for r in range(args.mlx_rounds):
        for q, f in files.items():
            res = run_mlxgo(mlxgo, f, prompt, args.mlx_max_tokens, ["--kernels", "mlx"])
            runs[q]["mlxgo-mlx"].append(res)
            log(f"round {r + 1}/{args.mlx_rounds} {q} mlxgo --kernels mlx: {brief(res)}")
    long_runs = {e: [] for e in engines}
    for r in range(args.long_rounds):
        order = list(engines) if r % 2 == 0 else list(engines)[::-1]
        for e in order:
            res = measured(lambda: engines[e](q4, long_prompt, long_ids, 1), min(1, args.retries))
            long_runs[e].append(res)
            log(f"long round {r + 1}/{args.long_rounds} Q4_1 {e}: {brief(res)}")
    serve_runs = []
    for r in range(args.serve_rounds):
        row = bench_serve_batch(mlxgo, q4, serve_prompt, args.serve_batch, args.serve_tokens)
        serve_runs.append(row)
        log(f"serve round {r + 1}/{args.serve_rounds} Q4_1 --batch {args.serve_batch}: "
            + " ".join(f"{k}={v:.4g}" for k, v in row.items() if isinstance(v, float)))

    bw_end = measure_bandwidth(threads)
    bw = {"start": bw, "end": bw_end, "read_GBps": max(bw["read_GBps"], bw_end["read_GBps"]),
          "read_GBps_1t": max(bw["read_GBps_1t"], bw_end["read_GBps_1t"])}
    log(f"bench-cpu: read bandwidth at the end {bw_end['read_GBps']:.1f} GB/s on {threads} threads")

    # medians, ceilings, ratios
    ceiling_bw = bw["read_GBps"] * 1e9
    medians = {}
    for q in files:
        medians[q] = {}
        for e, rows in runs[q].items():
            m = {k: median(rows, k) for k in METRICS}
            m["rounds"] = len(rows)
            if m.get("weight_bytes") and m.get("decode_tps"):
                ctx = (m.get("prompt_tokens") or args.prompt_tokens) + (m.get("generated_tokens") or 0) / 2
                m["bytes_per_token"] = m["weight_bytes"] + (m.get("kv_bytes_per_token") or 0) * ctx
                m["ceiling_tps"] = ceiling_bw / m["bytes_per_token"]
                m["fraction_of_ceiling"] = m["decode_tps"] / m["ceiling_tps"]
            medians[q][e] = m
    def ratio_of(a, b):
        return {k: (a[k] / b[k]) if a.get(k) and b.get(k) else None
                for k in ["prefill_tps", "decode_tps", "ttft_s", "cores_busy", "fraction_of_ceiling"]}
    ratios = {q: ratio_of(medians[q]["mlxgo"], medians[q]["llama.cpp"]) for q in files}
    fast_ratios = {q: ratio_of(medians[q]["mlxgo-fast"], medians[q]["llama.cpp"]) for q in files}
    long_med = {e: {k: median(rows, k) for k in ["prefill_tps", "ttft_s", "cores_busy", "others_cores",
                                                 "prompt_tokens"]}
                for e, rows in long_runs.items()}
    for e in long_med:
        long_med[e]["rounds"] = len(long_runs[e])
    long_ratio = (long_med["mlxgo"]["prefill_tps"] / long_med["llama.cpp"]["prefill_tps"]
                  if long_med["mlxgo"]["prefill_tps"] and long_med["llama.cpp"]["prefill_tps"] else None)
    serve_med = {k: median([dict(r, rc=0) for r in serve_runs], k)
                 for k in sorted({k for r in serve_runs for k, v in r.items() if isinstance(v, (int, float))})}
    gen_decode = medians["Q4_1"]["mlxgo"]["decode_tps"]
    agg = serve_med.get(f"c{args.serve_batch}_aggregate_tps")
    serve_med["aggregate_over_generate_decode"] = agg / gen_decode if agg and gen_decode else None

    acceptance = {
        "decode_Q4_1_ge_1.0x": ratios["Q4_1"]["decode_tps"],
        "decode_Q8_0_ge_1.0x": ratios["Q8_0"]["decode_tps"],
        "prefill_Q4_1_ge_0.5x": ratios["Q4_1"]["prefill_tps"],
        "prefill_Q8_0_ge_0.5x": ratios["Q8_0"]["prefill_tps"],
        "ttft_Q4_1_le_2x": ratios["Q4_1"]["ttft_s"],
        f"serve_batch{args.serve_batch}_aggregate_over_single_ge_3x": serve_med.get("aggregate_over_single"),
        "fast_decode_Q4_1": fast_ratios["Q4_1"]["decode_tps"],
        "fast_decode_Q8_0": fast_ratios["Q8_0"]["decode_tps"],
    }

    load_end = os.getloadavg()
    mach["loadavg_start"], mach["loadavg_end"] = load_start, load_end

    # table
    out = []
    out.append(f"machine:  {mach['cpu']}, {mach['cores_physical']} physical cores ({mach['cores_usable']} usable), "
               f"{mach['memory_bytes'] / 2**30:.1f} GiB, Linux {mach['kernel']}; loadavg at start "
               f"{' '.join(f'{x:.2f}' for x in load_start)}, at end {' '.join(f'{x:.2f}' for x in load_end)}")
    out.append(f"versions: {vers['mlxgo']}, commit {vers['commit']}; llama-cpp-python {vers['llama_cpp_python']} "
               f"({vers.get('llama_cpp_build', 'built from source, GGML_NATIVE=ON')}); {vers['go']}; "
               f"Python {vers['python']}, numpy {vers['numpy']}")
    out.append(f"llama.cpp system info: {vers['llama_cpp_system_info']}")
    out.append(f"settings: prompt {len(ids)} tokens (same ids both engines), {args.max_tokens} tokens greedy, EOS "
               f"ignored, llama.cpp n_threads={threads}; {args.rounds} alternating rounds, medians; "
               f"--kernels mlx: {args.mlx_rounds} round(s) of {args.mlx_max_tokens} tokens")
    out.append(f"bandwidth: {bw['read_GBps']:.1f} GB/s read on {threads} threads ({bw['read_GBps_1t']:.1f} on 1), best "
               f"of numpy sum/max reductions at the start ({bw['start']['read_GBps']:.1f}) and end "
               f"({bw['end']['read_GBps']:.1f}); ceiling = bandwidth / (weights + KV at mean context) per token")
    reruns = sum(r.get("attempts", 1) - 1 for q in runs for rows in runs[q].values() for r in rows)
    reruns += sum(r.get("attempts", 1) - 1 for rows in long_runs.values() for r in rows)
    out.append(f"waited {QUIET['waited_s']:.0f} s in all for the machine to go idle before runs "
               f"(< {QUIET['threshold_cores']} cores busy, at most {QUIET['max_wait_s']:.0f} s a run); "
               f"{reruns} run(s) repeated because others kept >= 0.1 cores busy (at most {args.retries} a run)")
    out.append("cores = engine CPU time / wall time; others = cores the rest of the machine kept busy meanwhile "
               "(medians; above ~0.1 the run shared the CPU and its numbers are not clean)")
    out.append("")
    hdr = (f"{'file':5} {'engine':10} {'prefill tok/s':>13} {'decode tok/s':>12} {'TTFT s':>7} {'cores':>5} "
           f"{'ceiling tok/s':>13} {'of ceiling':>10} {'rounds':>6} {'others':>6}")
    out.append(hdr)
    out.append("-" * len(hdr))
    for q in files:
        for e in ["mlxgo", "llama.cpp", "mlxgo-fast", "mlxgo-mlx"]:
            m = medians[q][e]
            label = {"mlxgo-mlx": "mlxgo(mlx)", "mlxgo-fast": "mlxgo(fast)"}.get(e, e)
            frac = m.get("fraction_of_ceiling")
            out.append(f"{q:5} {label:10} {fmt(m['prefill_tps']):>13} {fmt(m['decode_tps']):>12} "
                       f"{fmt(m['ttft_s'], '.3f'):>7} {fmt(m['cores_busy'], '.2f'):>5} "
                       f"{fmt(m.get('ceiling_tps')):>13} {fmt(frac * 100 if frac else None) + ' %':>10} "
                       f"{m['rounds']:>6} {fmt(m['others_cores'], '.2f'):>6}")
        rt = ratios[q]
        out.append(f"{q:5} {'ratio':10} {fmt(rt['prefill_tps'], '.2f') + 'x':>13} "
                   f"{fmt(rt['decode_tps'], '.2f') + 'x':>12} {fmt(rt['ttft_s'], '.2f') + 'x':>7} "
                   f"{fmt(rt['cores_busy'], '.2f') + 'x':>5} {'':>13} {fmt(rt['fraction_of_ceiling'], '.2f') + 'x':>10}")
        ft = fast_ratios[q]
        out.append(f"{q:5} {'fast/llama':10} {fmt(ft['prefill_tps'], '.2f') + 'x':>13} "
                   f"{fmt(ft['decode_tps'], '.2f') + 'x':>12} {fmt(ft['ttft_s'], '.2f') + 'x':>7}")
        out.append("")
    out.append(f"prefill at {args.long_prompt} tokens (Q4_1, {args.long_rounds} round(s)): "
               f"mlxgo {fmt(long_med['mlxgo']['prefill_tps'])} tok/s (TTFT {fmt(long_med['mlxgo']['ttft_s'], '.2f')} s), "
               f"llama.cpp {fmt(long_med['llama.cpp']['prefill_tps'])} tok/s "
               f"(TTFT {fmt(long_med['llama.cpp']['ttft_s'], '.2f')} s), ratio {fmt(long_ratio, '.2f')}x; cores "
               f"{fmt(long_med['mlxgo']['cores_busy'], '.2f')} / {fmt(long_med['llama.cpp']['cores_busy'], '.2f')}, "
               f"others {fmt(long_med['mlxgo']['others_cores'], '.2f')} / {fmt(long_med['llama.cpp']['others_cores'], '.2f')}")
    out.append(f"mlxgo serve --batch {args.serve_batch} (Q4_1, {args.serve_prompt}-token prompts, {args.serve_tokens} "
               f"tokens, {args.serve_rounds} round(s)): one stream {fmt(serve_med.get('c1_decode_tps'))} tok/s, "
               f"{args.serve_batch} concurrent {fmt(agg)} tok/s aggregate = "
               f"{fmt(serve_med.get('aggregate_over_single'), '.2f')}x one stream "
               f"({fmt(serve_med.get('aggregate_over_generate_decode'), '.2f')}x generate's decode)")
    out.append("acceptance (issue 10): " + ", ".join(f"{k}: {fmt(v, '.2f')}" for k, v in acceptance.items()))
    table = "\n".join(out)

    report = {"quiet": QUIET, "machine": mach, "versions": vers, "files": {k: str(v) for k, v in files.items()}, "q8_0": q8info,
              "context_length": n_ctx_train, "threads": threads, "bandwidth": bw,
              "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
              "prompt_ids_sha": __import__("hashlib").sha256(json.dumps(ids).encode()).hexdigest(),
              "medians": medians, "ratios_mlxgo_over_llama": ratios, "ratios_fast_over_llama": fast_ratios,
              "long_prefill": {"medians": long_med, "ratio_mlxgo_over_llama": long_ratio, "runs": long_runs},
              "serve": {"medians": serve_med, "runs": serve_runs},
              "acceptance": acceptance, "table": table, "runs": runs}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=1) + "\n")
    print(table)
    print(f"\nJSON report: {args.json}")
    ok = all(r.get("rc") == 0 for q in runs for rows in runs[q].values() for r in rows)
    ok = ok and all(r.get("rc") == 0 for rows in long_runs.values() for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
