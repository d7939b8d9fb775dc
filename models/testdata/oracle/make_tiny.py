"""Build tiny random-weight models with mlx-lm (fixed seed) for the L1 oracle.

Each model is an HF-style MLX model directory (config.json, model.safetensors,
model.safetensors.index.json) written by mlx_lm.utils.save_model/save_config,
so mlx_lm.utils.load_model reads it back exactly as it reads a real model. No
tokenizer: tests feed token ids directly.

The float32 model of each architecture is built first from a seeded
mx.random state; every other variant is derived from that directory the way
`mlx_lm.convert` derives it (load_model, cast floating parameters, then
mlx_lm.utils.quantize_model), minus the tokenizer copy.

    python make_tiny.py                 # tiny models -> .cache/oracle/models/
    python make_tiny.py --big           # also the Llama-3.2-1B-shaped bench models
    python make_tiny.py --only qwen3    # one architecture
"""

import argparse
import copy
import json
import shutil
import sys
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_flatten, tree_map_with_path
from mlx_lm.convert import mixed_quant_predicate_builder
from mlx_lm.utils import _get_classes, load_model, quantize_model, save_config, save_model

sys.path.insert(0, str(Path(__file__).resolve().parent))
from oracle_common import data_dir, fingerprint_dir, oracle_dir, versions, write_json  # noqa: E402

SEED = 20261130

_BASE = dict(
    hidden_size=64,
    intermediate_size=128,
    num_attention_heads=4,
    num_key_value_heads=2,
    num_hidden_layers=2,
    rms_norm_eps=1e-5,
    vocab_size=512,
    max_position_embeddings=2048,
)

MINISTRAL3_ROPE = dict(
    rope_type="yarn",
    rope_theta=1000000.0,
    factor=16.0,
    original_max_position_embeddings=16,
    beta_fast=32.0,
    beta_slow=1.0,
    mscale=1.0,
    mscale_all_dim=0.0,
    llama_4_scaling_beta=0.1,
)

# Architectures and the feature each one is here to exercise. head_dim 64 where
# the kv-bits cases run: mlx-lm quantizes K/V along head_dim in groups of 64.
ARCHS = {
    # plain llama: untied lm_head, default RoPE, head_dim = hidden/heads = 16
    "llama": dict(_BASE, model_type="llama", rope_theta=10000.0, tie_word_embeddings=False),
    # Llama-3.x rope scaling (llama3 rope_type), explicit head_dim 64 != hidden/heads
    "llama_rope3": dict(
        _BASE,
        model_type="llama",
        head_dim=64,
        rope_theta=500000.0,
        rope_scaling=dict(
            rope_type="llama3",
            factor=32.0,
            low_freq_factor=1.0,
            high_freq_factor=4.0,
            original_max_position_embeddings=8192,
        ),
        tie_word_embeddings=False,
    ),
    # tied embeddings (SmolLM2 / Llama-3.2 style): no lm_head.weight in the file
    "llama_tied": dict(_BASE, model_type="llama", num_hidden_layers=3, rope_theta=100000.0, tie_word_embeddings=True),
    # qwen2: q/k/v biases, untied
    "qwen2": dict(_BASE, model_type="qwen2", rope_theta=1000000.0, tie_word_embeddings=False),
    # qwen3: q/k RMSNorm per head, head_dim 64, tied
    "qwen3": dict(_BASE, model_type="qwen3", head_dim=64, rope_theta=1000000.0, tie_word_embeddings=True),
    # qwen3_moe: layers 0,2 sparse (8 experts, top 2, normalized, SwitchGLU via
    # gather_mm / gather_qmm), layer 1 dense (mlp_only_layers); untied
    "qwen3_moe": dict(
        _BASE,
        model_type="qwen3_moe",
        num_hidden_layers=3,
        head_dim=64,
        rope_theta=1000000.0,
        tie_word_embeddings=False,
        num_experts=8,
        num_experts_per_tok=2,
        decoder_sparse_step=1,
        mlp_only_layers=[1],
        moe_intermediate_size=64,
        norm_topk_prob=True,
    ),
    # ministral3: YaRN rope (mscale 1 / mscale_all_dim 0: the input scale is
    # not 1; original_max 16 puts the ramp inside head_dim) and Llama 4's
    # attention scale, which grows past position 16; layers 0,2 sliding
    # (window 16), tied (ministral3.py's default)
    "ministral3": dict(
        _BASE,
        model_type="ministral3",
        num_hidden_layers=4,
        head_dim=64,
        layer_types=["sliding_attention", "full_attention"] * 2,
        sliding_window=16,
        rope_parameters=MINISTRAL3_ROPE,
    ),
    # mistral3: the multimodal wrapper around a ministral3 text model
    # (untied: mistral3.py's default); the f32 file also carries vision tower
    # and projector tensors that sanitize drops
    "mistral3": dict(
        model_type="mistral3",
        text_config=dict(_BASE, model_type="ministral3", head_dim=64, rope_parameters=MINISTRAL3_ROPE),
        vision_config=dict(model_type="pixtral", hidden_size=16),
    ),
    # phi3: fused qkv_proj / gate_up_proj, longrope (SuScaledRoPE: long_factor
    # frequencies, input scale sqrt(1 + log 4 / log 512)) on half the head
    # dims (partial_rotary_factor 0.5, head_dim 16), untied
    "phi3": dict(
        _BASE,
        model_type="phi3",
        rope_theta=10000.0,
        partial_rotary_factor=0.5,
        original_max_position_embeddings=512,
        rope_scaling=dict(type="longrope", long_factor=[1.0, 1.5, 2.0, 4.0], short_factor=[1.0, 1.0, 1.0, 1.0]),
        tie_word_embeddings=False,
    ),
    # gemma3_text: layers 0,2 sliding (window 16, local rope base), 1,3 global with
    # linear rope scaling; 1+weight norms, scaled embeddings, gelu_approx, tied
    "gemma3_text": dict(
        _BASE,
        model_type="gemma3_text",
        num_hidden_layers=4,
        num_key_value_heads=1,
        head_dim=64,
        query_pre_attn_scalar=64,
        rms_norm_eps=1e-6,
        sliding_window=16,
        sliding_window_pattern=2,
        rope_theta=1000000.0,
        rope_local_base_freq=10000.0,
        rope_scaling=dict(rope_type="linear", factor=8.0),
    ),
}

