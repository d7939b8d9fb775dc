// Package models loads decoder language models (a model directory of
// config.json + safetensors, or a GGUF file) and runs their forward pass
// with exactly mlx-lm's op graph, so that logits are bit-identical to
// mlx-lm's on the same libmlx (DESIGN.md §6, L1). Each architecture is a
// package of its own (models/llama, models/qwen2, models/qwen3,
// models/gemma3) that follows its mlx_lm/models/<name>.py of mlx-lm 0.32.2
// line by line: the same fused ops, casts and order of operations; a
// "cleaner" formula would change the float results. This package picks the
// architecture by model_type, reads the weights (both formats through one
// nn.Weights), and runs every architecture the same way (Model, RowModel).
//
// Everything that touches MLX runs on the executor (inside mlx.Do). Weights
// are detached from scopes and freed by Model.Close.
package models

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"

	"github.com/mlxgo/mlxgo/models/nn"
)

// Config is the header of an HF-style config.json, checked before any
// architecture reads the file (bounds, quantization, eos_token_id), and the
// config.json a GGUF file's metadata stands for (ggufConfig): the keys
// validate bounds, the shared keys ggufConfig writes and gemma3's (which its
// GGUF tests check here), nothing else; the keys other architectures'
// nn.GGUF.Config add reach their builders in the config bytes only. Each
// architecture reads its own ModelArgs from the same bytes; optional fields
// are pointers so that it can apply its own mlx-lm default.
type Config struct {
	ModelType             string        `json:"model_type"`
	HiddenSize            int           `json:"hidden_size"`
	NumHiddenLayers       int           `json:"num_hidden_layers"`
	IntermediateSize      int           `json:"intermediate_size"`
	NumAttentionHeads     int           `json:"num_attention_heads"`
	NumKeyValueHeads      *int          `json:"num_key_value_heads"`
	HeadDim               *int          `json:"head_dim"`
	RMSNormEps            *float64      `json:"rms_norm_eps"`
	VocabSize             int           `json:"vocab_size"`
	MaxPositionEmbeddings *int          `json:"max_position_embeddings"`
	RopeTheta             *float64      `json:"rope_theta"`
	RopeScaling           RopeScaling   `json:"rope_scaling"`
	TieWordEmbeddings     *bool         `json:"tie_word_embeddings"`
	SlidingWindow         *int          `json:"sliding_window"`
	SlidingWindowPattern  *int          `json:"sliding_window_pattern"`
	RopeLocalBaseFreq     *float64      `json:"rope_local_base_freq"`
	QueryPreAttnScalar    *float64      `json:"query_pre_attn_scalar"`
	EOSTokenID            TokenIDs      `json:"eos_token_id"`
	Quantization          *Quantization `json:"quantization"`
}

// RopeScaling is a rope_scaling object (nn.RopeScaling).
type RopeScaling = nn.RopeScaling

// Quantization is config.json's "quantization" (nn.Quantization).
type Quantization = nn.Quantization

// TokenIDs decodes eos_token_id written as one integer or a list.
type TokenIDs []int

func (t *TokenIDs) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		*t = nil
		return nil
	}
	if len(b) > 0 && b[0] == '[' {
		var ids []int
		if err := json.Unmarshal(b, &ids); err != nil {
			return fmt.Errorf("eos_token_id: %w", err)
		}
		*t = ids
		return nil
	}
	var id int
	if err := json.Unmarshal(b, &id); err != nil {
		return fmt.Errorf("eos_token_id: %w", err)
	}
	*t = []int{id}
	return nil
}

// ParseConfig decodes and checks config.json.
func ParseConfig(data []byte) (*Config, error) {
	var c Config
	// A multimodal wrapper (mistral3, gemma3) describes its language model
	// in text_config: the sizes come from there, and what the top level has
	// (model_type, quantization, eos_token_id) wins.
	var wrapper struct {
		TextConfig json.RawMessage `json:"text_config"`
	}
	if json.Unmarshal(data, &wrapper) == nil && len(wrapper.TextConfig) > 0 && !bytes.Equal(wrapper.TextConfig, []byte("null")) {
		text := []byte(wrapper.TextConfig)
		var head struct {
			ModelType string `json:"model_type"`
		}
		_ = json.Unmarshal(data, &head)
		if f, ok := textConfigs[head.ModelType]; ok {
			var err error
			if text, err = f(data); err != nil {
				return nil, fmt.Errorf("invalid config.json: %w", err)
			}
		}
		if err := json.Unmarshal(text, &c); err != nil {
			return nil, fmt.Errorf("cannot parse config.json's text_config: %w", err)
		}
		c.Quantization = nil
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("cannot parse config.json: %w", err)
	}
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("invalid config.json: %w", err)
	}
	return &c, nil
}

// Bounds that keep a hostile config from asking for absurd allocations
// before any weight is read; real models are far below them.
const (
	maxDim    = 1 << 20
	maxLayers = 4096
	maxVocab  = 1 << 24
)

func (c *Config) validate() error {
	if c.ModelType == "" {
		return fmt.Errorf("model_type is missing")
	}
	checks := []struct {
		name     string
		v, limit int
	}{
		{"hidden_size", c.HiddenSize, maxDim},
		{"num_hidden_layers", c.NumHiddenLayers, maxLayers},
		{"intermediate_size", c.IntermediateSize, maxDim},
		{"num_attention_heads", c.NumAttentionHeads, maxDim},
		{"vocab_size", c.VocabSize, maxVocab},
	}
	for _, ch := range checks {
		if ch.v <= 0 || ch.v > ch.limit {
			return fmt.Errorf("%s = %d, want 1..%d", ch.name, ch.v, ch.limit)
		}
	}
	for name, p := range map[string]*int{"num_key_value_heads": c.NumKeyValueHeads, "head_dim": c.HeadDim,
		"sliding_window": c.SlidingWindow, "sliding_window_pattern": c.SlidingWindowPattern} {
		if p != nil && (*p <= 0 || *p > maxDim) {
			return fmt.Errorf("%s = %d, want 1..%d", name, *p, maxDim)
		}
	}
	if c.MaxPositionEmbeddings != nil && *c.MaxPositionEmbeddings < 0 {
		return fmt.Errorf("max_position_embeddings = %d, want >= 0", *c.MaxPositionEmbeddings)
	}
	for name, p := range map[string]*float64{"rms_norm_eps": c.RMSNormEps, "rope_theta": c.RopeTheta,
		"rope_local_base_freq": c.RopeLocalBaseFreq, "query_pre_attn_scalar": c.QueryPreAttnScalar} {
		if p != nil && (math.IsNaN(*p) || math.IsInf(*p, 0) || *p < 0) {
			return fmt.Errorf("%s = %v, want a finite non-negative number", name, *p)
		}
	}
	if c.Quantization != nil {
		if err := c.Quantization.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// kvHeads is num_key_value_heads, defaulting to the attention heads.
func (c *Config) kvHeads() int {
	if c.NumKeyValueHeads != nil {
		return *c.NumKeyValueHeads
	}
	return c.NumAttentionHeads
}
