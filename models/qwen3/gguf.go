package qwen3

import (
	"fmt"

	"github.com/mlxgo/mlxgo/models/nn"
)

// GGUF reads llama.cpp's "qwen3" files: llama's names plus the q/k norms,
// an explicit head dim (key_length), q/k rows unpermuted.
var GGUF = nn.GGUF{ModelType: "qwen3", Layer: GGUFLayer, Config: GGUFConfig}

// GGUFLayer is qwen3's block names, which qwen3_moe extends.
var GGUFLayer = nn.GGUFLayerWith(map[string]string{
	"attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm"})

// GGUFConfig is head_dim from key_length; qwen3.py requires
// max_position_embeddings and rope_theta (so do qwen3_moe's files).
func GGUFConfig(m nn.GGUFMeta, h nn.GGUFHeader) (map[string]any, error) {
	hd, err := m.HeadDim(h)
	if err != nil {
		return nil, err
	}
	if !h.HasContextLength {
		return nil, fmt.Errorf("GGUF metadata %s.context_length is missing", m.Arch)
	}
	if !h.HasRopeTheta {
		return nil, fmt.Errorf("GGUF metadata %s.rope.freq_base is missing", m.Arch)
	}
	return map[string]any{"head_dim": hd}, m.FullRope(hd)
}