# gemma3: the multimodal wrapper around gemma3_text; text_config has no
# vocab_size (the top level's wins) and no head counts (gemma3.py's defaults,
# 8 and 4); the f32 file also carries vision tower and projector tensors that
# sanitize drops; tied like a real checkpoint (no lm_head)
ARCHS["gemma3"] = dict(
    model_type="gemma3",
    vocab_size=512,
    text_config={k: v for k, v in ARCHS["gemma3_text"].items()
                 if k not in ("vocab_size", "num_attention_heads", "num_key_value_heads")},
    vision_config=dict(model_type="siglip_vision_model", hidden_size=16),
)

# mistral3 around a llama-like text model (Mistral Small 3.1's "mistral"):
# mistral3.py builds llama.Model for any text model_type but ministral3 and
# mistral4
ARCHS["mistral3_llama"] = dict(
    model_type="mistral3",
    text_config=dict(_BASE, model_type="mistral", head_dim=64, rope_theta=1000000000.0),
)

# minicpm: muP scales (scale_emb, scale_depth / sqrt(layers), hidden /
# dim_model_base = 64/24 before the head); the f32 file has no lm_head, which
# sanitize copies from the embedding table (untied: minicpm.py's default)
ARCHS["minicpm"] = dict(
    _BASE,
    model_type="minicpm",
    num_hidden_layers=3,
    rope_theta=10000.0,
    scale_emb=12.0,
    scale_depth=1.4,
    dim_model_base=24,
)

# gpt_oss: attention sinks, layers alternating sliding (window 16) / full,
# a biased router's top 2 of 8 biased experts (SwigluOAI), YaRN rope as the
# real checkpoints have it; lm_head never tied
ARCHS["gpt_oss"] = dict(
    _BASE,
    model_type="gpt_oss",
    num_hidden_layers=4,
    head_dim=64,
    intermediate_size=64,
    num_local_experts=8,
    num_experts_per_tok=2,
    sliding_window=16,
    rope_theta=150000.0,
    rope_scaling=dict(rope_type="yarn", factor=32.0, beta_fast=32.0, beta_slow=1.0,
                      original_max_position_embeddings=64, truncate=False),
)

