"""make bench-tok: encode throughput of mlxgo's tok against Hugging Face tokenizers.

Same corpus (gen_corpus.py), same workload on both sides: every document
encoded one at a time with special tokens, three passes (the first with cold
caches), single thread (RAYON_NUM_THREADS=1, TOKENIZERS_PARALLELISM=false).
Rounds alternate Go and Rust per tokenizer; medians are reported.

Usage: .venv/bin/python tok/testdata/bench_tok.py [ROUNDS]   (from the repo root)
"""
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import tokenizers  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
DATA = os.environ.get("MLXGO_DATA_DIR", os.path.join(ROOT, ".cache", "data"))
PASSES = 3
CASES = {
    "qwen3": "tokenizers/qwen3/tokenizer.json",
    "gemma3": "tokenizers/gemma3/tokenizer.json",
    "llama3": "tokenizers/llama3/tokenizer.json",
    "llama3_1": "tokenizers/llama3_1/tokenizer.json",
    "minilm": "all-minilm-l6-v2/tokenizer.json",
}


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    lines = subprocess.run([sys.executable, os.path.join(HERE, "gen_corpus.py")], check=True,
                           capture_output=True, text=True).stdout.split("\n")
    docs = [json.loads(line) for line in lines if line]
    size = sum(len(d.encode("utf-8")) for d in docs)
    binary = os.path.join(ROOT, ".cache", "tok", "tok.test")
    subprocess.run(["go", "test", "-c", "-o", binary, "./tok"], check=True, cwd=ROOT)
    go_ver = subprocess.run(["go", "version"], capture_output=True, text=True).stdout.strip()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    print("machine: %s, %s, %d cpus" % (platform.machine(), platform.processor() or platform.platform(), os.cpu_count()))
    print("versions: %s; tokenizers %s; python %s; commit %s" % (go_ver, tokenizers.__version__, platform.python_version(), commit))
    print("corpus: %d documents, %.2f MB; %d passes per measurement, %d rounds\n" % (len(docs), size / 1e6, PASSES, rounds))
    print("%-10s %12s %12s %8s" % ("tokenizer", "mlxgo MB/s", "HF MB/s", "ratio"))
    for name, rel in CASES.items():
        tok = Tokenizer.from_file(os.path.join(DATA, rel))
        tok.no_truncation()
        tok.no_padding()
        go, hf = [], []
        for _ in range(rounds):
            out = subprocess.run([binary, "-test.run", "^$", "-test.bench", "^BenchmarkEncodeCorpus/%s$" % name,
                                  "-test.benchtime", "%dx" % PASSES], check=True, capture_output=True, text=True, cwd=os.path.join(ROOT, "tok")).stdout
            m = re.search(r"([\d.]+) MB/s", out)
            if not m:
                sys.exit("cannot read the Go benchmark output:\n" + out)
            go.append(float(m.group(1)))
            t0 = time.perf_counter()
            for _ in range(PASSES):
                for d in docs:
                    tok.encode(d, add_special_tokens=True)
            hf.append(size * PASSES / (time.perf_counter() - t0) / 1e6)
        g, h = statistics.median(go), statistics.median(hf)
        print("%-10s %12.2f %12.2f %7.2fx" % (name, g, h, g / h), flush=True)


if __name__ == "__main__":
    main()
