"""The tiny seeded float32 models of make_tiny.py written as GGUF files the way
llama.cpp's convert_hf_to_gguf.py writes them, for models/gguf_test.go: a GGUF
load must give the same model (bit-identical logits) as the safetensors load of
the same weights, which the L1 suite ties to mlx-lm.

What the converter does and this script repeats (llama.cpp b6xxx, gguf==0.19.0):
  - names: token_embd, output_norm, output, blk.N.{attn_norm, attn_q, attn_k,
    attn_v, attn_output, ffn_norm, ffn_gate, ffn_up, ffn_down}; qwen3/gemma3
    attn_q_norm/attn_k_norm; gemma3 post_attention_norm, ffn_norm (the
    pre-feedforward norm), post_ffw_norm; qwen2 attn_{q,k,v}.bias;
  - llama: q/k rows permuted for ggml's rope (LlamaModel.permute); qwen2,
    qwen3 and gemma3: not permuted;
  - gemma3: every *norm.weight stored as weight + 1 (Gemma3Model.modify_tensors);
  - metadata {arch}.context_length, embedding_length, block_count,
    feed_forward_length, attention.head_count(_kv), attention.key_length and
    value_length (qwen3, gemma3), attention.layer_norm_rms_epsilon,
    rope.freq_base, rope.scaling.type/factor, attention.sliding_window;
    the tiny gemma3 has sliding_window_pattern 2, written as
    gemma3.attention.sliding_window_pattern (llama.cpp's gemma3 converter omits
    the key, and llama.cpp then assumes 6, as mlxgo does).

  - phi3 (Phi3MiniModel): the fused attn_qkv (qkv_proj) and ffn_up
    (gate_up_proj) as they are; rope.dimension_count int(partial_rotary_factor
    * hidden) // heads; rope.scaling.original_context_length and attn_factor;
    longrope's factors as float32 tensors rope_factors_long/short;
  - minicpm (MiniCPMModel): llama's names and q/k permutation; embedding_scale
    = scale_emb, residual_scale = scale_depth / sqrt(layers), logit_scale =
    hidden / dim_model_base (float32 in the file); no output tensor when the
    model has no lm_head;
  - qwen3_moe as arch "qwen3moe" (Qwen3MoeModel): expert_count,
    expert_used_count, expert_feed_forward_length; router ffn_gate_inp, experts
    stacked as ffn_{gate,up,down}_exps [experts, out, in]. The tiny model's
    mlp_only_layers block is written with dense ffn_gate/up/down (llama.cpp's
    converter has no name for it and would refuse it; mlxgo reads a block
    without a router as mlp-only).

Quantized: qwen3_moe-q8_0 is the tiny qwen3_moe as a Q8_0 GGUF with Q4_0
expert stacks (gguf.quants, as llama-quantize's blocks are), and
qwen3_moe-q8_0/ the same model as an MLX directory whose arrays are MLX's own
GGUF reader's (mx.load: lossless affine, group 32, float16 scales), so that
the Go GGUF load of the 3-D quantized experts must equal the safetensors load.

Usage: tiny_gguf.py   (writes .cache/oracle/gguf/<model>.gguf)
"""
import json
import math
from pathlib import Path

import gguf
import numpy as np
from safetensors.numpy import load_file

REPO = Path(__file__).resolve().parents[3]
MODELS = REPO / ".cache" / "oracle" / "models"
OUT = REPO / ".cache" / "oracle" / "gguf"

LAYER = {
    "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
    "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down", "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
}
GEMMA_LAYER = dict(LAYER, post_attention_layernorm="post_attention_norm",
                   pre_feedforward_layernorm="ffn_norm", post_feedforward_layernorm="post_ffw_norm")
PHI3_LAYER = dict(LAYER, **{"self_attn.qkv_proj": "attn_qkv", "mlp.gate_up_proj": "ffn_up"})
MOE_LAYER = dict(LAYER, **{"mlp.gate": "ffn_gate_inp", "mlp.switch_mlp.gate_proj": "ffn_gate_exps",
                           "mlp.switch_mlp.up_proj": "ffn_up_exps", "mlp.switch_mlp.down_proj": "ffn_down_exps"})
TOP = {"model.embed_tokens": "token_embd", "model.norm": "output_norm", "lm_head": "output"}


