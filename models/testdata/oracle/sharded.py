"""Reference logits of mlx-lm's tensor-parallel models, for mlxgo's sharded L1 test.

Run by mlx.launch, one process per rank (the `oracle` Makefile target):

    mlx.launch -n 2 --backend ring --hosts 127.0.0.1 --python .venv/bin/python \
        $PWD/models/testdata/oracle/sharded.py

Every rank loads each tiny model with mlx-lm's load_model, calls its
model.shard(group) (mlx.nn's shard_linear: q/k/v and gate/up all-to-sharded,
o_proj and down_proj sharded-to-all with an all_sum) and runs logits.py's
generate_step recording, so the cases have logits.py's format and settings
(prompt of 24 seeded ids, one prefill call, 32 decode steps). Rank 0 writes
<oracle>/sharded/<case>.safetensors and index.json; each entry also records the
group (size, backend) and how far the sharded logits are from the unsharded
model's (all_sum adds the ranks' partial sums in another order than one
matmul does).

With --smollm2 (run with 3 ranks: SmolLM2-135M's 9 query and 3 key/value heads
do not split over 2), the real SmolLM2 (make oracle's MLX conversion of the GGUF)
sharded the same way answers a chat prompt greedily through mlx_lm's
stream_generate, as mlx_lm.generate renders it; rank 0 writes
<oracle>/sharded/smollm2-<N>ranks.json with the text and token ids, and the
unsharded model's text beside them.

With --pipeline, mlx-lm's pipeline-parallel models instead (PipelineMixin,
models/pipeline.py: model.model.pipeline(group) gives rank r its run of the
layers, the last rank the first ones; hidden states pass by send/recv and
rank 0's output is all-gathered): the qwen2, qwen3_moe, qwen3_5 (and
qwen3_5_moe) and qwen3_next cases, written to <oracle>/pipeline/. A pipeline does the unsharded arithmetic (no sum is
split), so their unsharded_max_abs_diff is expected to be 0.

Seeded cases ("-temp"): mlx-lm's make_sampler(temp) after mx.random.seed(seed)
on every rank, the tokens generate_step yields recorded with their logits.
"""

import argparse
import json
import sys
from pathlib import Path

import mlx.core as mx
import numpy as np
from mlx_lm.generate import generate_step
from mlx_lm.models.cache import make_prompt_cache
from mlx_lm.sample_utils import make_sampler

sys.path.insert(0, str(Path(__file__).resolve().parent))
import logits as L  # noqa: E402
from oracle_common import fingerprint_dir, oracle_dir, prompt_ids, versions, write_json  # noqa: E402

STEPS = 32
# Tiny models whose heads and widths divide by 2 (a 4-bit g64 llama's o_proj
# has one quantization group per row: it cannot be split, in mlx-lm either).
CASES = {
    "llama-f32": {}, "llama-bf16": {}, "qwen2-f32": {}, "qwen2-q4g32": {},
    "qwen3-bf16": {}, "qwen3-q4g64": {}, "qwen3-f32": {},
    "qwen3-bf16-temp": dict(model="qwen3-bf16", temp=0.8, seed=7),
    "llama-f32-temp": dict(model="llama-f32", temp=1.0, seed=3),
}

PIPELINE_CASES = {
    "qwen2-f32": {}, "qwen2-bf16": {}, "qwen2-q4g32": {},
    "qwen2-f32-temp": dict(model="qwen2-f32", temp=1.0, seed=5),
    "qwen2-bf16-temp": dict(model="qwen2-bf16", temp=0.8, seed=11),
    # qwen3_moe: 3 layers split 2 (rank 0) + 1 (rank 1); float32 only, since
    # MLX's CPU gather_mm takes nothing else.
    "qwen3_moe-f32": {}, "qwen3_moe-f32-temp": dict(model="qwen3_moe-f32", temp=0.8, seed=13),
    # qwen3_5 (Qwen3_5TextModel.pipeline): 4 layers, 3 linear then one full
    # attention; rank 1 has layers 0-1 (linear only: no fa_idx, its send tied
    # to an ArraysCache's conv state), rank 0 layers 2-3.
    "qwen3_5-f32": {}, "qwen3_5-bf16": {},
    "qwen3_5-f32-temp": dict(model="qwen3_5-f32", temp=1.0, seed=17),
    "qwen3_5-bf16-temp": dict(model="qwen3_5-bf16", temp=0.8, seed=19),
    "qwen3_5_moe-f32": {},
    # qwen3_next (Qwen3NextModel.pipeline): linear and full attention
    # alternate, so each rank has one of each and rank 1's send is tied to a
    # KVCache.
    "qwen3_next-f32": {}, "qwen3_next-f32-temp": dict(model="qwen3_next-f32", temp=0.8, seed=23),
}


