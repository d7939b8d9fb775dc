"""`make llamacpp-gemma3`: llama.cpp's greedy text and top-5 logits on the Gemma 3 270M
Q4_K_M GGUF, the reference models/gemma3_gguf_test.go compares mlxgo against.

Engine: llama-cpp-python (pinned 0.3.36, built from source with GGML_NATIVE=ON in
.cache/bench-venv, `make bench-cpu`'s venv), CPU, n_threads 2, logits_all on, one
Llama per prompt. Prompts are tokenized by llama.cpp (BOS added, special tokens
parsed); mlxgo's tokenizer must give the same ids (the Go test checks).

Per prompt, greedy decoding for --steps steps: eval the prompt, then argmax of the
last logits, eval it, and so on (EOS not special). Each step records llama.cpp's
top-5 ids and logits and the logsumexp of the whole row (for log-probabilities).
The steps are llama.cpp's own greedy run: the Go test teacher-forces mlxgo with
the same ids, so every step compares logits for one context, and separately
runs mlxgo greedily to compare the texts.

Usage: gemma3_llamacpp.py MODEL.gguf OUT.json [--steps 32]
Writes OUT.json (small, committed: models/testdata/llamacpp/gemma3-270m.json).
"""
import argparse
import hashlib
import json
import math

import llama_cpp
import numpy as np

PROMPTS = [
    "Question: What is the capital of France?\nAnswer:",
    "The three primary colors are",
    "def fibonacci(n):\n",
    "<start_of_turn>user\nName a fruit that is yellow.<end_of_turn>\n<start_of_turn>model\n",
]


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--steps", type=int, default=32)
    args = ap.parse_args()
    cases = []
    for prompt in PROMPTS:
        llm = llama_cpp.Llama(model_path=args.model, n_ctx=512, n_threads=2, n_threads_batch=2,
                              logits_all=True, verbose=False, seed=0)
        ids = llm.tokenize(prompt.encode(), add_bos=True, special=True)
        llm.eval(ids)
        steps, tokens = [], []
        for _ in range(args.steps):
            row = np.array(llm.eval_logits[-1], dtype=np.float64)
            top = np.argsort(-row, kind="stable")[:5]
            m = row.max()
            lse = m + math.log(np.exp(row - m).sum())
            steps.append({"top_ids": [int(i) for i in top], "top_logits": [float(row[i]) for i in top],
                          "logsumexp": float(lse)})
            nxt = int(top[0])
            tokens.append(nxt)
            llm.eval([nxt])
        text = llm.detokenize(tokens).decode("utf-8", "replace")
        cases.append({"prompt": prompt, "prompt_ids": ids, "tokens": tokens, "text": text, "steps": steps})
        del llm
    out = {
        "engine": f"llama-cpp-python {llama_cpp.__version__} (built from source, GGML_NATIVE=ON), CPU, 2 threads",
        "model_sha256": sha256(args.model),
        "steps": args.steps,
        "cases": cases,
    }
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
