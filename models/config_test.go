package models

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const tinyLlama = `{"model_type":"llama","hidden_size":64,"num_hidden_layers":2,"intermediate_size":128,
"num_attention_heads":4,"vocab_size":512,"rms_norm_eps":1e-5`

func TestParseConfig(t *testing.T) {
	for _, tc := range []struct {
		name, json string
		check      func(*Config) error
		wantErr    string
	}{
		{name: "eos int", json: tinyLlama + `,"eos_token_id":2}`, check: func(c *Config) error {
			if !reflect.DeepEqual([]int(c.EOSTokenID), []int{2}) {
				return errors.New("eos int not decoded")
			}
			return nil
		}},
		{name: "eos list", json: tinyLlama + `,"eos_token_id":[1,7,9]}`, check: func(c *Config) error {
			if !reflect.DeepEqual([]int(c.EOSTokenID), []int{1, 7, 9}) {
				return errors.New("eos list not decoded")
			}
			return nil
		}},
		{name: "mxfp4 experts", json: tinyLlama + `,"quantization":{"group_size":64,"bits":8,"mode":"affine",
			"model.layers.0.mlp.experts.up_proj":{"group_size":32,"bits":4,"mode":"mxfp4"}}}`, check: func(c *Config) error {
			if e := c.Quantization.Modules["model.layers.0.mlp.experts.up_proj"]; e == nil || e.Mode != "mxfp4" || e.Bits != 4 || e.GroupSize != 32 {
				return errors.New("mxfp4 override not decoded")
			}
			return nil
		}},
		{name: "quantization overrides", json: tinyLlama + `,"quantization":{"group_size":64,"bits":4,"mode":"affine",
			"model.embed_tokens":{"group_size":32,"bits":8},"lm_head":false}}`, check: func(c *Config) error {
			q := c.Quantization
			if q.GroupSize != 64 || q.Bits != 4 || q.Mode != "affine" {
				return errors.New("default scheme not decoded")
			}
			if e := q.Modules["model.embed_tokens"]; e == nil || e.Bits != 8 || e.GroupSize != 32 || e.Mode != "affine" {
				return errors.New("override not decoded")
			}
			if m, ok := q.Modules["lm_head"]; !ok || m != nil {
				return errors.New("false override not decoded as unquantized")
			}
			return nil
		}},
		{name: "rope scaling", json: tinyLlama + `,"rope_scaling":{"rope_type":"llama3","factor":32.0}}`, check: func(c *Config) error {
			if c.RopeScaling.Type() != "llama3" {
				return errors.New("rope type " + c.RopeScaling.Type())
			}
			if f, err := c.RopeScaling.Float("factor", 0); err != nil || f != 32 {
				return errors.New("factor not read")
			}
			return nil
		}},
		{name: "not json", json: `{"model_type":`, wantErr: "cannot parse config.json"},
		{name: "no model type", json: `{"hidden_size":64}`, wantErr: "model_type is missing"},
		{name: "zero hidden", json: `{"model_type":"llama","hidden_size":0}`, wantErr: "hidden_size = 0"},
		{name: "huge vocab", json: strings.Replace(tinyLlama, `"vocab_size":512`, `"vocab_size":999999999`, 1) + `}`, wantErr: "vocab_size"},
		{name: "bad bits", json: tinyLlama + `,"quantization":{"group_size":64,"bits":7}}`, wantErr: "bits 7"},
		{name: "bad mode", json: tinyLlama + `,"quantization":{"group_size":32,"bits":4,"mode":"nvfp4"}}`, wantErr: "not supported"},
		{name: "mxfp4 group 64", json: tinyLlama + `,"quantization":{"group_size":64,"bits":4,"mode":"mxfp4"}}`,
			wantErr: "mxfp4 needs bits 4 and group size 32"},
		{name: "mxfp8 by name", json: tinyLlama + `,"quantization":{"group_size":32,"bits":8,"mode":"mxfp8"}}`,
			wantErr: `mode "mxfp8" is not supported (affine, mxfp4)`},
		{name: "bad eos", json: tinyLlama + `,"eos_token_id":"x"}`, wantErr: "eos_token_id"},
		{name: "negative eps", json: strings.Replace(tinyLlama, `1e-5`, `-1`, 1) + `}`, wantErr: "rms_norm_eps"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseConfig([]byte(tc.json))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.check(c); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestLoadErrors covers what a user can get wrong before any weight is
// read: these need no native library.
// TestParseConfigTextConfig: a multimodal wrapper's sizes come from its
// text_config; its own model_type, quantization and eos_token_id win.
func TestParseConfigTextConfig(t *testing.T) {
	c, err := ParseConfig([]byte(`{"model_type":"mistral3","eos_token_id":2,"quantization":{"group_size":64,"bits":4},
"text_config":` + strings.Replace(tinyLlama, `"llama"`, `"ministral3"`, 1) + `,"quantization":{"group_size":32,"bits":8}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.ModelType != "mistral3" || c.HiddenSize != 64 || c.VocabSize != 512 || c.NumHiddenLayers != 2 ||
		c.Quantization == nil || c.Quantization.GroupSize != 64 || len(c.EOSTokenID) != 1 || c.EOSTokenID[0] != 2 {
		t.Fatalf("parsed %+v", c)
	}
	// gemma3.py's defaults: the top level's vocab_size (262208 when absent),
	// 8 attention heads, 4 KV heads.
	c, err = ParseConfig([]byte(`{"model_type":"gemma3","text_config":{"model_type":"gemma3_text","hidden_size":64,
"num_hidden_layers":2,"intermediate_size":128,"vocab_size":7}}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.VocabSize != 262208 || c.NumAttentionHeads != 8 || c.kvHeads() != 4 {
		t.Fatalf("gemma3 header %+v", c)
	}
	if _, err := ParseConfig([]byte(`{"model_type":"mistral3","text_config":{"hidden_size":"x"}}`)); err == nil {
		t.Fatal("accepted a text_config of the wrong type")
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		d := filepath.Join(dir, name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if body != "" {
			if err := os.WriteFile(filepath.Join(d, "config.json"), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	other := filepath.Join(dir, "weights.bin")
	os.WriteFile(other, []byte("x"), 0o644)
	badGGUF := filepath.Join(dir, "bad.gguf")
	os.WriteFile(badGGUF, []byte("GGUF\x03\x00"), 0o644)
	for _, tc := range []struct {
		name, path, want string
		is               error
	}{
		{"missing path", filepath.Join(dir, "nope"), "cannot open model", nil},
		{"no config", write("empty", ""), "cannot read model config", nil},
		{"unknown architecture", write("mamba", `{"model_type":"mamba","hidden_size":8,"num_hidden_layers":1,"intermediate_size":8,"num_attention_heads":1,"vocab_size":8}`),
			"supported model types are gemma3, gemma3_text, gemma4, gemma4_text, gpt_oss, llama, minicpm, ministral3, mistral3, phi3, qwen2, qwen3, qwen3_5, qwen3_5_moe, qwen3_moe, qwen3_next", ErrUnsupportedModel},
		{"no weights", write("noweights", tinyLlama+`}`), "cannot open model weights", nil},
		{"not a model file", other, "want a model directory", nil},
		{"truncated gguf", badGGUF, "cannot open GGUF model", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Load(tc.path, LoadOptions{})
			if err == nil {
				m.Close()
				t.Fatal("loaded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want it to contain %q", err, tc.want)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Fatalf("error %v is not %v", err, tc.is)
			}
		})
	}
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(tinyLlama + `}`))
	f.Add([]byte(tinyLlama + `,"eos_token_id":[1,2],"quantization":{"group_size":64,"bits":4,"lm_head":false,"x":{"bits":8,"group_size":32}}}`))
	f.Add([]byte(tinyLlama + `,"rope_scaling":{"type":"linear","factor":"x"},"head_dim":null}`))
	f.Add([]byte(`{"model_type":"gemma3_text","quantization":[]}`))
	f.Add([]byte(`{"model_type":"mistral3","text_config":` + tinyLlama + `},"quantization":{"group_size":64,"bits":4}}`))
	f.Add([]byte(`{"model_type":"mistral3","text_config":null}`))
	f.Add([]byte(`{"model_type":"gemma3","vocab_size":512,"text_config":{"hidden_size":64,"num_hidden_layers":2,"intermediate_size":8}}`))
	f.Add([]byte(`{"model_type":"gemma3","text_config":{"num_attention_heads":null}}`))
	f.Add([]byte(`{"model_type":"mistral3","text_config":[1],"hidden_size":8}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data)
		if err != nil {
			return
		}
		// What the loaders read next must not panic either.
		_ = c.RopeScaling.Type()
		_, _ = c.RopeScaling.Float("factor", 1)
		_ = c.Quantization.String()
		_ = c.kvHeads()
		if c.HiddenSize <= 0 || c.VocabSize <= 0 || c.NumHiddenLayers <= 0 {
			t.Fatalf("validated config with non-positive sizes: %+v", c)
		}
	})
}