def pipelined(model):
    """The PipelineMixin module of a loaded model: model.model, or the
    language model's (qwen3_5's multimodal wrapper)."""
    if hasattr(model, "language_model"):
        return model.language_model.model
    return model.model


def gather_json(obj, group):
    """Every rank's obj (JSON), in rank order, on every rank: the encoded
    bytes padded to the longest and all-gathered."""
    b = np.frombuffer(json.dumps(obj).encode(), dtype=np.uint8).astype(np.int32)
    n = int(mx.distributed.all_max(mx.array([len(b)], dtype=mx.int32), group=group).item())
    buf = np.zeros(n, dtype=np.int32)
    buf[:len(b)] = b
    rows = np.array(mx.distributed.all_gather(mx.array(buf), group=group)).reshape(group.size(), n)
    return [json.loads(bytes(r[r != 0].astype(np.uint8)).decode()) for r in rows]


def sampled(model, prompt, temp, seed):
    """generate_step with make_sampler(temp) from mx.random.seed(seed): the
    logits of every call (prefill's last position, then each decode step) and
    the tokens it yields."""
    cache = make_prompt_cache(model)
    chunks = L.prefill_chunks(len(prompt), L.DEFAULT_PREFILL_STEP_SIZE)
    rec = L.Recorder(model, cache, discard_calls=len(chunks) - 1)
    mx.random.seed(seed)
    tokens = [int(t) for t, _ in generate_step(mx.array(prompt, dtype=mx.uint32), rec, max_tokens=STEPS,
                                               sampler=make_sampler(temp=temp), prompt_cache=cache)]
    logits = mx.concatenate(rec.rows, axis=0)
    logprobs = logits - mx.logsumexp(logits, axis=-1, keepdims=True)
    mx.eval(logits, logprobs)
    return {"logits_dtype": str(logits.dtype).removeprefix("mlx.core."),
            "logits": np.array(logits.astype(mx.float32)), "logprobs": np.array(logprobs.astype(mx.float32)),
            "tokens": np.array(tokens, dtype=np.int32), "trace": rec.trace, "chunks": chunks}


SMOLLM2_PROMPT = "Write a haiku about the sea"
SMOLLM2_TOKENS = 12