# qwen3_next: Gated DeltaNet layers (0, 2: 4 value heads over 2 key heads,
# conv kernel 4) and gated full attention (1, 3: full_attention_interval 2,
# partial RoPE on 16 of 64 head dims); sparse MoE (8 experts, top 2, a gated
# shared expert) on layers 0, 2, 3, dense on 1 (mlp_only_layers); untied; the
# f32 file is written as a Hugging Face checkpoint (hf_checkpoint)
ARCHS["qwen3_next"] = dict(
    _BASE,
    model_type="qwen3_next",
    num_hidden_layers=4,
    head_dim=64,
    rope_theta=10000000.0,
    partial_rotary_factor=0.25,
    linear_num_value_heads=4,
    linear_num_key_heads=2,
    linear_key_head_dim=16,
    linear_value_head_dim=16,
    linear_conv_kernel_dim=4,
    full_attention_interval=2,
    num_experts=8,
    num_experts_per_tok=2,
    decoder_sparse_step=1,
    shared_expert_intermediate_size=64,
    mlp_only_layers=[1],
    moe_intermediate_size=64,
    norm_topk_prob=True,
    tie_word_embeddings=False,
)

# qwen3_5 (Qwen3.5 / 3.6 text): the multimodal wrapper around a dense hybrid
# text model (layers 0-2 Gated DeltaNet, 3 full attention: the default
# interval 4), rope in rope_parameters (rope_type, partial_rotary_factor
# 0.25), tied; the f32 file is written as a Hugging Face checkpoint
# (hf_checkpoint) so that sanitize's renames, conv1d axis move and 1 + norm
# run in both loaders
_QWEN3_5_TEXT = dict(
    _BASE,
    model_type="qwen3_5_text",
    num_hidden_layers=4,
    head_dim=64,
    linear_num_value_heads=4,
    linear_num_key_heads=2,
    linear_key_head_dim=32,
    linear_value_head_dim=16,
    linear_conv_kernel_dim=4,
    tie_word_embeddings=True,
    rope_parameters=dict(rope_type="default", rope_theta=10000000.0, partial_rotary_factor=0.25,
                         mrope_section=[2, 1, 1], mrope_interleaved=True),
)
ARCHS["qwen3_5"] = dict(model_type="qwen3_5", text_config=_QWEN3_5_TEXT,
                        vision_config=dict(model_type="qwen3_5", hidden_size=16))
# qwen3_5_moe: every layer sparse (4 experts, top 2, shared expert), untied;
# its f32 file fuses each layer's experts into gate_up_proj / down_proj
ARCHS["qwen3_5_moe"] = dict(
    model_type="qwen3_5_moe",
    text_config=dict(_QWEN3_5_TEXT, model_type="qwen3_5_moe_text", num_hidden_layers=4,
                     tie_word_embeddings=False, num_experts=4, num_experts_per_tok=2,
                     shared_expert_intermediate_size=64, moe_intermediate_size=64),
)

