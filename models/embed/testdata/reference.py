"""Reference embeddings for models/embed's parity tests and `make bench-embed`.

BERT (all-MiniLM-L6-v2): an independent float32 numpy implementation of
BertModel + sentence-transformers mean pooling + Normalize, reading the same
safetensors, tokenized by Hugging Face `tokenizers`. It shares no code and no
kernels with mlxgo (numpy's BLAS, scipy's erf), so agreement is evidence, not
an echo. Each sentence runs alone, unpadded: the ground truth that padded
batches must match.

Qwen3-Embedding shape: a tiny random-weight qwen3 model built with mlx-lm
(fixed seed), embedded with mlx-lm's own Model.model(...) -> last token ->
L2 normalize on the same libmlx, where bit-exact results are expected.

    python reference.py corpus OUT.txt [--n 512]
    python reference.py bert MODEL_DIR CORPUS OUT.json
    python reference.py qwen3-model OUT_DIR
    python reference.py qwen3 [--instruction TEXT] MODEL_DIR CORPUS OUT.json
    python reference.py bench MODEL_DIR CORPUS --batch-size 32 --rounds 3 --mlxgo ./mlxgo
"""

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

SEED = 20261130
LOCALES = ["en_US", "de_DE", "fr_FR", "es_ES", "ru_RU", "ja_JP", "zh_CN", "ar_AA", "el_GR", "pl_PL", "it_IT", "tr_TR"]


def make_corpus(n: int) -> list:
    """n lines of mixed languages and lengths (one word to ~200 tokens), seeded."""
    from faker import Faker

    rng = random.Random(SEED)
    fakers = {loc: Faker(loc) for loc in LOCALES}
    for i, f in enumerate(fakers.values()):
        f.seed_instance(SEED + i)
    lines = []
    while len(lines) < n:
        f = fakers[rng.choice(LOCALES)]
        kind = rng.random()
        if kind < 0.15:
            s = f.word()
        elif kind < 0.6:
            s = f.sentence(nb_words=rng.randint(3, 20))
        elif kind < 0.9:
            s = f.paragraph(nb_sentences=rng.randint(2, 6))
        else:
            s = f.paragraph(nb_sentences=rng.randint(8, 12))
        s = " ".join(s.split())  # one line, no tabs
        if s:
            lines.append(s)
    return lines


def tokenizer(model_dir: Path, max_len: int):
    from tokenizers import Tokenizer

    t = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    t.no_padding()
    t.enable_truncation(max_len)
    return t


def load_bert(model_dir: Path):
    from safetensors.numpy import load_file

    cfg = json.loads((model_dir / "config.json").read_text())
    w = {k.removeprefix("bert."): v.astype(np.float32) for k, v in load_file(str(model_dir / "model.safetensors")).items()}
    return cfg, w


def layer_norm(x, g, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


def bert_hidden(cfg, w, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """BertModel's last hidden state for ids [B, L] with mask [B, L] (1 = token)."""
    from scipy.special import erf

    eps = np.float32(cfg["layer_norm_eps"])
    heads = cfg["num_attention_heads"]
    b, n = ids.shape
    h = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.token_type_embeddings.weight"][0] + w["embeddings.position_embeddings.weight"][:n]
    h = layer_norm(h, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
    hd = h.shape[-1] // heads
    bias = np.where(mask[:, None, None, :] > 0, np.float32(0), np.float32(-np.inf)).astype(np.float32)

    def lin(x, p):
        return x @ w[p + ".weight"].T + w[p + ".bias"]

    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."

        def split(x):
            return x.reshape(b, n, heads, hd).transpose(0, 2, 1, 3)

        q, k, v = (split(lin(h, p + "attention.self." + s)) for s in ("query", "key", "value"))
        s = q @ k.transpose(0, 1, 3, 2) / np.float32(np.sqrt(hd)) + bias
        s = np.exp(s - s.max(-1, keepdims=True))
        a = (s / s.sum(-1, keepdims=True)) @ v
        a = a.transpose(0, 2, 1, 3).reshape(b, n, -1)
        h = layer_norm(lin(a, p + "attention.output.dense") + h, w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"], eps)
        f = lin(h, p + "intermediate.dense")
        f = (f * np.float32(0.5) * (np.float32(1) + erf(f / np.float32(np.sqrt(2))))).astype(np.float32)
        h = layer_norm(lin(f, p + "output.dense") + h, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], eps)
    return h


def bert_embed(cfg, w, rows: list, normalize=True) -> np.ndarray:
    """Mean pooling + Normalize over a right-padded batch of id lists."""
    n = max(len(r) for r in rows)
    ids = np.zeros((len(rows), n), dtype=np.int64)
    mask = np.zeros((len(rows), n), dtype=np.float32)
    for j, r in enumerate(rows):
        ids[j, : len(r)] = r
        mask[j, : len(r)] = 1
    h = bert_hidden(cfg, w, ids, mask)
    v = (h * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), np.float32(1e-9))
    if normalize:
        v = v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), np.float32(1e-12))
    return v.astype(np.float32)


def max_seq_length(model_dir: Path, default: int) -> int:
    p = model_dir / "sentence_bert_config.json"
    return json.loads(p.read_text())["max_seq_length"] if p.exists() else default


def write_result(out: Path, ids: list, vecs: np.ndarray, extra: dict) -> None:
    out.write_text(json.dumps(dict(extra, ids=ids, embeddings=[[float(x) for x in v] for v in vecs])))


