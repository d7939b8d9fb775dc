package phi3

import (
	"fmt"

	"github.com/mlxgo/mlxgo/models/nn"
)

// GGUF reads llama.cpp's "phi3" files (Phi3MiniModel): the fused
// projections stay fused (attn_qkv is qkv_proj, ffn_up is gate_up_proj),
// q/k rows unpermuted, and longrope's factors stored as the tensors
// rope_factors_long/short, which become rope_scaling again.
var GGUF = nn.GGUF{ModelType: "phi3", Layer: map[string]string{
	"attn_norm":   "input_layernorm",
	"ffn_norm":    "post_attention_layernorm",
	"attn_qkv":    "self_attn.qkv_proj",
	"attn_output": "self_attn.o_proj",
	"ffn_up":      "mlp.gate_up_proj",
	"ffn_down":    "mlp.down_proj",
}, Config: ggufConfig, MetaTensors: []string{"rope_factors_long.weight", "rope_factors_short.weight"}}

// ggufConfig: rope.dimension_count is head_dim·partial_rotary_factor
// (refused unless phi3.py's int(head_dim·factor) gives it back), and
// rope.scaling.original_context_length original_max_position_embeddings.
func ggufConfig(m nn.GGUFMeta, h nn.GGUFHeader) (map[string]any, error) {
	hd, err := h.DividedHeadDim()
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	if rd, ok := m.File.Int(m.Arch + ".rope.dimension_count"); ok && int(rd) != hd {
		p := float64(rd) / float64(hd)
		if rd <= 0 || int(rd) > hd || int(float64(hd)*p) != int(rd) {
			return nil, fmt.Errorf("GGUF rope dims %d for head dim %d", rd, hd)
		}
		out["partial_rotary_factor"] = p
	}
	if orig, err := m.Num("rope.scaling.original_context_length"); err == nil {
		out["original_max_position_embeddings"] = orig
	}
	_, hasLong := m.File.Tensor("rope_factors_long.weight")
	_, hasShort := m.File.Tensor("rope_factors_short.weight")
	if hasLong != hasShort {
		return nil, fmt.Errorf("GGUF has one of rope_factors_long and rope_factors_short, want both")
	}
	if hasLong {
		long, err := ropeFactors(m, "rope_factors_long.weight", hd)
		if err != nil {
			return nil, err
		}
		short, err := ropeFactors(m, "rope_factors_short.weight", hd)
		if err != nil {
			return nil, err
		}
		out["rope_scaling"] = map[string]any{"type": "longrope", "long_factor": long, "short_factor": short}
	}
	return out, nil
}

func ropeFactors(m nn.GGUFMeta, name string, headDim int) ([]float64, error) {
	t, err := m.File.Load(name)
	if err != nil {
		return nil, err
	}
	v, err := t.Float32s()
	if err != nil {
		return nil, fmt.Errorf("GGUF %s: %w", name, err)
	}
	if len(v) == 0 || len(v) > headDim {
		return nil, fmt.Errorf("GGUF %s has %d factors for head dim %d", name, len(v), headDim)
	}
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out, nil
}
