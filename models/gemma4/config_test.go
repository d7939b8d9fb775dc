package gemma4

import (
	"slices"
	"testing"
)

// TestParseDefaults: ModelArgs' defaults (Gemma 4 E2B): 35 layers, every
// fifth full, the last 20 KV-shared, each reading the last of its kind
// before them (layer 13 sliding, 14 full).
func TestParseDefaults(t *testing.T) {
	s, err := parse([]byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if s.layers != 35 || s.first != 15 || s.softcap != 30 || s.perLayer != 256 || !s.tied || !s.doubleWide {
		t.Fatalf("defaults: %+v", s)
	}
	if s.types[4] != "full_attention" || s.types[5] != "sliding_attention" {
		t.Fatalf("layer types %v", s.types[:6])
	}
	for i, want := range map[int]int{3: 3, 15: 13, 19: 14, 34: 14, 30: 13} {
		if s.previous[i] != want {
			t.Errorf("previous_kvs[%d] = %d, want %d", i, s.previous[i], want)
		}
	}
	if hd, kvh := s.dims(4); hd != 512 || kvh != 1 {
		t.Errorf("full layer dims %d, %d; want 512, 1", hd, kvh)
	}
	if hd, _ := s.dims(0); hd != 256 {
		t.Errorf("sliding layer head dim %d, want 256", hd)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ name, config string }{
		{"shared layers with no earlier kind", `{"num_hidden_layers":4,"num_kv_shared_layers":1,"layer_types":["sliding_attention","sliding_attention","sliding_attention","full_attention"]}`},
		{"all shared", `{"num_hidden_layers":4,"num_kv_shared_layers":4}`},
		{"huge head dim", `{"global_head_dim":1073741824}`},
		{"unknown layer type", `{"num_hidden_layers":1,"num_kv_shared_layers":0,"layer_types":["chunked_attention"]}`},
		{"bad softcap", `{"final_logit_softcapping":-1}`},
		{"moe without experts", `{"enable_moe_block":true}`},
		{"heads not a multiple", `{"num_attention_heads":3,"num_key_value_heads":2}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := parse([]byte(tc.config)); err == nil {
				t.Fatalf("parse(%s) accepted it", tc.config)
			}
		})
	}
	s, err := parse([]byte(`{"final_logit_softcapping":null,"num_kv_shared_layers":0}`))
	if err != nil || s.softcap != 0 || s.first != 35 {
		t.Fatalf("null softcap, no sharing: %+v, %v", s, err)
	}
}

// FuzzParse: what parse accepts, New can lay out without a panic.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"num_hidden_layers":6,"sliding_window_pattern":3,"num_kv_shared_layers":2,"global_head_dim":0}`))
	f.Add([]byte(`{"enable_moe_block":true,"num_experts":8,"top_k_experts":2,"moe_intermediate_size":32,"attention_k_eq_v":true,"num_global_key_value_heads":4}`))
	f.Add([]byte(`{"rope_parameters":{"full_attention":{"rope_theta":"x"}},"layer_types":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := parse(data)
		if err != nil {
			return
		}
		if len(s.types) != s.layers || len(s.previous) != s.layers || s.first < 1 || s.first > s.layers {
			t.Fatalf("inconsistent spec: %+v", s)
		}
		for i := range s.layers {
			if p := s.previous[i]; p > i || p >= s.first || s.types[p] != s.types[i] {
				t.Fatalf("layer %d reads layer %d", i, p)
			}
			if hd, kvh := s.dims(i); hd <= 0 || kvh <= 0 || s.heads%kvh != 0 {
				t.Fatalf("layer %d dims %d, %d", i, hd, kvh)
			}
		}
		_ = slices.Index(s.types, "full_attention")
	})
}
