package gpt_oss

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/models/nn"
)

// TestParseDefaults: ModelArgs' defaults (gpt-oss-20b's sizes but 36 layers),
// layers alternating sliding and full from the first.
func TestParseDefaults(t *testing.T) {
	s, err := parse([]byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if s.layers != 36 || s.experts != 128 || s.topK != 4 || s.window != 128 || s.swaIdx != 0 || s.gaIdx != 1 || len(s.types) != 36 {
		t.Fatalf("defaults: %+v", s)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ name, config string }{
		{"odd layers without layer_types", `{"num_hidden_layers":3}`},
		{"only full layers", `{"num_hidden_layers":2,"layer_types":["full_attention","full_attention"]}`},
		{"top k above experts", `{"num_local_experts":4,"num_experts_per_tok":5}`},
		{"negative layers", `{"num_hidden_layers":-4}`},
		{"huge head dim", `{"head_dim":1073741824}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := parse([]byte(tc.config)); err == nil {
				t.Fatalf("parse(%s) accepted it", tc.config)
			}
		})
	}
}

// FuzzParse: what parse accepts has a layer kind per layer and both kinds.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"num_hidden_layers":4,"layer_types":["sliding_attention","full_attention","x","full_attention"]}`))
	f.Add([]byte(`{"num_hidden_layers":-2,"num_local_experts":0}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := parse(data)
		if err != nil {
			return
		}
		if len(s.types) != s.layers || s.types[s.swaIdx] != "sliding_attention" || s.types[s.gaIdx] != "full_attention" {
			t.Fatalf("inconsistent spec: %+v", s)
		}
	})
}

// TestHuggingFaceLayoutRefused: the unconverted checkpoint (interleaved
// experts.gate_up_proj, mxfp4 _blocks) is refused by name, before any
// weight is read, with the way out.
func TestHuggingFaceLayoutRefused(t *testing.T) {
	mlxtest.Do(t, func() error {
		for _, name := range []string{"model.layers.0.mlp.experts.gate_up_proj", "model.layers.0.mlp.experts.gate_up_proj_blocks"} {
			w := nn.NewWeights(map[string]nn.Tensor{name: {Shape: []int{8, 128, 64}, Dtype: "bfloat16"}}, nil)
			_, err := New([]byte(`{"num_hidden_layers":2,"hidden_size":64,"num_local_experts":8}`), w)
			if err == nil || !strings.Contains(err.Error(), "mlx_lm.convert") {
				return fmt.Errorf("%s: error %v, want the Hugging Face layout refused", name, err)
			}
		}
		return nil
	})
}