def cmd_bert(a) -> None:
    d = Path(a.model)
    cfg, w = load_bert(d)
    t = tokenizer(d, max_seq_length(d, cfg["max_position_embeddings"]))
    lines = Path(a.corpus).read_text().splitlines()
    ids = [e.ids for e in t.encode_batch(lines)]
    vecs = np.stack([bert_embed(cfg, w, [r])[0] for r in ids])
    write_result(Path(a.out), ids, vecs, {"reference": "numpy float32 BertModel + mean pooling + normalize", "numpy": np.__version__})


QWEN3_TINY = dict(
    model_type="qwen3", hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
    num_hidden_layers=2, head_dim=64, rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=True,
    max_position_embeddings=512,
)


def cmd_qwen3_model(a) -> None:
    """A Qwen3-Embedding-shaped directory: tiny random qwen3 weights (mlx-lm,
    seeded), the qwen3 tokenizer from `make data`, last-token pooling and
    Normalize modules, max_seq_length 128 (so too-long inputs are testable)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "testdata" / "oracle"))
    from make_tiny import build_f32  # noqa: E402  (builds with mlx-lm's qwen3 Model)
    from oracle_common import data_dir  # noqa: E402

    out = Path(a.out)
    src = data_dir() / "tokenizers" / "qwen3"
    vocab = json.loads((src / "tokenizer.json").read_text())
    n = max([i for i in vocab["model"]["vocab"].values()] + [t["id"] for t in vocab["added_tokens"]]) + 1
    build_f32("qwen3", dict(QWEN3_TINY, vocab_size=n), out, SEED)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (out / name).write_bytes((src / name).read_bytes())
    (out / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]))
    (out / "1_Pooling").mkdir(exist_ok=True)
    (out / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": 64, "pooling_mode_lasttoken": True}))
    (out / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 128, "do_lower_case": False}))


def cmd_qwen3(a) -> None:
    import mlx.core as mx
    from mlx_lm.utils import load_model

    d = Path(a.model)
    model, _ = load_model(d)
    t = tokenizer(d, max_seq_length(d, 512))
    lines = Path(a.corpus).read_text().splitlines()
    if a.instruction:
        lines = [f"Instruct: {a.instruction}\nQuery:{s}" for s in lines]
    ids = [e.ids for e in t.encode_batch(lines)]
    vecs = []
    for r in ids:
        h = model.model(mx.array([r], dtype=mx.int32))  # final normalized hidden state
        v = h[0, -1].astype(mx.float32)
        v = v / mx.maximum(mx.sqrt(mx.sum(mx.square(v), axis=-1, keepdims=True)), mx.array(1e-12, dtype=mx.float32))
        vecs.append(np.array(v))
    write_result(Path(a.out), ids, np.stack(vecs), {"reference": "mlx-lm qwen3 Model.model -> last token -> L2", "mlx": mx.__version__})


def cmd_bench(a) -> None:
    """Sentences/s of the numpy reference and `mlxgo embed`, alternating."""
    d = Path(a.model)
    cfg, w = load_bert(d)
    t = tokenizer(d, max_seq_length(d, cfg["max_position_embeddings"]))
    lines = Path(a.corpus).read_text().splitlines()
    cmd = [a.mlxgo, "embed", "-m", str(d), "--truncate", "--batch-size", str(a.batch_size)]  # the reference truncates at max_seq_length too

    def ref():
        ids = [e.ids for e in t.encode_batch(lines)]
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))  # as sentence-transformers batches
        for s in range(0, len(order), a.batch_size):
            bert_embed(cfg, w, [ids[i] for i in order[s : s + a.batch_size]])

    def go():
        with open(a.corpus, "rb") as f:
            subprocess.run(cmd, stdin=f, stdout=subprocess.DEVNULL, check=True)

    times = {"reference": [], "mlxgo": []}
    go()  # warm the page cache for the weights and the native pack
    for _ in range(a.rounds):
        for name, f in (("reference", ref), ("mlxgo", go)):
            t0 = time.perf_counter()
            f()
            times[name].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    sps = {k: len(lines) / v for k, v in med.items()}
    rep = {
        "machine": f"{platform.machine()} {platform.processor() or ''} {os.cpu_count()} cpus".strip(),
        "versions": {"python": platform.python_version(), "numpy": np.__version__, "mlxgo": subprocess.run([a.mlxgo, "version"], capture_output=True, text=True).stdout.strip()},
        "threads": {k: os.environ.get(k, "") for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")},
        "sentences": len(lines), "batch_size": a.batch_size, "rounds": a.rounds,
        "seconds": times, "median_s": med, "sentences_per_s": sps,
        "ratio_mlxgo_over_reference": sps["mlxgo"] / sps["reference"],
        "note": "mlxgo time includes process start, model load and JSON output; the reference's excludes its load",
    }
    print(json.dumps(rep, indent=2))


def main() -> int:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("corpus"); c.add_argument("out"); c.add_argument("--n", type=int, default=512)
    b = sub.add_parser("bert"); b.add_argument("model"); b.add_argument("corpus"); b.add_argument("out")
    qm = sub.add_parser("qwen3-model"); qm.add_argument("out")
    q = sub.add_parser("qwen3"); q.add_argument("model"); q.add_argument("corpus"); q.add_argument("out"); q.add_argument("--instruction", default="")
    be = sub.add_parser("bench"); be.add_argument("model"); be.add_argument("corpus")
    be.add_argument("--batch-size", type=int, default=32); be.add_argument("--rounds", type=int, default=3); be.add_argument("--mlxgo", default="./mlxgo")
    a = p.parse_args()
    if a.cmd == "corpus":
        Path(a.out).write_text("\n".join(make_corpus(a.n)) + "\n")
    else:
        {"bert": cmd_bert, "qwen3-model": cmd_qwen3_model, "qwen3": cmd_qwen3, "bench": cmd_bench}[a.cmd](a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