# gemma4_text: layer_types s,s,f,s,s,f (window 16); full layers with their own
# head_dim 64 and proportional rope on a quarter of it, sliding ones 32 with
# default rope; layers 4,5 KV-shared (they read layers 3 and 2; double-wide
# MLPs); per-layer inputs (32 per layer); softcap 30; tied
GEMMA4_TEXT = dict(
    _BASE,
    model_type="gemma4_text",
    num_hidden_layers=6,
    intermediate_size=64,
    head_dim=32,
    global_head_dim=64,
    rms_norm_eps=1e-6,
    sliding_window=16,
    sliding_window_pattern=3,
    num_kv_shared_layers=2,
    hidden_size_per_layer_input=32,
    vocab_size_per_layer_input=512,
    rope_parameters=dict(
        full_attention=dict(partial_rotary_factor=0.25, rope_theta=1000000.0, rope_type="proportional"),
        sliding_attention=dict(rope_theta=10000.0, rope_type="default"),
    ),
)
ARCHS["gemma4_text"] = GEMMA4_TEXT
# gemma4_text with the 26B's features instead: a mixture of experts beside
# the dense MLP (top 2 of 8, gelu experts), K = V on full layers with their
# own KV heads, no KV sharing, no per-layer inputs, explicit layer_types.
# Both f32 files carry what a Hugging Face checkpoint has and sanitize undoes
# (gemma4_hf_tensors): fused experts, the KV-shared layers' k/v projections
ARCHS["gemma4_text_moe"] = dict(
    GEMMA4_TEXT,
    num_hidden_layers=4,
    num_kv_shared_layers=0,
    hidden_size_per_layer_input=0,
    layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
    attention_k_eq_v=True,
    num_global_key_value_heads=1,
    enable_moe_block=True,
    num_experts=8,
    top_k_experts=2,
    moe_intermediate_size=32,
)
# gemma4: the multimodal wrapper around gemma4_text; text_config has no
# vocab_size (the top level's wins) and no head counts (gemma4.py's defaults,
# 8 and 1); the f32 file also carries vision tower and projector tensors
ARCHS["gemma4"] = dict(
    model_type="gemma4",
    vocab_size=512,
    text_config={k: v for k, v in GEMMA4_TEXT.items()
                 if k not in ("vocab_size", "num_attention_heads", "num_key_value_heads")},
    vision_config=dict(model_type="gemma4_vision", hidden_size=16),
)

# An architecture's seed is SEED + its index here: the first six in sorted
# order (how the seeds were first given), every later one appended.
SEED_ORDER = ["gemma3_text", "llama", "llama_rope3", "llama_tied", "qwen2", "qwen3",
              "qwen3_moe", "ministral3", "mistral3", "phi3", "gemma3", "mistral3_llama",
              "minicpm", "gpt_oss", "qwen3_next", "qwen3_5", "qwen3_5_moe", "gemma4_text", "gemma4_text_moe",
              "gemma4"]
assert sorted(SEED_ORDER) == sorted(ARCHS)

# Variants derived from <arch>-f32: (suffix, dtype, quantization or None).
# q4 group sizes alternate so that both 32 and 64 appear.
VARIANTS = {
    "llama": [("bf16", "bfloat16", None), ("q4g64", "bfloat16", (64, 4))],
    "llama_rope3": [("bf16", "bfloat16", None), ("q4g32", "bfloat16", (32, 4))],
    "llama_tied": [("bf16", "bfloat16", None), ("q4g64", "bfloat16", (64, 4)), ("mixed36", "bfloat16", "mixed_3_6")],
    "qwen2": [("bf16", "bfloat16", None), ("q4g32", "bfloat16", (32, 4))],
    "qwen3": [("bf16", "bfloat16", None), ("q4g64", "bfloat16", (64, 4))],
    "gemma3_text": [("bf16", "bfloat16", None), ("q4g64", "bfloat16", (64, 4))],
    # quantize_model takes qwen3_moe's quant_predicate: the router (mlp.gate) 8-bit
    "qwen3_moe": [("bf16", "bfloat16", None), ("q4g64", "bfloat16", (64, 4))],
    "ministral3": [("bf16", "bfloat16", None), ("q4g32", "bfloat16", (32, 4))],
    "mistral3": [("bf16", "bfloat16", None), ("q4g64", "bfloat16", (64, 4))],
    "phi3": [("bf16", "bfloat16", None), ("q4g64", "bfloat16", (64, 4))],
    "gemma3": [("bf16", "bfloat16", None), ("q4g32", "bfloat16", (32, 4))],
    "mistral3_llama": [("q4g64", "bfloat16", (64, 4))],
    "minicpm": [("bf16", "bfloat16", None), ("q4g32", "bfloat16", (32, 4))],
    # MLX's CPU expert matmuls are float32 only: bf16 is recorded as MLX's
    # error, the quantized models keep float32 activations
    # mxfp4q8: the experts MX FP4 (uint8 scales, no biases), everything else
    # 8-bit affine, as the MLX gpt-oss checkpoints are quantized
    "gpt_oss": [("bf16", "bfloat16", None), ("q4g64", "float32", (64, 4)), ("mxfp4q8", "float32", "mxfp4_q8")],
    "gemma4_text": [("bf16", "bfloat16", None), ("q4g64", "bfloat16", (64, 4))],
    # quantize_model takes gemma4's quant_predicate: the router 8-bit
    "gemma4_text_moe": [("bf16", "bfloat16", None), ("q4g32", "float32", (32, 4))],
    "gemma4": [("bf16", "bfloat16", None), ("q4g32", "bfloat16", (32, 4))],
    # quantize_model takes the MoE quant_predicate: router and shared-expert
    # gate 8-bit; bf16 MoE stops at gather_mm on the CPU, as for qwen3_moe
    "qwen3_next": [("bf16", "bfloat16", None), ("q4g64", "bfloat16", (64, 4))],
    "qwen3_5": [("bf16", "bfloat16", None), ("q4g64", "bfloat16", (64, 4)), ("q4g32", "bfloat16", (32, 4)),
                ("mixed36", "bfloat16", "mixed_3_6")],
    "qwen3_5_moe": [("q4g64", "bfloat16", (64, 4)), ("mixed36", "bfloat16", "mixed_3_6")],
}

