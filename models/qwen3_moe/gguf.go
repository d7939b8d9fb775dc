package qwen3_moe

import (
	"fmt"

	"github.com/mlxgo/mlxgo/models/nn"
	"github.com/mlxgo/mlxgo/models/qwen3"
)

// GGUF reads llama.cpp's "qwen3moe" files: qwen3's attention, the router
// ffn_gate_inp and the experts stacked as ffn_{gate,up,down}_exps
// [experts, out, in] (Qwen2MoeModel.modify_tensors), which is the layout
// mlx-lm's sanitize stacks switch_mlp into.
var GGUF = nn.GGUF{ModelType: "qwen3_moe", Layer: nn.GGUFLayerWith(map[string]string{
	"attn_q_norm":   "self_attn.q_norm",
	"attn_k_norm":   "self_attn.k_norm",
	"ffn_gate_inp":  "mlp.gate",
	"ffn_gate_exps": "mlp.switch_mlp.gate_proj",
	"ffn_up_exps":   "mlp.switch_mlp.up_proj",
	"ffn_down_exps": "mlp.switch_mlp.down_proj",
}), Config: ggufConfig}

// ggufConfig: expert_count, expert_used_count and
// expert_feed_forward_length are num_experts, num_experts_per_tok and
// moe_intermediate_size. The converter writes no key for the rest, and
// llama.cpp's qwen3moe graph assumes them: every layer sparse
// (decoder_sparse_step 1) and the top-k weights renormalized
// (norm_topk_prob). A block stored with dense ffn_gate/up/down and no
// router is read as one of mlp_only_layers (llama.cpp would not load it).
func ggufConfig(m nn.GGUFMeta, h nn.GGUFHeader) (map[string]any, error) {
	out, err := qwen3.GGUFConfig(m, h)
	if err != nil {
		return nil, err
	}
	experts, err := m.Num("expert_count")
	if err != nil {
		return nil, err
	}
	used, err := m.Num("expert_used_count")
	if err != nil {
		return nil, err
	}
	inter, err := m.Num("expert_feed_forward_length")
	if err != nil {
		return nil, err
	}
	dense := []int{}
	for i := range h.NumHiddenLayers {
		if _, ok := m.File.Tensor(fmt.Sprintf("blk.%d.ffn_gate_inp.weight", i)); !ok {
			dense = append(dense, i)
		}
	}
	out["num_experts"], out["num_experts_per_tok"], out["moe_intermediate_size"] = experts, used, inter
	out["decoder_sparse_step"], out["norm_topk_prob"], out["mlp_only_layers"] = 1, true, dense
	return out, nil
}
