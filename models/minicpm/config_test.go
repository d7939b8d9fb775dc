package minicpm

import "testing"

const tiny = `{"model_type":"minicpm","hidden_size":64,"num_hidden_layers":3,"intermediate_size":128,
"num_attention_heads":4,"num_key_value_heads":2,"rms_norm_eps":1e-5,"vocab_size":512,
"scale_emb":12,"scale_depth":1.4,"dim_model_base":24`

func TestParse(t *testing.T) {
	if _, err := parse([]byte(tiny + `}`)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, config string }{
		{"tied", tiny + `,"tie_word_embeddings":true}`},
		{"no scale_depth", `{"hidden_size":64,"num_hidden_layers":1,"intermediate_size":8,"num_attention_heads":4,"vocab_size":8,
			"num_key_value_heads":2,"rms_norm_eps":1e-5,"scale_emb":1,"dim_model_base":1}`},
		{"zero dim_model_base", tiny + `,"dim_model_base":0}`},
		{"no heads", `{"hidden_size":64,"num_attention_heads":0}`},
		{"kv heads not dividing", tiny + `,"num_key_value_heads":3}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := parse([]byte(tc.config)); err == nil {
				t.Fatalf("parse accepted %s", tc.config)
			}
		})
	}
}

// FuzzParse: what parse accepts has a positive head dimension.
func FuzzParse(f *testing.F) {
	f.Add([]byte(tiny + `}`))
	f.Add([]byte(tiny + `,"rope_scaling":{"type":"linear","factor":0}}`))
	f.Add([]byte(`{"hidden_size":3,"num_attention_heads":4}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := parse(data)
		if err != nil {
			return
		}
		if c.HiddenSize/c.NumAttentionHeads <= 0 || *c.DimModelBase == 0 {
			t.Fatalf("accepted %s", data)
		}
	})
}
