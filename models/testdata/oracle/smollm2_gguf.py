"""SmolLM2-135M-Instruct (GGUF Q4_1) as an mlx-lm model, plus its reference logits.

"The same way on both sides": the tensors come from MLX's own GGUF reader,
mx.load(path, return_metadata=True), which turns Q4_1 into MLX affine
quantization without loss (uint32 packed weights, float16 scales = d,
float16 biases = m, group 32) and leaves F32 tensors (the norms) in float32.
Nothing is cast. The Go GGUF loader must produce these same arrays.

Name mapping (GGUF -> mlx-lm llama):
  token_embd -> model.embed_tokens        output_norm -> model.norm
  output -> lm_head (absent here: tied)   blk.N.attn_norm -> model.layers.N.input_layernorm
  blk.N.attn_q/k/v/output -> model.layers.N.self_attn.q_proj/k_proj/v_proj/o_proj
  blk.N.ffn_gate/up/down -> model.layers.N.mlp.gate_proj/up_proj/down_proj
  blk.N.ffn_norm -> model.layers.N.post_attention_layernorm

RoPE: llama.cpp's convert_hf_to_gguf.py permutes the rows of Q (with n_head)
and K (with n_head_kv) so that each head's two rotary halves (HF "rotate_half"
layout, mlx traditional=False) become interleaved pairs (GPT-J layout, mlx
traditional=True): rows reshape(heads, 2, head_dim/2, in).swapaxes(1, 2).
This script undoes it: reshape(heads, head_dim/2, 2, in).swapaxes(1, 2). A
quantization group runs along a row (the input dim), so permuting rows of the
packed weight, scales and biases alike is exact. The result is the HF layout,
run with mlx-lm's default rope_traditional=False. (Keeping the GGUF rows and
setting rope_traditional=True is the same function mathematically but sums in
another order; --check-traditional measures the difference.)

Tokenizer: transformers 5.23's GGUF path (from_pretrained(gguf_file=...))
needs torch only to read the file, so this script reads the metadata with
mx.load and calls transformers' own converter (convert_gguf_tokenizer) on it.
transformers has no entry for GGUF pre-tokenizer "smollm"; llama.cpp defines
it as single digits (\\p{N}) then the GPT-2 split, which is exactly the
original SmolLM2 tokenizer.json's Digits(individual_digits) + ByteLevel, so
that pre-tokenizer is set explicitly. The tokenizer is saved into the model
directory, so mlx_lm.load(dir) loads both.

    python smollm2_gguf.py               # -> .cache/oracle/models/smollm2-q4_1, cases/smollm2-*
"""

import argparse
import shutil
import sys
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from logits import make_case, max_abs_diff, run, update_index  # noqa: E402
from oracle_common import data_dir, oracle_dir, sha256_file, write_json  # noqa: E402

GGUF_REL = "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"

PROMPTS = [
    "Write a haiku about the sea",
    "What is the capital of France? Answer in one sentence.",
    "Explain in two sentences why the sky is blue.",
]

_LAYER_NAMES = {
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
_TOP_NAMES = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}


def meta_int(meta, key):
    return int(meta[key].item())


def model_config(meta: dict, has_output: bool) -> dict:
    """HF-style llama config from the GGUF's llama.* keys."""
    if meta.get("general.architecture") != "llama":
        raise ValueError(f"cannot convert architecture {meta.get('general.architecture')!r}: want llama")
    heads = meta_int(meta, "llama.attention.head_count")
    hidden = meta_int(meta, "llama.embedding_length")
    head_dim = meta_int(meta, "llama.rope.dimension_count") if "llama.rope.dimension_count" in meta else hidden // heads
    if head_dim != hidden // heads:
        raise ValueError(f"partial rotary (rope dims {head_dim}, head dim {hidden // heads}) is not handled")
    vocab = meta_int(meta, "llama.vocab_size") if "llama.vocab_size" in meta else len(meta["tokenizer.ggml.tokens"])
    return {
        "model_type": "llama",
        "hidden_size": hidden,
        "num_hidden_layers": meta_int(meta, "llama.block_count"),
        "intermediate_size": meta_int(meta, "llama.feed_forward_length"),
        "num_attention_heads": heads,
        "num_key_value_heads": meta_int(meta, "llama.attention.head_count_kv"),
        "rms_norm_eps": float(meta["llama.attention.layer_norm_rms_epsilon"].item()),
        "rope_theta": float(meta["llama.rope.freq_base"].item()),
        "max_position_embeddings": meta_int(meta, "llama.context_length"),
        "vocab_size": vocab,
        "tie_word_embeddings": not has_output,
        "bos_token_id": meta_int(meta, "tokenizer.ggml.bos_token_id"),
        "eos_token_id": meta_int(meta, "tokenizer.ggml.eos_token_id"),
        "quantization": {"group_size": 32, "bits": 4, "mode": "affine"},
    }