def smollm2(args, group) -> int:
    from mlx_lm.generate import stream_generate
    from mlx_lm.utils import load

    model_dir = args.models / "smollm2-q4_1"
    whole, tokenizer = load(str(model_dir))
    model, _ = load(str(model_dir))
    model.shard(group)
    mx.eval(model.parameters())
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": SMOLLM2_PROMPT}], add_generation_prompt=True)

    def greedy(m):
        text, ids = "", []
        for r in stream_generate(m, tokenizer, prompt, max_tokens=SMOLLM2_TOKENS):
            text += r.text
            ids.append(int(r.token))
        return text, ids

    text, ids = greedy(model)
    ref_text, _ = greedy(whole)
    if group.rank() == 0:
        args.out.mkdir(parents=True, exist_ok=True)
        write_json(args.out / f"smollm2-{group.size()}ranks.json", {
            "model": "models/smollm2-q4_1", "model_files": fingerprint_dir(model_dir), "prompt": SMOLLM2_PROMPT,
            "prompt_ids": [int(t) for t in prompt], "max_tokens": SMOLLM2_TOKENS, "text": text, "tokens": ids,
            "shard": {"kind": "tensor", "size": group.size(), "backend": "ring"}, "unsharded_text": ref_text,
            "versions": versions()})
        print(f"sharded: smollm2 on {group.size()} ranks: {text!r} (unsharded {ref_text!r})", flush=True)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=oracle_dir() / "sharded")
    ap.add_argument("--models", type=Path, default=oracle_dir() / "models")
    ap.add_argument("--smollm2", action="store_true", help="the real SmolLM2's greedy text (3 ranks)")
    ap.add_argument("--pipeline", action="store_true", help="pipeline-parallel cases (qwen2, qwen3_moe, qwen3_5, qwen3_next), into <oracle>/pipeline")
    args = ap.parse_args()
    kind = "pipeline" if args.pipeline else "tensor"
    if args.pipeline and args.out == oracle_dir() / "sharded":
        args.out = oracle_dir() / "pipeline"
    group = mx.distributed.init(strict=True, backend="ring")
    rank, size = group.rank(), group.size()
    if args.smollm2:
        return smollm2(args, group)
    entries = {}
    for case, spec in (PIPELINE_CASES if args.pipeline else CASES).items():
        model_dir = args.models / spec.get("model", case)
        whole, config = L.load_model(model_dir)
        model, _ = L.load_model(model_dir)
        if args.pipeline:
            pipelined(model).pipeline(group)
        else:
            model.shard(group)
        mx.eval(model.parameters())
        prompt = prompt_ids(1, 24, L.vocab_size(config))
        settings = dict(steps=STEPS, prefill_step_size=L.DEFAULT_PREFILL_STEP_SIZE, kv_bits=None,
                        kv_group_size=L.DEFAULT_KV_GROUP_SIZE, quantized_kv_start=L.DEFAULT_QUANTIZED_KV_START,
                        max_kv_size=None)
        if "temp" in spec:
            res = sampled(model, prompt, spec["temp"], spec["seed"])
            ref = sampled(whole, prompt, spec["temp"], spec["seed"])
            sampler = f"make_sampler(temp={spec['temp']}) after mx.random.seed({spec['seed']})"
        else:
            res = L.run(model, prompt, **settings)
            ref = L.run(whole, prompt, **settings)
            sampler = "greedy: argmax(logprobs) with logprobs = logits - logsumexp(logits)"
        # Every rank must hold the same logits: all_sum leaves them equal.
        mine = mx.array(res["logits"])
        if not mx.array_equal(mx.distributed.all_max(mine, group=group), mx.distributed.all_min(mine, group=group)).item():
            raise RuntimeError(f"{case}: the ranks' logits differ")
        entries[case] = {
            "file": f"{case}.safetensors",
            "model": str(model_dir.resolve().relative_to(oracle_dir().resolve())),
            "model_files": fingerprint_dir(model_dir),
            "model_type": config["model_type"],
            "quantization": config.get("quantization"),
            "prompt_len": len(prompt), "prompt_seed": 1,
            "logits_dtype": res["logits_dtype"],
            "prefill_chunks": res["chunks"],
            "calls": res["trace"],
            # a pipeline stage's caches are its own layers' (a qwen3_5 rank
            # of linear layers has only ArraysCache): each rank's trace
            **({"rank_calls": gather_json(res["trace"], group)} if args.pipeline else {}),
            "sampler": sampler,
            "temp": spec.get("temp"), "seed": spec.get("seed"),
            "shard": {"kind": kind, "size": size, "backend": "ring"},
            "unsharded_max_abs_diff": L.max_abs_diff(res["logits"], ref["logits"]),
            "unsharded_same_tokens": bool(np.array_equal(res["tokens"], ref["tokens"])),
            **settings,
        }
        if rank == 0:
            args.out.mkdir(parents=True, exist_ok=True)
            mx.save_safetensors(str(args.out / f"{case}.safetensors"), {
                "prompt_ids": mx.array(np.array(prompt, dtype=np.int32)), "tokens": mx.array(res["tokens"]),
                "logits": mx.array(res["logits"]), "logprobs": mx.array(res["logprobs"])},
                metadata={"case": case, "format": "mlxgo-oracle-v1"})
            e = entries[case]
            print(f"{kind}: {case}: {size} ranks, {e['logits_dtype']}, unsharded max abs diff "
                  f"{e['unsharded_max_abs_diff']:.3g}, same tokens {e['unsharded_same_tokens']}", flush=True)
    if rank == 0:
        write_json(args.out / "index.json", {"format": "mlxgo-oracle-v1", "versions": versions(), "cases": entries})
    return 0


if __name__ == "__main__":
    sys.exit(main())
