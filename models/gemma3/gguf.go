package gemma3

import "github.com/mlxgo/mlxgo/models/nn"

// GGUF reads llama.cpp's "gemma3" files as gemma3_text. Gemma 3's sandwich
// norms: llama.cpp calls the norm before the MLP ffn_norm and the ones
// after attention and MLP post_*_norm. (The converter stores the norms as
// 1 + weight: New reads Weights.GGUF.)
//
// Float32: in float16 Gemma 3's residual stream is clipped to ±65504 at
// every layer (mlx-lm's clip_residual) and rounded to 11 bits; llama.cpp
// keeps it in float32. Measured on Gemma 3 270M against llama.cpp: mean
// |Δlogit| 0.50 in float16, 0.25 in float32 (README).
var GGUF = nn.GGUF{ModelType: "gemma3_text", Layer: nn.GGUFLayerWith(map[string]string{
	"ffn_norm":            "pre_feedforward_layernorm",
	"post_attention_norm": "post_attention_layernorm",
	"post_ffw_norm":       "post_feedforward_layernorm",
	"attn_q_norm":         "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm"}),
	Config: ggufConfig, Float32: true}

// ggufConfig follows what llama.cpp (src/llama-model.cpp) assumes for
// gemma3, since the GGUF keys do not carry it: every 6th layer global
// (unless attention.sliding_window_pattern says otherwise), local rope base
// 10000, and queries scaled by 1/sqrt(key_length), except the 62-layer 27B
// whose query_pre_attn_scalar is hidden/heads.
func ggufConfig(m nn.GGUFMeta, h nn.GGUFHeader) (map[string]any, error) {
	hd, err := m.HeadDim(h)
	if err != nil {
		return nil, err
	}
	if err := m.FullRope(hd); err != nil {
		return nil, err
	}
	window, err := m.Num("attention.sliding_window")
	if err != nil {
		return nil, err
	}
	pattern := 6
	if p, ok := m.File.Int(m.Arch + ".attention.sliding_window_pattern"); ok && p > 0 && p <= 4096 {
		pattern = int(p)
	}
	scalar := float64(hd)
	if h.NumHiddenLayers == 62 {
		scalar = float64(h.HiddenSize / h.NumAttentionHeads)
	}
	return map[string]any{"head_dim": hd, "sliding_window": window, "sliding_window_pattern": pattern,
		"rope_local_base_freq": 10000.0, "query_pre_attn_scalar": scalar}, nil
}
