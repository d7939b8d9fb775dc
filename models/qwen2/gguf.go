package qwen2

import "github.com/mlxgo/mlxgo/models/nn"

// GGUF reads llama.cpp's "qwen2" files: llama's names (the q/k/v biases are
// attn_q.bias …), head dim hidden/heads; the converter leaves the q/k rows
// unpermuted.
var GGUF = nn.GGUF{ModelType: "qwen2", Layer: nn.GGUFLlamaLayer, Config: ggufConfig}

func ggufConfig(m nn.GGUFMeta, h nn.GGUFHeader) (map[string]any, error) {
	hd, err := h.DividedHeadDim()
	if err != nil {
		return nil, err
	}
	return map[string]any{}, m.FullRope(hd)
}