def unpermute_rows(x: mx.array, n_heads: int) -> mx.array:
    """Undo llama.cpp's Q/K row permutation (GPT-J pairs -> HF halves)."""
    rows = x.shape[0]
    d = rows // n_heads
    return x.reshape(n_heads, d // 2, 2, *x.shape[1:]).swapaxes(1, 2).reshape(x.shape)


def permute_rows(x: mx.array, n_heads: int) -> mx.array:
    """llama.cpp's permutation itself (HF halves -> GPT-J pairs); for the round-trip check."""
    rows = x.shape[0]
    d = rows // n_heads
    return x.reshape(n_heads, 2, d // 2, *x.shape[1:]).swapaxes(1, 2).reshape(x.shape)


def map_weights(gguf: dict, config: dict, unpermute: bool = True) -> dict:
    out = {}
    for name, arr in gguf.items():
        base, _, part = name.rpartition(".")  # part: weight | scales | biases
        if base.startswith("blk."):
            _, layer, kind = base.split(".", 2)
            if kind not in _LAYER_NAMES:
                raise ValueError(f"cannot map GGUF tensor {name!r}")
            if unpermute and kind == "attn_q":
                arr = unpermute_rows(arr, config["num_attention_heads"])
            elif unpermute and kind == "attn_k":
                arr = unpermute_rows(arr, config["num_key_value_heads"])
            out[f"model.layers.{layer}.{_LAYER_NAMES[kind]}.{part}"] = arr
        elif base in _TOP_NAMES:
            out[f"{_TOP_NAMES[base]}.{part}"] = arr
        else:
            raise ValueError(f"cannot map GGUF tensor {name!r}")
    return out


def build_model(config: dict, weights: dict, traditional: bool = False):
    """An mlx-lm llama Model holding weights as they are. Modules whose packing
    differs from the file type (the Q8_0 token_embd of this Q4_1 file) are
    recorded as per-module overrides in config["quantization"], the form
    mlx_lm.utils.load_model reads back."""
    from mlx_lm.utils import _get_classes, infer_quant_config

    model_class, args_class = _get_classes(config)
    model = model_class(args_class.from_dict(dict(config, rope_traditional=traditional)))
    q = config["quantization"]

    def predicate(path, module):
        if not hasattr(module, "to_quantized") or f"{path}.scales" not in weights:
            return False
        params = infer_quant_config(path, module, weights)
        if (params["group_size"], params["bits"]) != (q["group_size"], q["bits"]):
            q[path] = params
        return params

    nn.quantize(model, group_size=q["group_size"], bits=q["bits"], class_predicate=predicate)
    model.eval()
    model.load_weights(list(weights.items()), strict=True)
    mx.eval(model.parameters())
    return model


def build_tokenizer(meta: dict):
    """transformers' GGUF tokenizer conversion, fed from mx.load's metadata."""
    from tokenizers import pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    from transformers.integrations.gguf.gguf_tokenizer_mapping import (
        GGUF_TOKENIZER_MAPPING,
        convert_gguf_tokenizer,
    )

    def plain(v):
        return v.tolist() if isinstance(v, mx.array) else v

    groups = {
        group: {name: plain(meta[f"tokenizer.{key}"]) for key, name in renames.items() if f"tokenizer.{key}" in meta}
        for group, renames in GGUF_TOKENIZER_MAPPING.items()
    }
    tok_dict, tok_config = groups["tokenizer"], groups["tokenizer_config"]
    for name, key in (("bos_token", "bos_token_id"), ("eos_token", "eos_token_id"),
                      ("unk_token", "unknown_token_id"), ("pad_token", "padding_token_id")):
        tid = meta.get(f"tokenizer.ggml.{key}")
        tok_config[name] = tok_dict["tokens"][int(tid.item())] if tid is not None else None
    backend, extra = convert_gguf_tokenizer(meta["general.architecture"], tok_dict)
    if tok_dict.get("pre_tokenizer_type") == "smollm":
        backend.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True),
        ])
    return PreTrainedTokenizerFast(tokenizer_object=backend, **tok_config, **extra)