# Llama-3.2-1B's shape (benchmarks only; ~2.5 GB in bf16).
LLAMA_1B = dict(
    model_type="llama",
    hidden_size=2048,
    intermediate_size=8192,
    num_attention_heads=32,
    num_key_value_heads=8,
    head_dim=64,
    num_hidden_layers=16,
    rms_norm_eps=1e-5,
    vocab_size=128256,
    max_position_embeddings=131072,
    rope_theta=500000.0,
    rope_scaling=dict(
        rope_type="llama3",
        factor=32.0,
        low_freq_factor=1.0,
        high_freq_factor=4.0,
        original_max_position_embeddings=8192,
    ),
    tie_word_embeddings=True,
)


def randomize_extras(model: nn.Module, gemma_norms: bool) -> None:
    """Give norm weights random values: the default all-ones (or all-zeros for
    gemma's 1+weight form) would hide a missing or doubled norm scale."""

    def perturb(path, v):
        if path.endswith("norm.weight"):
            noise = mx.random.normal(v.shape, dtype=mx.float32) * 0.1
            return noise if gemma_norms else 1.0 + noise
        return v

    model.update(tree_map_with_path(perturb, model.parameters()))


def randomize_zero_inits(model: nn.Module, suffixes: tuple, base: float = 0.0) -> None:
    """Give parameters mlx-lm initializes to constants (gpt_oss's sinks and
    expert biases at 0, gemma4's scalars at base 1) random values around
    them, so a missing one changes the logits."""

    def perturb(path, v):
        if path.endswith(suffixes):
            return base + mx.random.normal(v.shape, dtype=mx.float32) * 0.5
        return v

    model.update(tree_map_with_path(perturb, model.parameters()))


def build_f32(name: str, config: dict, out: Path, seed: int) -> None:
    """Construct the model class mlx-lm picks for config, seeded, and save it."""
    mx.random.seed(seed)
    model_class, args_class = _get_classes(config)
    model = model_class(args_class.from_dict(config))
    # gemma3's norms scale by 1 + weight; gemma4's by the weight, as llama's
    randomize_extras(model, gemma_norms=config["model_type"].startswith("gemma3"))
    if config["model_type"] == "gemma3_text":
        # Real Gemma 3 checkpoints carry no lm_head: mlx-lm ties it on load
        # when lm_head.weight is absent (Model.sanitize).
        model.pop("lm_head")
    if config["model_type"] == "gemma3":
        model.language_model.pop("lm_head")
    if config["model_type"] == "minicpm":
        model.pop("lm_head")
    if config["model_type"].startswith("gemma4"):
        # all ones at init: a missing multiply would go unseen
        randomize_zero_inits(model, ("layer_scalar", "router.scale", "router.per_expert_scale"), base=1.0)
    if config["model_type"] == "gpt_oss":
        randomize_zero_inits(model, ("sinks", "experts.gate_proj.bias", "experts.up_proj.bias", "experts.down_proj.bias"))
    if config["model_type"] in ("qwen3_next", "qwen3_5", "qwen3_5_moe"):
        # dt_bias starts as all ones: random values, so a misplaced one shows
        model.update(tree_map_with_path(
            lambda p, v: 1.0 + mx.random.normal(v.shape, dtype=mx.float32) * 0.5 if p.endswith("dt_bias") else v,
            model.parameters()))
    mx.eval(model.parameters())
    save(model, dict(config, torch_dtype="float32"), out)
    if config["model_type"] in ("mistral3", "gemma3", "gemma4"):
        add_vision_tensors(out)
    if config["model_type"] in ("qwen3_next", "qwen3_5", "qwen3_5_moe"):
        hf_checkpoint(out, config["model_type"])
    if name in ("gemma4_text", "gemma4_text_moe"):
        gemma4_hf_tensors(out, config)


