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