def chat_ids(tokenizer, text: str):
    """What the mlx_lm.generate CLI does: template to a string, then encode
    without adding special tokens."""
    s = tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                      add_generation_prompt=True)
    return s, tokenizer.encode(s, add_special_tokens=False)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gguf", type=Path, default=data_dir() / GGUF_REL)
    ap.add_argument("--out", type=Path, default=oracle_dir() / "models" / "smollm2-q4_1")
    ap.add_argument("--cases", type=Path, default=oracle_dir() / "cases")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--no-checks", action="store_true", help="skip the rerun and no-compile comparisons")
    ap.add_argument("--no-check-traditional", action="store_true",
                    help="skip comparing against the traditional-RoPE build on permuted rows")
    args = ap.parse_args()
    mx.set_default_device(mx.cpu)
    if not args.gguf.exists():
        print(f"smollm2_gguf: missing {args.gguf}: run make data-smollm2", file=sys.stderr)
        return 1

    from mlx_lm import generate, load
    from mlx_lm.utils import save_config, save_model

    gguf, meta = mx.load(str(args.gguf), return_metadata=True)
    config = model_config(meta, has_output="output.weight" in gguf)
    weights = map_weights(gguf, config)
    # The inverse must round-trip bit for bit on every row it touched.
    for layer in range(config["num_hidden_layers"]):
        for kind, heads in (("attn_q", config["num_attention_heads"]), ("attn_k", config["num_key_value_heads"])):
            k = f"blk.{layer}.{kind}.weight"
            if not mx.array_equal(permute_rows(unpermute_rows(gguf[k], heads), heads), gguf[k]).item():
                raise RuntimeError(f"row permutation does not round-trip on {k}")

    model = build_model(config, weights)
    tokenizer = build_tokenizer(meta)
    if args.out.exists():
        shutil.rmtree(args.out)
    save_model(args.out, model)
    save_config(dict(config), args.out / "config.json")
    tokenizer.save_pretrained(args.out)
    print(f"smollm2_gguf: wrote {args.out}", file=sys.stderr)

    # From here on everything goes through mlx-lm's normal loader.
    model, tok = load(str(args.out))
    entries = {}
    for i, text in enumerate(PROMPTS):
        chat, ids = chat_ids(tok, text)
        reply = generate(model, tok, prompt=ids, max_tokens=args.max_tokens, verbose=False)
        case = f"smollm2-q4_1-p{i}"
        entry = make_case(case, args.out, args.cases, prompt=ids, steps=args.max_tokens, checks=not args.no_checks,
                          extra={"prompt_text": text, "chat_text": chat, "generate_text": reply,
                                 "generate_max_tokens": args.max_tokens, "tokenizer": "transformers GGUF converter + smollm pre-tokenizer",
                                 "source_gguf": GGUF_REL, "source_gguf_sha256": sha256_file(args.gguf)})
        if not args.no_check_traditional and i == 0:
            trad = build_model(config, map_weights(gguf, config, unpermute=False), traditional=True)
            res = run(trad, ids, args.max_tokens, 2048, None, 64, 5000, None)
            ref = mx.load(str(args.cases / entry["file"]))
            entry["traditional_rope_max_abs_diff"] = max_abs_diff(np.array(ref["logits"]), res["logits"])
            entry["traditional_rope_same_tokens"] = bool(np.array_equal(np.array(ref["tokens"]), res["tokens"]))
        entries[case] = entry
        print(f"smollm2_gguf: {case}: {len(ids)} prompt tokens, {entry['logits_dtype']}; reply: {reply!r}",
              file=sys.stderr)
    update_index(args.cases, entries)
    write_json(args.out / "oracle.json", {"source_gguf": GGUF_REL, "source_gguf_sha256": sha256_file(args.gguf),
                                          "config": config})
    return 0


if __name__ == "__main__":
    sys.exit(main())
