package llama

import (
	"fmt"

	"github.com/mlxgo/mlxgo/models/nn"
)

// GGUF reads llama.cpp's "llama" files: llama's names, q/k rows permuted
// for ggml's rope (convert_hf_to_gguf.py LlamaModel.permute), head dim
// hidden/heads, rope_theta 10000 when freq_base is absent.
var GGUF = nn.GGUF{ModelType: "llama", Layer: nn.GGUFLlamaLayer, Config: ggufConfig, PermutedQK: true}

func ggufConfig(m nn.GGUFMeta, h nn.GGUFHeader) (map[string]any, error) {
	hd, err := h.DividedHeadDim()
	if err != nil {
		return nil, err
	}
	if err := m.FullRope(hd); err != nil {
		return nil, err
	}
	if _, ok := m.File.Tensor("rope_freqs.weight"); ok {
		return nil, fmt.Errorf("GGUF rope_freqs (Llama 3.1 rope scaling) is not supported; use the safetensors model")
	}
	out := map[string]any{}
	if !h.HasRopeTheta {
		out["rope_theta"] = 10000.0
	}
	return out, nil
}