def add_vision_tensors(out: Path) -> None:
    """What a real mistral3 checkpoint has besides the language model (here
    two tiny tensors): mlx-lm's sanitize drops them, and so must the Go loader."""
    path = out / "model.safetensors"
    weights = mx.load(str(path))
    weights["vision_tower.transformer.layers.0.attention.q_proj.weight"] = mx.zeros((16, 16))
    weights["multi_modal_projector.linear_1.weight"] = mx.zeros((64, 16))
    mx.save_safetensors(str(path), weights, metadata={"format": "mlx"})
    index = json.loads((out / "model.safetensors.index.json").read_text())
    index["weight_map"] = {k: "model.safetensors" for k in sorted(weights)}
    (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=4))


def hf_checkpoint(out: Path, model_type: str) -> None:
    """Rewrite a saved qwen3_next / qwen3_5 / qwen3_5_moe model the way its
    Hugging Face checkpoint stores it, which mlx-lm's sanitize undoes on
    load: conv1d weights [C, 1, K], the decoder norms as offsets from 1, an
    mtp head to drop; qwen3_next's experts one tensor each
    (experts.E.up_proj.weight ...); qwen3_5's keys under model.language_model
    (lm_head bare) beside a vision tower to drop, and qwen3_5_moe's experts
    fused as experts.gate_up_proj / experts.down_proj."""
    path = out / "model.safetensors"
    src = mx.load(str(path))
    norms = (".input_layernorm.weight", ".post_attention_layernorm.weight", "model.norm.weight",
             ".q_norm.weight", ".k_norm.weight")
    weights = {}
    for k, v in src.items():
        if "conv1d.weight" in k:
            v = v.moveaxis(1, 2)
        if k.endswith(norms):
            v = v - 1.0
        k = k.replace("language_model.model.", "model.language_model.").replace("language_model.lm_head", "lm_head")
        weights[k] = v
    for k in [k for k in weights if model_type == "qwen3_next" and ".switch_mlp." in k]:
        pre, rest = k.split(".switch_mlp.")
        stacked = weights.pop(k)
        for e in range(stacked.shape[0]):
            weights[f"{pre}.experts.{e}.{rest}"] = stacked[e]
    for k in [k for k in weights if k.endswith(".mlp.switch_mlp.gate_proj.weight")]:
        p = k.removesuffix("switch_mlp.gate_proj.weight")
        gate = weights.pop(k)
        up = weights.pop(p + "switch_mlp.up_proj.weight")
        weights[p + "experts.gate_up_proj"] = mx.concatenate([gate, up], axis=-2)
        weights[p + "experts.down_proj"] = weights.pop(p + "switch_mlp.down_proj.weight")
    if model_type != "qwen3_next":
        weights["model.visual.blocks.0.attn.qkv.weight"] = mx.zeros((48, 16))
    weights["mtp.fc.weight"] = mx.zeros((64, 128))
    mx.save_safetensors(str(path), weights, metadata={"format": "mlx"})
    index = json.loads((out / "model.safetensors.index.json").read_text())
    index["weight_map"] = {k: "model.safetensors" for k in sorted(weights)}
    (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=4))


