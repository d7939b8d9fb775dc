// Package models loads decoder language models (a model directory of
// config.json + safetensors, or a GGUF file) and runs their forward pass
// with exactly mlx-lm's op graph, so that logits are bit-identical to
// mlx-lm's on the same libmlx (DESIGN.md §6, L1). Each architecture file
// follows its mlx_lm/models/<name>.py of mlx-lm 0.32.2 line by line: the same
// fused ops, casts and order of operations; a "cleaner" formula would change
// the float results.
//
// Everything that touches MLX runs on the executor (inside mlx.Do). Weights
// are detached from scopes and freed by Model.Close.
package models

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
)

// Config is the part of an HF-style config.json the supported architectures
// read. Optional fields are pointers so that each architecture can apply
// its own mlx-lm default.
type Config struct {
	ModelType             string          `json:"model_type"`
	HiddenSize            int             `json:"hidden_size"`
	NumHiddenLayers       int             `json:"num_hidden_layers"`
	IntermediateSize      int             `json:"intermediate_size"`
	NumAttentionHeads     int             `json:"num_attention_heads"`
	NumKeyValueHeads      *int            `json:"num_key_value_heads"`
	HeadDim               *int            `json:"head_dim"`
	RMSNormEps            *float64        `json:"rms_norm_eps"`
	VocabSize             int             `json:"vocab_size"`
	MaxPositionEmbeddings *int            `json:"max_position_embeddings"`
	RopeTheta             *float64        `json:"rope_theta"`
	RopeTraditional       bool            `json:"rope_traditional"`
	RopeScaling           RopeScaling     `json:"rope_scaling"`
	RopeParameters        RopeScaling     `json:"rope_parameters"`
	TieWordEmbeddings     *bool           `json:"tie_word_embeddings"`
	AttentionBias         bool            `json:"attention_bias"`
	MLPBias               bool            `json:"mlp_bias"`
	LayerTypes            []string        `json:"layer_types"`
	SlidingWindow         *int            `json:"sliding_window"`
	SlidingWindowPattern  *int            `json:"sliding_window_pattern"`
	RopeLocalBaseFreq     *float64        `json:"rope_local_base_freq"`
	QueryPreAttnScalar    *float64        `json:"query_pre_attn_scalar"`
	EOSTokenID            TokenIDs        `json:"eos_token_id"`
	TorchDtype            string          `json:"torch_dtype"`
	Quantization          *Quantization   `json:"quantization"`
	QuantizationConfig    json.RawMessage `json:"quantization_config"`

	// normsShifted: the norm weights are stored as 1 + weight (llama.cpp's
	// gemma3 GGUF converter adds the 1), so gemma's 1+w is not applied again.
	normsShifted bool
}

// RopeScaling is a rope_scaling object: a type name and numeric settings.
type RopeScaling map[string]any

// Type is rope_scaling's "type" or "rope_type" ("default" when absent).
func (r RopeScaling) Type() string {
	if r == nil {
		return "default"
	}
	if t, ok := r["type"].(string); ok && t != "" {
		return t
	}
	if t, ok := r["rope_type"].(string); ok && t != "" {
		return t
	}
	return "default"
}

// Float returns a numeric setting, or def when absent.
func (r RopeScaling) Float(key string, def float64) (float64, error) {
	v, ok := r[key]
	if !ok || v == nil {
		return def, nil
	}
	f, ok := v.(float64)
	if !ok {
		return 0, fmt.Errorf("rope_scaling.%s is %T, want a number", key, v)
	}
	return f, nil
}

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
		if err := c.Quantization.validate(); err != nil {
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

func intOr(p *int, def int) int {
	if p != nil {
		return *p
	}
	return def
}

func floatOr(p *float64, def float64) float64 {
	if p != nil {
		return *p
	}
	return def
}

func boolOr(p *bool, def bool) bool {
	if p != nil {
		return *p
	}
	return def
}
