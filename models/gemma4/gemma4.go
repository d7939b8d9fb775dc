package gemma4

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mlxgo/mlxgo/models/nn"
)

// This file is mlx_lm/models/gemma4.py: a Gemma 4 checkpoint with its
// vision and audio towers (model_type gemma4), loaded as mlx-lm loads it,
// the language model alone.

// TextConfig is the language model's config.json: text_config as gemma4.py's
// ModelArgs.__post_init__ completes it (the top level's vocab_size, default
// 262144; 8 attention heads and 1 KV head unless text_config says otherwise).
func TextConfig(config []byte) ([]byte, error) {
	var c struct {
		TextConfig map[string]any `json:"text_config"`
		VocabSize  *int           `json:"vocab_size"`
	}
	if err := json.Unmarshal(config, &c); err != nil {
		return nil, fmt.Errorf("cannot parse config.json: %w", err)
	}
	if c.TextConfig == nil {
		c.TextConfig = map[string]any{}
	}
	vocab := 262144
	if c.VocabSize != nil {
		vocab = *c.VocabSize
	}
	c.TextConfig["vocab_size"] = vocab
	for k, def := range map[string]int{"num_attention_heads": 8, "num_key_value_heads": 1} {
		if _, ok := c.TextConfig[k]; !ok {
			c.TextConfig[k] = def
		}
	}
	return json.Marshal(c.TextConfig)
}

// towers are the prefixes gemma4.py's sanitize drops.
var towers = []string{"vision_tower", "multi_modal_projector", "audio_tower", "embed_audio", "embed_vision", "vision_embedder"}

// NewVLM builds the language model of a gemma4 checkpoint. sanitize strips
// a leading "model.", drops the towers, and puts the Hugging Face
// model.language_model.* tree where mlx-lm's saved language_model.model.*
// is; the language model's own names are those under language_model.
func NewVLM(config []byte, w *nn.Weights) (nn.Decoder, error) {
	text, err := TextConfig(config)
	if err != nil {
		return nil, err
	}
	rename := func(k string) string {
		inner, hf := strings.CutPrefix(k, "model.")
		if hf {
			if rest, ok := strings.CutPrefix(inner, "language_model."); ok {
				return "model." + rest
			}
			return inner
		}
		if rest, ok := strings.CutPrefix(k, "language_model."); ok {
			return rest
		}
		return k
	}
	w.Drop(func(k string) bool {
		k = strings.TrimPrefix(k, "model.")
		for _, t := range towers {
			if strings.HasPrefix(k, t) {
				return true
			}
		}
		return false
	})
	w.Rename(rename)
	return New(text, w)
}
