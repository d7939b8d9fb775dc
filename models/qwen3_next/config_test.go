package qwen3_next

import "testing"

const tiny = `{"decoder_sparse_step":1,"full_attention_interval":2,"head_dim":64,"hidden_size":64,"intermediate_size":128,
"linear_conv_kernel_dim":4,"linear_key_head_dim":16,"linear_num_key_heads":2,"linear_num_value_heads":4,
"linear_value_head_dim":16,"max_position_embeddings":2048,"mlp_only_layers":[1],"model_type":"qwen3_next",
"moe_intermediate_size":64,"norm_topk_prob":true,"num_attention_heads":4,"num_experts":8,"num_experts_per_tok":2,
"num_hidden_layers":4,"num_key_value_heads":2,"partial_rotary_factor":0.25,"rms_norm_eps":1e-05,
"rope_theta":10000000.0,"shared_expert_intermediate_size":64,"tie_word_embeddings":false,"vocab_size":512}`

func TestShape(t *testing.T) {
	c, err := parse([]byte(tiny))
	if err != nil {
		t.Fatal(err)
	}
	s := c.shape()
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	if s.RopeDims != 16 {
		t.Errorf("rope dims %d, want int(64 * 0.25) = 16", s.RopeDims)
	}
	for i, want := range []bool{true, false, true, false} {
		if got := s.Linear(i); got != want {
			t.Errorf("layer %d linear %v, want %v (full_attention_interval 2)", i, got, want)
		}
	}
	// full_attention_interval's default is 4
	c, err = parse([]byte(`{"linear_num_value_heads":1,"linear_num_key_heads":1,"linear_key_head_dim":1,
"linear_value_head_dim":1,"linear_conv_kernel_dim":4,"num_experts":0,"num_experts_per_tok":0,"decoder_sparse_step":1,
"shared_expert_intermediate_size":0,"mlp_only_layers":[],"moe_intermediate_size":0,"num_key_value_heads":1,
"rope_theta":1,"partial_rotary_factor":1,"max_position_embeddings":1,"head_dim":1}`))
	if err != nil || c.FullAttentionInterval != 4 {
		t.Errorf("default full_attention_interval %d (%v), want 4", c.FullAttentionInterval, err)
	}
	for _, bad := range []string{
		`{"linear_num_value_heads":3}`, // required fields missing
		tiny[:len(tiny)-1] + `,"linear_num_value_heads":3}`,
		tiny[:len(tiny)-1] + `,"linear_conv_kernel_dim":1}`,
		tiny[:len(tiny)-1] + `,"full_attention_interval":0}`,
		tiny[:len(tiny)-1] + `,"num_experts_per_tok":9}`,
		tiny[:len(tiny)-1] + `,"decoder_sparse_step":0}`,
		tiny[:len(tiny)-1] + `,"partial_rotary_factor":2}`,
	} {
		c, err := parse([]byte(bad))
		if err == nil {
			s := c.shape()
			err = s.Check()
		}
		if err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

// FuzzParse: what parse and Check accept, the layer layout can be read
// from without a panic (no division by a zero interval or sparse step).
func FuzzParse(f *testing.F) {
	f.Add([]byte(tiny))
	f.Add([]byte(tiny[:len(tiny)-1] + `,"num_experts":0,"decoder_sparse_step":0}`))
	f.Add([]byte(tiny[:len(tiny)-1] + `,"full_attention_interval":-3,"partial_rotary_factor":1e300}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := parse(data)
		if err != nil {
			return
		}
		s := c.shape()
		if s.Check() != nil {
			return
		}
		for i := range min(c.NumHiddenLayers, 64) {
			_ = s.Linear(i)
			if s.Experts > 0 {
				_ = (i + 1) % *c.DecoderSparseStep
			}
		}
	})
}
