"""LoRA / DoRA adapters in mlx-lm's format, and mlx-lm's logits with them, for mlxgo's adapter tests.

Each adapter is made the way mlx_lm.lora makes one: the tiny model's layers are
converted by mlx_lm.tuner.utils.linear_to_lora_layers (after model.freeze(), so
that the trainable parameters are exactly the adapter's), its lora_a / lora_b
(and DoRA's m) are given seeded random values -- lora_b is NOT zero, unlike a
fresh adapter, so the update changes the logits -- and the trainable parameters
are saved as adapters.safetensors beside adapter_config.json, which is the pair
mlx_lm.tuner.utils.load_adapters reads.

Then, per (model, adapter): the logits of mlx_lm.generate's generate_step
(logits.py's recorder: prefill + decode steps) with the adapter loaded by
mlx_lm.utils.load's path (load_model, load_adapters, model.eval()), and with the
adapter fused the way mlx_lm.fuse fuses it (every module with a fuse() replaced
by module.fuse(dequantize=False), so quantized bases are re-quantized).

Output: .cache/oracle/lora/adapters/<adapter>/{adapter_config.json,adapters.safetensors},
.cache/oracle/lora/<case>.safetensors (logits.py's fixture format) and
.cache/oracle/lora/index.json.

    python lora.py        # after make_tiny.py
"""

import json
import sys
from pathlib import Path

import mlx.core as mx
import numpy as np
from mlx.utils import tree_flatten, tree_unflatten
from mlx_lm.tuner.utils import linear_to_lora_layers, load_adapters
from mlx_lm.utils import load_model

sys.path.insert(0, str(Path(__file__).resolve().parent))
from logits import max_abs_diff, run  # noqa: E402
from oracle_common import fingerprint_dir, oracle_device, oracle_dir, prompt_ids, versions, write_json  # noqa: E402

SEED = 20261202
STEPS = 32

# Adapters: the base model whose shapes they fit, and adapter_config.json as
# mlx_lm.lora writes it (fine_tune_type, num_layers, lora_parameters).
ADAPTERS = {
    # default keys (every linear of a layer), the last layer of two only
    "llama-all-last1": ("llama-f32", dict(fine_tune_type="lora", num_layers=1,
                                          lora_parameters=dict(rank=4, scale=2.0, dropout=0.0))),
    # explicit keys, every layer, plus the untied lm_head (a key matched at the model's top level)
    "llama-qvdown-head": ("llama-f32", dict(fine_tune_type="lora", num_layers=-1,
                                            lora_parameters=dict(rank=8, scale=10.0, dropout=0.05,
                                                                 keys=["self_attn.q_proj", "self_attn.v_proj",
                                                                       "mlp.down_proj", "lm_head"]))),
    # DoRA on the attention projections
    "llama-dora": ("llama-f32", dict(fine_tune_type="dora", num_layers=2,
                                     lora_parameters=dict(rank=4, scale=4.0, dropout=0.0,
                                                          keys=["self_attn.q_proj", "self_attn.k_proj",
                                                                "self_attn.v_proj", "self_attn.o_proj"]))),
    # qwen3 (tied embeddings, q/k norms): every linear of every layer
    "qwen3-all": ("qwen3-f32", dict(fine_tune_type="lora", num_layers=16,
                                    lora_parameters=dict(rank=4, scale=2.0, dropout=0.0))),
}

# A real model with a tokenizer (smollm2_gguf.py's MLX conversion of the
# default model) for mlxgo generate's text: (adapter, config).
SMOLLM2 = "smollm2-q4_1"
SMOLLM2_ADAPTER = ("smollm2-chat", dict(fine_tune_type="lora", num_layers=8,
                                        lora_parameters=dict(rank=8, scale=20.0, dropout=0.0,
                                                             keys=["self_attn.q_proj", "self_attn.v_proj",
                                                                   "self_attn.o_proj", "mlp.down_proj"])))
SMOLLM2_PROMPT = "Write a haiku about the sea"
SMOLLM2_MAX_TOKENS = 24

# Cases: (model, adapter) pairs; each is recorded unfused and fused.
CASES = [
    ("llama-f32", "llama-all-last1"),
    ("llama-f32", "llama-qvdown-head"),
    ("llama-f32", "llama-dora"),
    ("llama-bf16", "llama-all-last1"),
    ("llama-q4g64", "llama-all-last1"),
    ("llama-q4g64", "llama-qvdown-head"),
    ("llama-q4g64", "llama-dora"),
    ("qwen3-f32", "qwen3-all"),
    ("qwen3-q4g64", "qwen3-all"),
]


def make_adapter(name: str, base: Path, config: dict, out: Path, seed: int) -> None:
    """What mlx_lm.lora leaves in --adapter-path, with seeded random weights."""
    model, _ = load_model(base)
    model.freeze()
    linear_to_lora_layers(model, config["num_layers"], config["lora_parameters"],
                          use_dora=config["fine_tune_type"] == "dora")
    mx.random.seed(seed)
    params = {}
    for k, v in tree_flatten(model.trainable_parameters()):
        leaf = k.rsplit(".", 1)[-1]
        if leaf == "lora_a":
            params[k] = mx.random.uniform(-1.0, 1.0, v.shape) / np.sqrt(v.shape[0])
        elif leaf == "lora_b":
            params[k] = mx.random.normal(v.shape) * 0.05
        elif leaf == "m":
            params[k] = v * (1.0 + 0.1 * mx.random.normal(v.shape))
        else:
            raise RuntimeError(f"unexpected trainable parameter {k}")
    out.mkdir(parents=True, exist_ok=True)
    mx.save_safetensors(str(out / "adapters.safetensors"), params)
    (out / "adapter_config.json").write_text(json.dumps(config, indent=4) + "\n")


