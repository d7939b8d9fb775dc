package models

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// buildLlama is mlx_lm/models/llama.py: SmolLM2, Llama 2/3.x and kin.
func buildLlama(cfg *Config, ws *weightSet) (*decoder, error) {
	headDim := intOr(cfg.HeadDim, cfg.HiddenSize/cfg.NumAttentionHeads)
	theta := floatOr(cfg.RopeTheta, 10000)
	tied := boolOr(cfg.TieWordEmbeddings, true)
	layerTypes := cfg.LayerTypes
	if layerTypes == nil {
		layerTypes = slices.Repeat([]string{"full_attention"}, cfg.NumHiddenLayers)
	}
	if len(layerTypes) != cfg.NumHiddenLayers {
		return nil, fmt.Errorf("layer_types has %d entries for %d layers", len(layerTypes), cfg.NumHiddenLayers)
	}
	fa := slices.Index(layerTypes, "full_attention")
	if fa < 0 {
		return nil, fmt.Errorf("layer_types has no full_attention layer")
	}
	sw := slices.Index(layerTypes, "sliding_attention")
	window := intOr(cfg.SlidingWindow, 0)
	if sw >= 0 && window <= 0 {
		return nil, fmt.Errorf("sliding_attention layers need sliding_window")
	}
	// sanitize: drop precomputed rotary frequencies, and lm_head when tied.
	ws.drop(func(n string) bool {
		return strings.Contains(n, "self_attn.rotary_emb.inv_freq") || (tied && n == "lm_head.weight")
	})
	r, err := initRope(ws, headDim, theta, cfg.RopeTraditional, cfg.RopeScaling)
	if err != nil {
		return nil, err
	}
	spec := layerSpec{headDim: headDim, bias: cfg.AttentionBias, oBias: cfg.AttentionBias, mlpBias: cfg.MLPBias,
		scale: float32(math.Pow(float64(headDim), -0.5))}
	blocks, err := buildBlocks(cfg, ws, spec, func(i int) (*rope, bool, error) {
		return r, layerTypes[i] == "sliding_attention", nil
	})
	if err != nil {
		return nil, err
	}
	d := &decoder{layers: blocks, globalIdx: fa, slidingIdx: sw, window: window}
	d.makeCache = d.slidingCaches // llama.Model.make_cache: mlx-lm ignores --max-kv-size here
	return finishDecoder(d, cfg, ws, tied, false)
}

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

// finishDecoder takes the embedding, final norm and output projection and
// fills Info.
func finishDecoder(d *decoder, cfg *Config, ws *weightSet, tied, onePlusNorm bool) (*decoder, error) {
	d.cfg, d.ws = cfg, ws
	d.eps = float32(floatOr(cfg.RMSNormEps, 0))
	d.embed = ws.embedding("model.embed_tokens", cfg.VocabSize, cfg.HiddenSize)
	d.norm = ws.get("model.norm.weight", cfg.HiddenSize)
	if onePlusNorm && d.norm != nil {
		d.norm = ws.keepArray(addOne(d.norm))
	}
	if !tied {
		d.lmHead = ws.linear("lm_head", cfg.HiddenSize, cfg.VocabSize, false)
	}
	if err := ws.finish(); err != nil {
		ws.free()
		return nil, err
	}
	d.info = Info{
		ModelType:     cfg.ModelType,
		VocabSize:     cfg.VocabSize,
		ContextLength: intOr(cfg.MaxPositionEmbeddings, 0),
		NumLayers:     cfg.NumHiddenLayers,
		EOS:           append([]int(nil), cfg.EOSTokenID...),
		Dtype:         d.embed.dtype().String(),
		Quantization:  cfg.Quantization.String(),
	}
	return d, nil
}

// defaultInt is p, or a pointer to def when p is nil (a ModelArgs default).
func defaultInt(p *int, def int) *int {
	if p != nil {
		return p
	}
	return &def
}
