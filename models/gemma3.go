package models

import (
	"fmt"
	"math"

	"github.com/mlxgo/mlxgo/mlx"
)

// addOne is gemma's norm scale, 1 + weight, in the weight's dtype.
func addOne(w *mlx.Array) *mlx.Array { return mlx.Add(mlx.ScalarLike(1, w), w) }

// buildGemma3 is mlx_lm/models/gemma3_text.py: every sliding_window_pattern-th
// layer is global (rope_theta with rope_scaling), the others slide over
// sliding_window tokens (rope_local_base_freq); 1+weight RMSNorms around
// attention and MLP, q/k norms, embeddings scaled by sqrt(hidden) rounded to
// bfloat16, gelu_approx, and lm_head tied when the checkpoint has none.
func buildGemma3(cfg *Config, ws *weightSet) (*decoder, error) {
	if cfg.RMSNormEps == nil {
		eps := 1e-6
		cfg.RMSNormEps = &eps
	}
	if cfg.NumKeyValueHeads == nil {
		one := 1
		cfg.NumKeyValueHeads = &one
	}
	cfg.MaxPositionEmbeddings = defaultInt(cfg.MaxPositionEmbeddings, 32768)
	headDim := intOr(cfg.HeadDim, 256)
	pattern := intOr(cfg.SlidingWindowPattern, 6)
	window := intOr(cfg.SlidingWindow, 512)
	if pattern > cfg.NumHiddenLayers {
		return nil, fmt.Errorf("sliding_window_pattern %d exceeds the %d layers", pattern, cfg.NumHiddenLayers)
	}
	global, err := initRope(ws, headDim, floatOr(cfg.RopeTheta, 1000000), false, cfg.RopeScaling)
	if err != nil {
		return nil, err
	}
	local, err := initRope(ws, headDim, floatOr(cfg.RopeLocalBaseFreq, 10000), false, nil)
	if err != nil {
		return nil, err
	}
	spec := layerSpec{headDim: headDim, normPlace: qkNormAfterTranspose, onePlus: !cfg.normsShifted, gelu: true, sandwich: true,
		scale: float32(math.Pow(floatOr(cfg.QueryPreAttnScalar, 256), -0.5))}
	blocks, err := buildBlocks(cfg, ws, spec, func(i int) (*rope, bool, error) {
		if (i+1)%pattern != 0 {
			return local, true, nil
		}
		return global, false, nil
	})
	if err != nil {
		return nil, err
	}
	d := &decoder{layers: blocks, globalIdx: pattern - 1, slidingIdx: -1, window: window}
	if pattern > 1 {
		d.slidingIdx = 0
	}
	d.makeCache = d.slidingCaches
	// sanitize: no lm_head.weight means tied embeddings.
	tied := !ws.has("lm_head.weight")
	d.embedMul = ws.keepArray(mlx.Scalar(float32(math.Sqrt(float64(cfg.HiddenSize))), mlx.BFloat16))
	return finishDecoder(d, cfg, ws, tied, !cfg.normsShifted)
}
