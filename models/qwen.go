package models

import (
	"fmt"
	"math"
	"strings"
)

// buildQwen2 is mlx_lm/models/qwen2.py: llama with q/k/v biases and
// head_dim always hidden/heads.
func buildQwen2(cfg *Config, ws *weightSet) (*decoder, error) {
	if cfg.NumKeyValueHeads == nil {
		return nil, fmt.Errorf("num_key_value_heads is missing")
	}
	headDim := cfg.HiddenSize / cfg.NumAttentionHeads
	tied := boolOr(cfg.TieWordEmbeddings, true)
	cfg.MaxPositionEmbeddings = defaultInt(cfg.MaxPositionEmbeddings, 32768)
	ws.drop(func(n string) bool {
		return strings.Contains(n, "self_attn.rotary_emb.inv_freq") || (tied && n == "lm_head.weight")
	})
	r, err := initRope(ws, headDim, floatOr(cfg.RopeTheta, 1000000), cfg.RopeTraditional, cfg.RopeScaling)
	if err != nil {
		return nil, err
	}
	spec := layerSpec{headDim: headDim, bias: true, scale: float32(math.Pow(float64(headDim), -0.5))}
	blocks, err := buildBlocks(cfg, ws, spec, func(int) (*rope, bool, error) { return r, false, nil })
	if err != nil {
		return nil, err
	}
	return finishDecoder(&decoder{layers: blocks, slidingIdx: -1}, cfg, ws, tied, false)
}

// buildQwen3 is mlx_lm/models/qwen3.py: per-head q/k RMSNorm before the
// head axis moves, explicit head_dim, rope settings possibly nested in
// rope_parameters (transformers 5).
func buildQwen3(cfg *Config, ws *weightSet) (*decoder, error) {
	if cfg.NumKeyValueHeads == nil || cfg.HeadDim == nil || cfg.TieWordEmbeddings == nil || cfg.MaxPositionEmbeddings == nil {
		return nil, fmt.Errorf("qwen3 needs num_key_value_heads, head_dim, tie_word_embeddings and max_position_embeddings")
	}
	theta, scaling := cfg.RopeTheta, cfg.RopeScaling
	if len(cfg.RopeParameters) > 0 {
		if theta == nil {
			if t, ok := cfg.RopeParameters["rope_theta"].(float64); ok {
				theta = &t
			}
		}
		if scaling == nil {
			scaling = cfg.RopeParameters
		}
	}
	if theta == nil {
		return nil, fmt.Errorf("rope_theta is missing from the model config")
	}
	tied := *cfg.TieWordEmbeddings
	if tied {
		ws.drop(func(n string) bool { return n == "lm_head.weight" })
	}
	r, err := initRope(ws, *cfg.HeadDim, *theta, false, scaling)
	if err != nil {
		return nil, err
	}
	spec := layerSpec{headDim: *cfg.HeadDim, normPlace: qkNormBeforeTranspose,
		scale: float32(math.Pow(float64(*cfg.HeadDim), -0.5))}
	blocks, err := buildBlocks(cfg, ws, spec, func(int) (*rope, bool, error) { return r, false, nil })
	if err != nil {
		return nil, err
	}
	return finishDecoder(&decoder{layers: blocks, slidingIdx: -1}, cfg, ws, tied, false)
}