def gemma4_hf_tensors(out: Path, config: dict) -> None:
    """What a Hugging Face Gemma 4 checkpoint has that mlx-lm's sanitize
    undoes: the experts fused as experts.gate_up_proj [E, 2I, H] and
    experts.down_proj, k/v projections and k norms on the KV-shared layers,
    rotary tables and activation clipping ranges (all dropped)."""
    path = out / "model.safetensors"
    weights = mx.load(str(path))
    for k in [k for k in weights if k.endswith(".experts.switch_glu.gate_proj.weight")]:
        p = k.removesuffix("switch_glu.gate_proj.weight")
        gate = weights.pop(k)
        up = weights.pop(p + "switch_glu.up_proj.weight")
        weights[p + "gate_up_proj"] = mx.concatenate([gate, up], axis=-2)
        weights[p + "down_proj"] = weights.pop(p + "switch_glu.down_proj.weight")
    hidden, kv = config["hidden_size"], config["num_key_value_heads"] * config["head_dim"]
    for i in range(config["num_hidden_layers"] - config["num_kv_shared_layers"], config["num_hidden_layers"]):
        p = f"model.layers.{i}.self_attn."
        weights[p + "k_proj.weight"] = mx.zeros((kv, hidden))
        weights[p + "v_proj.weight"] = mx.zeros((kv, hidden))
        weights[p + "k_norm.weight"] = mx.zeros((config["head_dim"],))
    weights["model.layers.0.self_attn.rotary_emb.inv_freq"] = mx.zeros((8,))
    weights["model.layers.0.mlp.gate_proj.input_max"] = mx.zeros((1,))
    mx.save_safetensors(str(path), weights, metadata={"format": "mlx"})
    index = json.loads((out / "model.safetensors.index.json").read_text())
    index["weight_map"] = {k: "model.safetensors" for k in sorted(weights)}
    (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=4))


def save(model: nn.Module, config: dict, out: Path) -> None:
    if out.exists():
        shutil.rmtree(out)
    save_model(out, model)
    save_config(copy.deepcopy(config), out / "config.json")


def mxfp4_experts(path: str, module) -> object:
    """The experts (switch layers) in mxfp4, the router as gpt_oss's own
    quant_predicate has it, the rest at quantize_model's default."""
    if ".experts." in path:
        return {"group_size": 32, "bits": 4, "mode": "mxfp4"}
    if path.endswith("router"):
        return {"group_size": 64, "bits": 8}
    return True


def derive(src: Path, out: Path, dtype: str, quant) -> None:
    """What mlx_lm.convert does to src (cast, then quantize), without a tokenizer."""
    model, config = load_model(src, lazy=True)
    target = getattr(mx, dtype)
    cast_predicate = getattr(model, "cast_predicate", lambda _: True)

    def set_dtype(k, v):
        if cast_predicate(k) and mx.issubdtype(v.dtype, mx.floating):
            return v.astype(target)
        return v

    model.update(tree_map_with_path(set_dtype, model.parameters()))
    config["torch_dtype"] = dtype
    if quant == "mxfp4_q8":
        model, config = quantize_model(model, config, 64, 8, quant_predicate=mxfp4_experts)
    elif isinstance(quant, str):
        pred = mixed_quant_predicate_builder(quant, model, 64)
        model, config = quantize_model(model, config, 64, 4, quant_predicate=pred)
    elif quant is not None:
        group_size, bits = quant
        model, config = quantize_model(model, config, group_size, bits)
    save(model, config, out)


def copy_llama3_tokenizer(out: Path) -> None:
    """Give the 1B-shaped model the Llama 3.1 tokenizer (same 128256 ids) from
    `make data`, so both sides of `make bench` can feed it the same text."""
    src = data_dir() / "tokenizers" / "llama3_1"
    if not (src / "tokenizer.json").exists():
        print(f"make_tiny: no {src}/tokenizer.json (run make data-tok): bench needs --prompt-tokens", file=sys.stderr)
        return
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(src / name, out / name)


def build_big(models: Path, seed: int) -> list:
    """The Llama-3.2-1B-shaped model: built lazily in fp32 and cast before
    evaluation, so at most one fp32 tensor is alive at a time."""
    names = []
    mx.random.seed(seed)
    model_class, args_class = _get_classes(LLAMA_1B)
    model = model_class(args_class.from_dict(LLAMA_1B))
    randomize_extras(model, gemma_norms=False)
    model.update(tree_map_with_path(lambda k, v: v.astype(mx.bfloat16), model.parameters()))
    # one tensor at a time: the fp32 draw of each lives only until its cast
    for _, v in tree_flatten(model.parameters()):
        mx.eval(v)
    out = models / "llama1b-bf16"
    save(model, dict(LLAMA_1B, torch_dtype="bfloat16"), out)
    copy_llama3_tokenizer(out)
    names.append(out.name)
    model, config = quantize_model(model, dict(LLAMA_1B, torch_dtype="bfloat16"), 64, 4)
    out = models / "llama1b-q4g64"
    save(model, config, out)
    copy_llama3_tokenizer(out)
    names.append(out.name)
    return names


