package bert

import (
	"strings"
	"testing"
)

const miniLM = `{"model_type":"bert","hidden_size":384,"num_hidden_layers":6,"num_attention_heads":12,
"intermediate_size":1536,"max_position_embeddings":512,"vocab_size":30522,"type_vocab_size":2,
"hidden_act":"gelu","layer_norm_eps":1e-12,"position_embedding_type":"absolute"}`

func TestParseConfig(t *testing.T) {
	c, err := ParseConfig([]byte(miniLM))
	if err != nil {
		t.Fatal(err)
	}
	if c.HiddenSize != 384 || c.NumHiddenLayers != 6 || c.NumAttentionHeads != 12 || c.LayerNormEps != 1e-12 {
		t.Errorf("parsed %+v", c)
	}
	edit := func(old, new string) string { return strings.Replace(miniLM, old, new, 1) }
	for _, tc := range []struct{ name, config, want string }{
		{"not json", `{`, "cannot parse config.json"},
		{"other model", edit(`"bert"`, `"roberta"`), `model_type "roberta" is not bert`},
		{"no layers", edit(`"num_hidden_layers":6`, `"num_hidden_layers":0`), "must be positive"},
		{"heads do not divide", edit(`"num_attention_heads":12`, `"num_attention_heads":7`), "not a multiple"},
		{"no vocab", edit(`"vocab_size":30522`, `"vocab_size":0`), "must be positive"},
		{"other activation", edit(`"hidden_act":"gelu"`, `"hidden_act":"gelu_new"`), `hidden_act "gelu_new" is not supported`},
		{"relative positions", edit(`"absolute"`, `"relative_key"`), `position_embedding_type "relative_key"`},
		{"negative eps", edit(`1e-12`, `-1`), "layer_norm_eps"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.config))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(miniLM))
	f.Add([]byte(`{"model_type":"bert"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data)
		if err == nil && (c.HiddenSize <= 0 || c.HiddenSize%c.NumAttentionHeads != 0) {
			t.Fatalf("accepted an unusable config %+v", c)
		}
	})
}
