package gemma3

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mlxgo/mlxgo/models/nn"
)

// This file is mlx_lm/models/gemma3.py: a Gemma 3 checkpoint with its
// vision tower (model_type gemma3), loaded as mlx-lm loads it, the language
// model alone.

// TextConfig is the language model's config.json: text_config as
// gemma3.py's ModelArgs.__post_init__ completes it (the top level's
// vocab_size, default 262208; 8 attention heads and 4 KV heads unless
// text_config says otherwise).
func TextConfig(config []byte) ([]byte, error) {
	var c struct {
		TextConfig map[string]any `json:"text_config"`
		VocabSize  *int           `json:"vocab_size"`
	}
	if err := json.Unmarshal(config, &c); err != nil {
		return nil, fmt.Errorf("cannot parse config.json: %w", err)
	}
	if c.TextConfig == nil {
		return nil, fmt.Errorf("gemma3 needs a text_config")
	}
	vocab := 262208
	if c.VocabSize != nil {
		vocab = *c.VocabSize
	}
	c.TextConfig["vocab_size"] = vocab
	for k, def := range map[string]int{"num_attention_heads": 8, "num_key_value_heads": 4} {
		if _, ok := c.TextConfig[k]; !ok {
			c.TextConfig[k] = def
		}
	}
	return json.Marshal(c.TextConfig)
}

// NewVLM builds the language model of a gemma3 checkpoint: sanitize drops
// the vision_tower and multi_modal_projector trees and hands the
// language_model tree to gemma3_text's sanitize, under its own names.
func NewVLM(config []byte, w *nn.Weights) (nn.Decoder, error) {
	text, err := TextConfig(config)
	if err != nil {
		return nil, err
	}
	w.Rename(func(k string) string { return strings.TrimPrefix(k, "language_model.") })
	w.Drop(func(k string) bool {
		return strings.HasPrefix(k, "vision_tower.") || strings.HasPrefix(k, "multi_modal_projector.")
	})
	return New(text, w)
}