# Gemma 4 E2B's widths (hidden 1536, 8 heads of 256 / global 512 over one KV
# head, MLP 6144, per-layer inputs 256, window 512, vocab 262144) over 10
# layers, the last 4 KV-shared (benchmarks only: `make bench` on a gemma4 shape
# without E2B's 35 layers, whose per-layer table alone is 2.3B parameters)
GEMMA4_BENCH = dict(
    model_type="gemma4_text",
    hidden_size=1536,
    num_hidden_layers=10,
    intermediate_size=6144,
    num_attention_heads=8,
    num_key_value_heads=1,
    head_dim=256,
    global_head_dim=512,
    num_kv_shared_layers=4,
    hidden_size_per_layer_input=256,
    vocab_size=262144,
    vocab_size_per_layer_input=262144,
    sliding_window=512,
    sliding_window_pattern=5,
    max_position_embeddings=131072,
)


def build_gemma4_bench(models: Path, seed: int) -> list:
    """GEMMA4_BENCH in 4-bit (g64), built as build_big builds, with the Gemma 3
    tokenizer (same 262144 ids) from `make data` so both sides of `make bench`
    can feed it text."""
    mx.random.seed(seed)
    model_class, args_class = _get_classes(GEMMA4_BENCH)
    model = model_class(args_class.from_dict(GEMMA4_BENCH))
    randomize_extras(model, gemma_norms=False)
    model.update(tree_map_with_path(lambda k, v: v.astype(mx.bfloat16), model.parameters()))
    for _, v in tree_flatten(model.parameters()):
        mx.eval(v)
    model, config = quantize_model(model, dict(GEMMA4_BENCH, torch_dtype="bfloat16"), 64, 4)
    out = models / "gemma4-bench-q4g64"
    save(model, config, out)
    src = data_dir() / "tokenizers" / "gemma3"
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(src / name, out / name)
    return [out.name]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=oracle_dir() / "models", help="models directory")
    ap.add_argument("--only", action="append", choices=sorted(ARCHS), help="build only these architectures")
    ap.add_argument("--big", action="store_true", help="also build the Llama-3.2-1B-shaped bench models")
    ap.add_argument("--big-only", action="store_true", help="build only the Llama-3.2-1B-shaped bench models")
    ap.add_argument("--gemma4-bench-only", action="store_true", help="build only the gemma4 bench model")
    ap.add_argument("--seed", type=int, default=SEED)
    args = ap.parse_args()

    mx.set_default_device(mx.cpu)
    args.out.mkdir(parents=True, exist_ok=True)
    index_path = args.out / "index.json"
    index = {}
    if index_path.exists():
        index = json.loads(index_path.read_text()).get("models", {})

    built = []
    if args.gemma4_bench_only:
        built += build_gemma4_bench(args.out, args.seed + 2000)
    elif not args.big_only:
        for name in sorted(args.only or ARCHS):
            src = args.out / f"{name}-f32"
            # Each architecture gets its own seed so that adding one never
            # changes the weights of another.
            build_f32(name, ARCHS[name], src, args.seed + SEED_ORDER.index(name))
            built.append(src.name)
            for suffix, dtype, quant in VARIANTS[name]:
                out = args.out / f"{name}-{suffix}"
                derive(src, out, dtype, quant)
                built.append(out.name)
    if args.big or args.big_only:
        built += build_big(args.out, args.seed + 1000)

    for name in built:
        d = args.out / name
        cfg = json.loads((d / "config.json").read_text())
        index[name] = {
            "model_type": cfg["model_type"],
            "torch_dtype": cfg.get("torch_dtype"),
            "quantization": cfg.get("quantization"),
            "files": fingerprint_dir(d),
        }
        print(f"make_tiny: wrote {d}", file=sys.stderr)
    write_json(index_path, {"seed": args.seed, "versions": versions(), "models": index})
    return 0


if __name__ == "__main__":
    sys.exit(main())
