// Package mistral3 is mlx_lm/models/mistral3.py of mlx-lm 0.32.2: the
// language model of a Mistral 3 checkpoint (Ministral 3, Mistral Small 3.1
// and 3.2) without its vision tower, as mlx-lm loads it: text_config builds
// a ministral3 model, or a llama one for other text model types, and the
// vision tower's and projector's weights are dropped.
package mistral3

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mlxgo/mlxgo/models/llama"
	"github.com/mlxgo/mlxgo/models/ministral3"
	"github.com/mlxgo/mlxgo/models/nn"
)

// TextConfig is the language model's config.json: text_config as
// ModelArgs.__post_init__ completes it (untied unless it says so).
func TextConfig(config []byte) ([]byte, error) {
	var c struct {
		TextConfig map[string]any `json:"text_config"`
	}
	if err := json.Unmarshal(config, &c); err != nil {
		return nil, fmt.Errorf("cannot parse config.json: %w", err)
	}
	if c.TextConfig == nil {
		return nil, fmt.Errorf("mistral3 needs a text_config")
	}
	if _, ok := c.TextConfig["tie_word_embeddings"]; !ok {
		c.TextConfig["tie_word_embeddings"] = false
	}
	return json.Marshal(c.TextConfig)
}

// New builds the language model from config.json's text_config and the
// weights.
func New(config []byte, w *nn.Weights) (nn.Decoder, error) {
	text, err := TextConfig(config)
	if err != nil {
		return nil, err
	}
	var head struct {
		ModelType string `json:"model_type"`
	}
	if err := json.Unmarshal(text, &head); err != nil {
		return nil, err
	}
	sanitize(w)
	switch head.ModelType {
	case "ministral3":
		return ministral3.New(text, w)
	case "mistral4":
		return nil, fmt.Errorf("mistral3 with a mistral4 text model is not supported (text model types: ministral3, llama and the llama-like rest)")
	default:
		return llama.New(text, w)
	}
}

// sanitize is Model.sanitize: the language model's weights under the names
// its own model uses, the vision tower and projector dropped.
func sanitize(w *nn.Weights) {
	w.Rename(func(k string) string {
		if rest, ok := strings.CutPrefix(k, "model.language_model."); ok {
			return "model." + rest
		}
		return strings.TrimPrefix(k, "language_model.")
	})
	w.Drop(func(k string) bool {
		return strings.Contains(k, "vision_tower") || strings.Contains(k, "multi_modal_projector")
	})
}
