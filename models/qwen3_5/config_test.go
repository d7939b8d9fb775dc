package qwen3_5

import (
	"encoding/json"
	"testing"
)

const tiny = `{"model_type":"qwen3_5","text_config":{"hidden_size":64,"intermediate_size":128,"num_attention_heads":4,
"num_key_value_heads":2,"num_hidden_layers":4,"rms_norm_eps":1e-05,"vocab_size":512,"max_position_embeddings":2048,
"model_type":"qwen3_5_text","head_dim":64,"linear_num_value_heads":4,"linear_num_key_heads":2,"linear_key_head_dim":32,
"linear_value_head_dim":16,"linear_conv_kernel_dim":4,"tie_word_embeddings":true,
"rope_parameters":{"rope_theta":10000000.0,"partial_rotary_factor":0.25,"mrope_section":[2,1,1],"rope_type":"default"}}}`

// TestParse: text_config is read with TextModelArgs' defaults and
// __post_init__ (rope_type renamed to type, theta and partial factor taken
// from rope_parameters, head_dim from hidden / heads), a config without
// text_config is its own text config, and TextConfig hands ParseConfig the
// sizes.
func TestParse(t *testing.T) {
	c, err := parse([]byte(tiny))
	if err != nil {
		t.Fatal(err)
	}
	s := c.shape()
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	if c.RopeTheta != 1e7 || s.RopeDims != 16 || c.RopeParameters.Type() != "default" || c.RopeParameters["type"] != "default" {
		t.Errorf("rope theta %v dims %d parameters %v", c.RopeTheta, s.RopeDims, c.RopeParameters)
	}
	if c.FullAttentionInterval != 4 || !s.Linear(2) || s.Linear(3) || c.NumExperts != 0 || !c.NormTopKProb {
		t.Errorf("defaults: interval %d experts %d norm_topk_prob %v", c.FullAttentionInterval, c.NumExperts, c.NormTopKProb)
	}
	bare, err := parse([]byte(`{"model_type":"qwen3_5","hidden_size":256,"num_attention_heads":8}`))
	if err != nil {
		t.Fatal(err)
	}
	if *bare.HeadDim != 32 || bare.RopeTheta != 100000 || bare.PartialRotaryFactor != 0.25 || bare.LinearKeyHeadDim != 192 {
		t.Errorf("defaults without text_config: head_dim %d theta %v factor %v", *bare.HeadDim, bare.RopeTheta, bare.PartialRotaryFactor)
	}
	text, err := TextConfig([]byte(tiny))
	if err != nil {
		t.Fatal(err)
	}
	var sizes map[string]any
	if err := json.Unmarshal(text, &sizes); err != nil || sizes["hidden_size"] != 64.0 || sizes["head_dim"] != 64.0 || sizes["num_hidden_layers"] != 4.0 {
		t.Errorf("TextConfig %s (%v)", text, err)
	}
	for _, bad := range []string{
		`{"text_config":[]}`,
		`{"text_config":null}`,
		`{"text_config":{"num_attention_heads":0}}`,
		`{"text_config":{"rope_parameters":{"rope_theta":"x"}}}`,
	} {
		if _, err := parse([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

// FuzzParse: what parse and Check accept, the layer layout can be read
// from, and TextConfig never panics.
func FuzzParse(f *testing.F) {
	f.Add([]byte(tiny))
	f.Add([]byte(`{"model_type":"qwen3_5","hidden_size":256,"num_attention_heads":8}`))
	f.Add([]byte(`{"text_config":{"rope_parameters":null,"full_attention_interval":0,"num_experts":3}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = TextConfig(data)
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
		}
	})
}