def fuse(model) -> None:
    """mlx_lm.fuse's main() without --dequantize, in memory."""
    fused = [(n, m.fuse(dequantize=False)) for n, m in model.named_modules() if hasattr(m, "fuse")]
    if fused:
        model.update_modules(tree_unflatten(fused))


def record(case: str, model_dir: Path, adapter_dir: Path, fused: bool, out: Path, base_tokens) -> dict:
    model, config = load_model(model_dir)
    load_adapters(model, str(adapter_dir))
    model.eval()
    if fused:
        fuse(model)
    prompt = prompt_ids(1, 24, config["vocab_size"])
    res = run(model, prompt, steps=STEPS, prefill_step_size=2048, kv_bits=None, kv_group_size=64,
              quantized_kv_start=5000, max_kv_size=None)
    again = run(model, prompt, steps=STEPS, prefill_step_size=2048, kv_bits=None, kv_group_size=64,
                quantized_kv_start=5000, max_kv_size=None)
    mx.save_safetensors(str(out / f"{case}.safetensors"), {
        "prompt_ids": mx.array(np.array(prompt, dtype=np.int32)),
        "tokens": mx.array(res["tokens"]),
        "logits": mx.array(res["logits"]),
        "logprobs": mx.array(res["logprobs"]),
    }, metadata={"case": case, "format": "mlxgo-oracle-v1"})
    return {
        "file": f"{case}.safetensors",
        "model": str(model_dir.resolve().relative_to(oracle_dir().resolve())),
        "model_files": fingerprint_dir(model_dir),
        "adapter": str(adapter_dir.resolve().relative_to(oracle_dir().resolve())),
        "fused": fused,
        "logits_dtype": res["logits_dtype"],
        "prefill_chunks": res["chunks"],
        "steps": STEPS,
        "rerun_max_abs_diff": max_abs_diff(res["logits"], again["logits"]),
        # the adapter must change what the model says, or the test proves nothing
        "tokens_differ_from_base": base_tokens is not None and not np.array_equal(res["tokens"], base_tokens),
    }


def main() -> int:
    mx.set_default_device(oracle_device())
    root = oracle_dir()
    models, out = root / "models", root / "lora"
    out.mkdir(parents=True, exist_ok=True)
    for i, (name, (base, config)) in enumerate(sorted(ADAPTERS.items())):
        make_adapter(name, models / base, config, out / "adapters" / name, SEED + i)
    cases = {}
    for model_name, adapter in CASES:
        model_dir = models / model_name
        base, _ = load_model(model_dir)
        prompt = prompt_ids(1, 24, json.loads((model_dir / "config.json").read_text())["vocab_size"])
        base_tokens = run(base, prompt, steps=STEPS, prefill_step_size=2048, kv_bits=None, kv_group_size=64,
                          quantized_kv_start=5000, max_kv_size=None)["tokens"]
        for fused in (False, True):
            case = f"{model_name}+{adapter}" + ("-fused" if fused else "")
            cases[case] = record(case, model_dir, out / "adapters" / adapter, fused, out, base_tokens)
            if not cases[case]["tokens_differ_from_base"]:
                raise RuntimeError(f"{case}: the adapter does not change the greedy tokens")
            print(f"lora: wrote {case}", file=sys.stderr)
    index = {"format": "mlxgo-oracle-v1", "versions": versions(), "cases": cases}
    smol = models / SMOLLM2
    if (smol / "tokenizer.json").exists():
        index["generate"] = generate_texts(smol, out)
    else:
        print(f"lora: no {smol} (smollm2_gguf.py): no generate text recorded", file=sys.stderr)
    write_json(out / "index.json", index)
    return 0


def generate_texts(model_dir: Path, out: Path) -> dict:
    """mlx_lm.generate's greedy text for a chat prompt with the SmolLM2
    adapter (mlx_lm.load(adapter_path=...)), and with it fused as mlx_lm.fuse does."""
    from mlx_lm import generate, load

    name, config = SMOLLM2_ADAPTER
    adapter_dir = out / "adapters" / name
    make_adapter(name, model_dir, config, adapter_dir, SEED + 100)
    texts = {}
    for fused in (False, True):
        model, tok = load(str(model_dir), adapter_path=str(adapter_dir))
        if fused:
            fuse(model)
        s = tok.apply_chat_template([{"role": "user", "content": SMOLLM2_PROMPT}], tokenize=False,
                                    add_generation_prompt=True)
        ids = tok.encode(s, add_special_tokens=False)
        texts["fused_text" if fused else "text"] = generate(model, tok, prompt=ids, max_tokens=SMOLLM2_MAX_TOKENS,
                                                            verbose=False)
    base, tok = load(str(model_dir))
    ids = tok.encode(tok.apply_chat_template([{"role": "user", "content": SMOLLM2_PROMPT}], tokenize=False,
                                             add_generation_prompt=True), add_special_tokens=False)
    texts["base_text"] = generate(base, tok, prompt=ids, max_tokens=SMOLLM2_MAX_TOKENS, verbose=False)
    if texts["text"] == texts["base_text"]:
        raise RuntimeError("the SmolLM2 adapter does not change the text")
    print(f"lora: {name}: {texts}", file=sys.stderr)
    return dict(texts, model=str(model_dir.resolve().relative_to(oracle_dir().resolve())),
                adapter=str(adapter_dir.resolve().relative_to(oracle_dir().resolve())),
                prompt_text=SMOLLM2_PROMPT, max_tokens=SMOLLM2_MAX_TOKENS)


if __name__ == "__main__":
    sys.exit(main())
