package lora

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseConfig(t *testing.T) {
	for _, tc := range []struct {
		name, json string
		want       Config
		err        string
	}{
		{"mlx_lm.lora's file", `{"fine_tune_type":"lora","num_layers":16,"lora_parameters":{"rank":8,"scale":20.0,"dropout":0.0},"model":"x","batch_size":4}`,
			Config{FineTuneType: "lora", NumLayers: 16, Rank: 8, Scale: 20}, ""},
		{"no fine_tune_type is lora", `{"num_layers":-1,"lora_parameters":{"rank":4,"scale":2,"dropout":0.1,"keys":["self_attn.q_proj","lm_head"]}}`,
			Config{FineTuneType: "lora", NumLayers: -1, Rank: 4, Scale: 2, Dropout: 0.1, Keys: []string{"self_attn.q_proj", "lm_head"}}, ""},
		{"dora", `{"fine_tune_type":"dora","num_layers":2,"lora_parameters":{"rank":4,"scale":4}}`,
			Config{FineTuneType: "dora", NumLayers: 2, Rank: 4, Scale: 4}, ""},
		{"empty keys adapt nothing", `{"num_layers":2,"lora_parameters":{"rank":4,"scale":4,"keys":[]}}`,
			Config{FineTuneType: "lora", NumLayers: 2, Rank: 4, Scale: 4, Keys: []string{}}, ""},
		{"full fine-tune", `{"fine_tune_type":"full","num_layers":2}`, Config{}, "not an adapter"},
		{"unknown type", `{"fine_tune_type":"ia3","num_layers":2,"lora_parameters":{"rank":4,"scale":4}}`, Config{}, `fine_tune_type "ia3"`},
		{"no num_layers", `{"lora_parameters":{"rank":4,"scale":4}}`, Config{}, "no num_layers"},
		{"no lora_parameters", `{"num_layers":2}`, Config{}, "no lora_parameters"},
		{"alpha for scale", `{"num_layers":2,"lora_parameters":{"rank":4,"alpha":16}}`, Config{}, "uses scale, not alpha"},
		{"no rank", `{"num_layers":2,"lora_parameters":{"scale":4}}`, Config{}, "no rank"},
		{"fractional rank", `{"num_layers":2,"lora_parameters":{"rank":2.5,"scale":4}}`, Config{}, "rank 2.5"},
		{"scale a string", `{"num_layers":2,"lora_parameters":{"rank":2,"scale":"big"}}`, Config{}, "scale is not a number"},
		{"dropout 1", `{"num_layers":2,"lora_parameters":{"rank":2,"scale":1,"dropout":1}}`, Config{}, "dropout 1"},
		{"keys not strings", `{"num_layers":2,"lora_parameters":{"rank":2,"scale":1,"keys":[1]}}`, Config{}, "keys is not a list"},
		{"not json", `{"num_layers":`, Config{}, "cannot parse"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseConfig([]byte(tc.json))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// TestAdapts is linear_to_lora_layers's module choice: the last num_layers
// layers (all for 0, a negative number or more than the model has), keys
// relative to a layer or from the top, every module of a layer without keys.
func TestAdapts(t *testing.T) {
	keys := []string{"self_attn.q_proj", "mlp.down_proj", "lm_head"}
	for _, tc := range []struct {
		cfg    Config
		layers int
		path   string
		want   bool
	}{
		{Config{NumLayers: 1}, 2, "model.layers.1.self_attn.k_proj", true},
		{Config{NumLayers: 1}, 2, "model.layers.0.self_attn.k_proj", false},
		{Config{NumLayers: 1}, 2, "lm_head", false},
		{Config{NumLayers: 0}, 2, "model.layers.0.mlp.up_proj", true},
		{Config{NumLayers: -1}, 2, "model.layers.0.mlp.up_proj", true},
		{Config{NumLayers: 16}, 2, "model.layers.0.mlp.up_proj", true},
		{Config{NumLayers: -1, Keys: keys}, 2, "model.layers.0.self_attn.q_proj", true},
		{Config{NumLayers: -1, Keys: keys}, 2, "model.layers.0.self_attn.v_proj", false},
		{Config{NumLayers: 1, Keys: keys}, 2, "lm_head", true},
		{Config{NumLayers: 1, Keys: keys}, 2, "model.layers.0.mlp.down_proj", false},
		{Config{NumLayers: 2, Keys: keys}, 4, "language_model.model.layers.3.mlp.down_proj", true},
		{Config{NumLayers: 2, Keys: []string{}}, 2, "model.layers.1.mlp.down_proj", false},
		{Config{NumLayers: 2}, 2, "model.embed_tokens", false},
	} {
		if got := tc.cfg.Adapts(tc.path, tc.layers); got != tc.want {
			t.Errorf("%+v over %d layers adapts %s: %v, want %v", tc.cfg, tc.layers, tc.path, got, tc.want)
		}
	}
}

// TestOpenRefuses: a directory that is not an adapter, and weights that
// are not adapter parameters of the config's rank, are refused by name.
func TestOpenRefuses(t *testing.T) {
	cfg := `{"num_layers":2,"lora_parameters":{"rank":4,"scale":2}}`
	header := func(h string) []byte {
		b := []byte(h)
		n := len(b)
		out := []byte{byte(n), byte(n >> 8), byte(n >> 16), byte(n >> 24), 0, 0, 0, 0}
		return append(out, b...)
	}
	for _, tc := range []struct {
		name, config string
		weights      []byte
		err          string
	}{
		{"no config", "", nil, "has no adapter_config.json"},
		{"no weights", cfg, nil, "adapters.safetensors"},
		{"not a parameter", cfg, append(header(`{"model.layers.0.self_attn.q_proj.weight":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`), 0, 0, 0, 0), "is not an adapter parameter"},
		{"wrong rank", cfg, append(header(`{"model.layers.0.self_attn.q_proj.lora_a":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]}}`), make([]byte, 8)...), "does not fit rank 4"},
		{"switch layer", cfg, append(header(`{"model.layers.0.mlp.switch_mlp.gate_proj.lora_a":{"dtype":"F32","shape":[2,4,1],"data_offsets":[0,32]}}`), make([]byte, 32)...), "LoRASwitchLinear"},
		{"m without dora", cfg, append(header(`{"model.layers.0.self_attn.q_proj.m":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`), 0, 0, 0, 0), "DoRA magnitude"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.config != "" {
				os.WriteFile(filepath.Join(dir, ConfigFile), []byte(tc.config), 0o644)
			}
			if tc.weights != nil {
				os.WriteFile(filepath.Join(dir, WeightsFile), tc.weights, 0o644)
			}
			_, err := Open("x", dir)
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.HasPrefix(err.Error(), "cannot open adapter x: ") {
				t.Fatalf("error %v, want one with %q", err, tc.err)
			}
		})
	}
}

// FuzzParseConfig: any bytes give a config or an error, never a panic; a
// config parsed is one Adapts can use.
func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{
		`{"fine_tune_type":"lora","num_layers":16,"lora_parameters":{"rank":8,"scale":20.0,"dropout":0.0}}`,
		`{"fine_tune_type":"dora","num_layers":-1,"lora_parameters":{"rank":4,"scale":2,"keys":["self_attn.q_proj","lm_head"]}}`,
		`{"num_layers":2,"lora_parameters":{"rank":4,"alpha":16}}`,
		`{"num_layers":1e400,"lora_parameters":{"rank":1e400,"scale":-0}}`,
		`null`, `[]`, `{"lora_parameters":null,"num_layers":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data)
		if err != nil {
			return
		}
		if c.Rank < 1 || (c.FineTuneType != "lora" && c.FineTuneType != "dora") || c.Dropout < 0 || c.Dropout >= 1 {
			t.Fatalf("ParseConfig accepted %q as %+v", data, c)
		}
		c.Adapts("model.layers.3.self_attn.q_proj", 4)
	})
}