def permute(w, n_head, n_head_kv):
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def convert(name, path=None, quantize=None):
    """quantize(gguf name, array) -> a GGMLQuantizationType, or None: float32."""
    src = MODELS / name
    cfg = json.loads((src / "config.json").read_text())
    mt = cfg["model_type"]
    arch = {"gemma3_text": "gemma3", "qwen3_moe": "qwen3moe"}.get(mt, mt)
    layer = {"gemma3": GEMMA_LAYER, "phi3": PHI3_LAYER, "qwen3moe": MOE_LAYER}.get(arch, LAYER)
    w = gguf.GGUFWriter(str(path or OUT / f"{name}.gguf"), arch)
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_rope_freq_base(cfg["rope_theta"])
    w.add_vocab_size(cfg["vocab_size"])
    if "head_dim" in cfg:
        w.add_key_length(cfg["head_dim"])
        w.add_value_length(cfg["head_dim"])
    sc = cfg.get("rope_scaling")
    if sc and sc.get("rope_type", sc.get("type")) == "linear":
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(sc["factor"])
    if arch == "gemma3":
        w.add_sliding_window(cfg["sliding_window"])
        w.add_uint32("gemma3.attention.sliding_window_pattern", cfg["sliding_window_pattern"])
    if arch == "phi3":
        w.add_rope_dimension_count(int(cfg.get("partial_rotary_factor", 1.0) * cfg["hidden_size"]) // cfg["num_attention_heads"])
        w.add_rope_scaling_orig_ctx_len(cfg["original_max_position_embeddings"])
        scale = cfg["max_position_embeddings"] / cfg["original_max_position_embeddings"]
        w.add_rope_scaling_attn_factors(math.sqrt(1 + math.log(scale) / math.log(cfg["original_max_position_embeddings"])))
        w.add_tensor("rope_factors_long.weight", np.array(cfg["rope_scaling"]["long_factor"], dtype=np.float32))
        w.add_tensor("rope_factors_short.weight", np.array(cfg["rope_scaling"]["short_factor"], dtype=np.float32))
    if arch == "minicpm":
        w.add_embedding_scale(float(cfg["scale_emb"]))
        w.add_residual_scale(cfg["scale_depth"] / cfg["num_hidden_layers"] ** 0.5)
        w.add_logit_scale(cfg["hidden_size"] / cfg["dim_model_base"])
    if arch == "qwen3moe":
        w.add_expert_count(cfg["num_experts"])
        w.add_expert_used_count(cfg["num_experts_per_tok"])
        w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
    w.add_eos_token_id(1)
    tensors = load_file(str(src / "model.safetensors"))
    for hf, t in sorted(tensors.items()):
        base, param = hf.rsplit(".", 1)
        if base in TOP:
            g = TOP[base]
        else:
            _, _, n, rest = base.split(".", 3)
            g = f"blk.{n}.{layer[rest]}"
        t = t.astype(np.float32)
        if arch in ("llama", "minicpm") and param == "weight" and g.endswith(("attn_q", "attn_k")):
            n_kv = cfg["num_key_value_heads"] if g.endswith("attn_k") else None
            t = permute(t, cfg["num_attention_heads"], n_kv)
        if arch == "gemma3" and base.endswith("norm"):
            t = t + np.float32(1)
        qt = quantize(g, t) if quantize else None
        if qt is not None:
            from gguf import quants
            qd = quants.quantize(np.ascontiguousarray(t), qt)
            w.add_tensor(f"{g}.{param}", qd, raw_shape=qd.shape, raw_dtype=qt)
        else:
            w.add_tensor(f"{g}.{param}", np.ascontiguousarray(t))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def convert_quantized(name, out):
    """name's GGUF with every matrix Q8_0 and the expert stacks Q4_0, and an
    MLX directory of mx.load's arrays of that file."""
    import mlx.core as mx
    from gguf import quants
    src = MODELS / name
    cfg = json.loads((src / "config.json").read_text())
    gg = OUT / f"{out}.gguf"
    convert(name, gg, lambda g, t: (gguf.GGMLQuantizationType.Q4_0 if g.endswith("_exps")
                                    else gguf.GGMLQuantizationType.Q8_0) if t.ndim >= 2 else None)
    back = {v: k for k, v in MOE_LAYER.items()}
    top = {v: k for k, v in TOP.items()}
    arrays, overrides = {}, {}
    for k, v in mx.load(str(gg)).items():
        base, param = k.rsplit(".", 1)
        if base in top:
            m = top[base]
        else:
            _, n, kind = base.split(".", 2)
            m = f"model.layers.{n}.{back[kind]}"
            if kind.endswith("_exps"):
                overrides[m] = {"group_size": 32, "bits": 4}
        arrays[f"{m}.{param}"] = v
    d = OUT / out
    d.mkdir(parents=True, exist_ok=True)
    mx.save_safetensors(str(d / "model.safetensors"), arrays)
    cfg["quantization"] = dict({"group_size": 32, "bits": 8}, **overrides)
    (d / "config.json").write_text(json.dumps(cfg, indent=1))


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    for name in ["llama-f32", "llama_tied-f32", "qwen2-f32", "qwen3-f32", "gemma3_text-f32", "phi3-f32", "qwen3_moe-f32", "minicpm-f32"]:
        convert(name)
    convert_quantized("qwen3_moe-f32", "qwen3_moe-q8_0")


if __name__ == "__main__":
    main()
