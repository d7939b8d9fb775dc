package models

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
)

func qwen3moeMeta() [][2]any {
	return [][2]any{
		{"general.architecture", "qwen3moe"},
		{"qwen3moe.context_length", uint32(40960)}, {"qwen3moe.embedding_length", uint32(2048)},
		{"qwen3moe.block_count", uint32(3)}, {"qwen3moe.feed_forward_length", uint32(6144)},
		{"qwen3moe.attention.head_count", uint32(32)}, {"qwen3moe.attention.head_count_kv", uint32(4)},
		{"qwen3moe.rope.freq_base", float32(1e6)}, {"qwen3moe.attention.layer_norm_rms_epsilon", float32(1e-6)},
		{"qwen3moe.attention.key_length", uint32(128)}, {"qwen3moe.attention.value_length", uint32(128)},
		{"qwen3moe.expert_count", uint32(128)}, {"qwen3moe.expert_used_count", uint32(8)},
		{"qwen3moe.expert_feed_forward_length", uint32(768)}, {"qwen3moe.vocab_size", uint32(151936)},
	}
}

func phi3Meta() [][2]any {
	return [][2]any{
		{"general.architecture", "phi3"},
		{"phi3.context_length", uint32(131072)}, {"phi3.embedding_length", uint32(3072)},
		{"phi3.block_count", uint32(32)}, {"phi3.feed_forward_length", uint32(8192)},
		{"phi3.attention.head_count", uint32(32)}, {"phi3.attention.head_count_kv", uint32(32)},
		{"phi3.rope.freq_base", float32(10000)}, {"phi3.attention.layer_norm_rms_epsilon", float32(1e-5)},
		{"phi3.rope.dimension_count", uint32(96)}, {"phi3.rope.scaling.original_context_length", uint32(4096)},
		{"phi3.vocab_size", uint32(32064)},
	}
}

func minicpmMeta() [][2]any {
	return [][2]any{
		{"general.architecture", "minicpm"},
		{"minicpm.context_length", uint32(4096)}, {"minicpm.embedding_length", uint32(2304)},
		{"minicpm.block_count", uint32(40)}, {"minicpm.feed_forward_length", uint32(5760)},
		{"minicpm.attention.head_count", uint32(36)}, {"minicpm.attention.head_count_kv", uint32(36)},
		{"minicpm.rope.freq_base", float32(10000)}, {"minicpm.attention.layer_norm_rms_epsilon", float32(1e-5)},
		{"minicpm.embedding_scale", float32(12)}, {"minicpm.residual_scale", float32(1.4 / math.Sqrt(40))},
		{"minicpm.logit_scale", float32(2304.0 / 256)}, {"minicpm.vocab_size", uint32(122753)},
	}
}

// TestGGUFArchConfig checks the config.json keys the architectures'
// packages add for phi3, qwen3moe and minicpm, and their refusals.
func TestGGUFArchConfig(t *testing.T) {
	// qwen3moe: blocks 0 and 2 have a router, block 1 is dense.
	moeTensors := []string{"blk.0.ffn_gate_inp.weight", "blk.2.ffn_gate_inp.weight", "output.weight"}
	for _, tc := range []struct {
		name    string
		meta    [][2]any
		tensors []string
		want    map[string]any
		wantErr string
	}{
		{name: "qwen3moe", meta: qwen3moeMeta(), tensors: moeTensors, want: map[string]any{
			"model_type": "qwen3_moe", "head_dim": 128.0, "num_experts": 128.0, "num_experts_per_tok": 8.0,
			"moe_intermediate_size": 768.0, "decoder_sparse_step": 1.0, "norm_topk_prob": true,
			"mlp_only_layers": []any{1.0}, "intermediate_size": 6144.0}},
		{name: "qwen3moe without experts", meta: set(qwen3moeMeta(), "qwen3moe.expert_count", nil), tensors: moeTensors,
			wantErr: "qwen3moe.expert_count is missing"},
		{name: "phi3", meta: phi3Meta(), tensors: []string{"output.weight"}, want: map[string]any{
			"model_type": "phi3", "original_max_position_embeddings": 4096.0}},
		{name: "phi3 partial", meta: set(phi3Meta(), "phi3.rope.dimension_count", uint32(48)), tensors: []string{"output.weight"},
			want: map[string]any{"partial_rotary_factor": 0.5}},
		{name: "phi3 too many rope dims", meta: set(phi3Meta(), "phi3.rope.dimension_count", uint32(200)),
			wantErr: "GGUF rope dims 200 for head dim 96"},
		{name: "phi3 one factor tensor", meta: phi3Meta(), tensors: []string{"rope_factors_long.weight"},
			wantErr: "one of rope_factors_long and rope_factors_short"},
		{name: "minicpm", meta: minicpmMeta(), want: map[string]any{
			"model_type": "minicpm", "scale_emb": 12.0, "tie_word_embeddings": false}},
		{name: "minicpm without logit_scale", meta: set(minicpmMeta(), "minicpm.logit_scale", nil),
			wantErr: "minicpm.logit_scale is missing or not positive"},
		{name: "minicpm rope factors", meta: minicpmMeta(), tensors: []string{"rope_factors_long.weight"},
			wantErr: "rope_factors_long.weight (MiniCPM rope scaling) is not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, data, err := ggufConfigJSON(parseGGUF(t, ggufFile(tc.meta, tc.tensors...)))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal(data, &got); err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.want {
				if !reflect.DeepEqual(got[k], v) {
					t.Errorf("%s = %#v, want %#v", k, got[k], v)
				}
			}
		})
	}
	// minicpm's scales come back as the float32 the file holds.
	_, data, err := ggufConfigJSON(parseGGUF(t, ggufFile(minicpmMeta())))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		ScaleDepth   float64 `json:"scale_depth"`
		DimModelBase float64 `json:"dim_model_base"`
	}
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	if got, want := float32(c.ScaleDepth/math.Sqrt(40)), float32(1.4/math.Sqrt(40)); got != want {
		t.Errorf("residual scale %v, want %v", got, want)
	}
	if got, want := float32(2304/c.DimModelBase), float32(9); got != want {
		t.Errorf("logit scale %v, want %v", got, want)
	}
}
