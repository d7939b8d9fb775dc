package qwen3_moe

import "testing"

const tiny = `{"model_type":"qwen3_moe","hidden_size":64,"num_hidden_layers":3,"intermediate_size":128,
"num_attention_heads":4,"num_key_value_heads":2,"head_dim":64,"rms_norm_eps":1e-5,"vocab_size":512,
"max_position_embeddings":2048,"rope_theta":1e6,"tie_word_embeddings":false,"num_experts":8,
"num_experts_per_tok":2,"decoder_sparse_step":1,"mlp_only_layers":[1],"moe_intermediate_size":64,
"norm_topk_prob":true}`

func TestSparseLayers(t *testing.T) {
	c, err := parse([]byte(tiny))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, false, true} {
		if got := c.sparse(i); got != want {
			t.Errorf("layer %d sparse %v, want %v", i, got, want)
		}
	}
}

// FuzzParse: what parse accepts, the layer test can read without a panic
// (no division by a zero decoder_sparse_step).
func FuzzParse(f *testing.F) {
	f.Add([]byte(tiny))
	f.Add([]byte(`{"num_experts":0,"decoder_sparse_step":0,"mlp_only_layers":[],"num_hidden_layers":2}`))
	f.Add([]byte(`{"num_experts":4,"num_experts_per_tok":5,"decoder_sparse_step":1,"mlp_only_layers":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := parse(data)
		if err != nil {
			return
		}
		for i := range min(c.NumHiddenLayers, 64) {
			_ = c.sparse(i)
		}
	})
}
