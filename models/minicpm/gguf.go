package minicpm

import (
	"fmt"
	"math"

	"github.com/mlxgo/mlxgo/models/nn"
)

// GGUF reads llama.cpp's "minicpm" files (MiniCPMModel): llama's names,
// q/k rows permuted as LlamaModel permutes them, and the muP scales as
// embedding_scale (scale_emb), residual_scale (scale_depth / sqrt(layers))
// and logit_scale (hidden / dim_model_base).
var GGUF = nn.GGUF{ModelType: "minicpm", Layer: nn.GGUFLlamaLayer, Config: ggufConfig, PermutedQK: true}

// ggufConfig inverts the converter's two quotients in float64: New divides
// them back and rounds to float32, which gives the stored float32 again
// (the stored value is the float32 of the same quotient). Without output
// the head is the embedding table, as minicpm.py's sanitize copies it, so
// tie_word_embeddings stays false (minicpm.py refuses true).
func ggufConfig(m nn.GGUFMeta, h nn.GGUFHeader) (map[string]any, error) {
	hd, err := h.DividedHeadDim()
	if err != nil {
		return nil, err
	}
	if err := m.FullRope(hd); err != nil {
		return nil, err
	}
	for _, t := range []string{"rope_freqs.weight", "rope_factors_long.weight", "rope_factors_short.weight"} {
		if _, ok := m.File.Tensor(t); ok {
			return nil, fmt.Errorf("GGUF %s (MiniCPM rope scaling) is not supported", t)
		}
	}
	scales := map[string]float64{}
	for _, k := range []string{"embedding_scale", "residual_scale", "logit_scale"} {
		v, ok := m.File.Float(m.Arch + "." + k)
		if !ok || !(v > 0) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("GGUF metadata %s.%s is missing or not positive", m.Arch, k)
		}
		scales[k] = v
	}
	out := map[string]any{
		"scale_emb":           scales["embedding_scale"],
		"scale_depth":         scales["residual_scale"] * math.Sqrt(float64(h.NumHiddenLayers)),
		"dim_model_base":      float64(h.HiddenSize) / scales["logit_scale"],
		"tie_word_embeddings": false,
	}
	if !h.HasRopeTheta {
		out["rope_theta"] = 10000.0
	}
	return out, nil
}
