// Package qwen3_5 is mlx_lm/models/qwen3_5.py and qwen3_5_moe.py of
// mlx-lm 0.32.2 (Qwen3.5 / Qwen3.6 text): qwen3_next's hybrid decoder
// (its attention, MLP, gated norm and sparse MoE block, as qwen3_5.py
// imports them) with the Gated DeltaNet's projections as four linears
// (in_proj_qkv, in_proj_z, in_proj_b, in_proj_a), a multimodal wrapper
// whose language model is read text-only (the vision tower dropped), RoPE
// settings in rope_parameters, and, with num_experts > 0 (qwen3_5_moe),
// every layer's feed-forward block sparse. Op for op so that logits are
// bit-identical to mlx-lm's (DESIGN.md §6, L1).
package qwen3_5

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models/nn"
	"github.com/mlxgo/mlxgo/models/qwen3_next"
)

// textArgs is qwen3_5.py's TextModelArgs, with its defaults.
type textArgs struct {
	HiddenSize                   int            `json:"hidden_size"`
	IntermediateSize             int            `json:"intermediate_size"`
	NumHiddenLayers              int            `json:"num_hidden_layers"`
	NumAttentionHeads            int            `json:"num_attention_heads"`
	RMSNormEps                   float64        `json:"rms_norm_eps"`
	VocabSize                    int            `json:"vocab_size"`
	NumKeyValueHeads             int            `json:"num_key_value_heads"`
	MaxPositionEmbeddings        int            `json:"max_position_embeddings"`
	LinearNumValueHeads          int            `json:"linear_num_value_heads"`
	LinearNumKeyHeads            int            `json:"linear_num_key_heads"`
	LinearKeyHeadDim             int            `json:"linear_key_head_dim"`
	LinearValueHeadDim           int            `json:"linear_value_head_dim"`
	LinearConvKernelDim          int            `json:"linear_conv_kernel_dim"`
	TieWordEmbeddings            bool           `json:"tie_word_embeddings"`
	AttentionBias                bool           `json:"attention_bias"`
	HeadDim                      *int           `json:"head_dim"`
	FullAttentionInterval        int            `json:"full_attention_interval"`
	NumExperts                   int            `json:"num_experts"`
	NumExpertsPerTok             int            `json:"num_experts_per_tok"`
	DecoderSparseStep            int            `json:"decoder_sparse_step"`
	SharedExpertIntermediateSize int            `json:"shared_expert_intermediate_size"`
	MoEIntermediateSize          int            `json:"moe_intermediate_size"`
	NormTopKProb                 bool           `json:"norm_topk_prob"`
	RopeParameters               nn.RopeScaling `json:"rope_parameters"`
	// rope_theta and partial_rotary_factor at the top level are read and
	// then replaced from rope_parameters by __post_init__.
	PartialRotaryFactor float64 `json:"partial_rotary_factor"`
	RopeTheta           float64 `json:"rope_theta"`
}

// defaults is TextModelArgs' field defaults.
func defaults() textArgs {
	return textArgs{
		HiddenSize: 4096, IntermediateSize: 14336, NumHiddenLayers: 32, NumAttentionHeads: 32,
		RMSNormEps: 1e-6, VocabSize: 151936, NumKeyValueHeads: 8, MaxPositionEmbeddings: 131072,
		LinearNumValueHeads: 64, LinearNumKeyHeads: 16, LinearKeyHeadDim: 192, LinearValueHeadDim: 128,
		LinearConvKernelDim: 4, FullAttentionInterval: 4, DecoderSparseStep: 1, NormTopKProb: true,
		RopeParameters: nn.RopeScaling{
			"type": "default", "mrope_section": []any{11.0, 11.0, 10.0},
			"rope_theta": 100000.0, "partial_rotary_factor": 0.25,
		},
		PartialRotaryFactor: 0.25, RopeTheta: 100000,
	}
}

// textConfig is ModelArgs.from_dict: the text_config of a wrapper, or the
// whole config when it has none.
func textConfig(config []byte) ([]byte, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(config, &top); err != nil {
		return nil, fmt.Errorf("cannot parse config.json: %w", err)
	}
	if tc, ok := top["text_config"]; ok {
		if string(tc) == "null" {
			return nil, fmt.Errorf("text_config is null") // TextModelArgs.from_dict(None) fails too
		}
		return tc, nil
	}
	return config, nil
}

// TextConfig is the language model's config.json, for models.ParseConfig:
// text_config with TextModelArgs' defaults filled in.
func TextConfig(config []byte) ([]byte, error) {
	c, err := parse(config)
	if err != nil {
		return nil, err
	}
	return json.Marshal(map[string]any{
		"model_type": "qwen3_5", "hidden_size": c.HiddenSize, "num_hidden_layers": c.NumHiddenLayers,
		"intermediate_size": c.IntermediateSize, "num_attention_heads": c.NumAttentionHeads,
		"num_key_value_heads": c.NumKeyValueHeads, "vocab_size": c.VocabSize, "head_dim": *c.HeadDim,
		"rms_norm_eps": c.RMSNormEps, "max_position_embeddings": c.MaxPositionEmbeddings,
		"tie_word_embeddings": c.TieWordEmbeddings,
	})
}

func parse(config []byte) (textArgs, error) {
	c := defaults()
	tc, err := textConfig(config)
	if err != nil {
		return c, err
	}
	// A config's rope_parameters replaces the default one whole, as a
	// dataclass field does.
	var probe struct {
		RopeParameters *json.RawMessage `json:"rope_parameters"`
	}
	if err := json.Unmarshal(tc, &probe); err != nil {
		return c, fmt.Errorf("cannot parse text_config: %w", err)
	}
	if probe.RopeParameters != nil {
		c.RopeParameters = nil
	}
	if err := json.Unmarshal(tc, &c); err != nil {
		return c, fmt.Errorf("cannot parse text_config: %w", err)
	}
	// __post_init__
	if c.HeadDim == nil {
		if c.NumAttentionHeads <= 0 {
			return c, fmt.Errorf("num_attention_heads = %d, want > 0", c.NumAttentionHeads)
		}
		d := c.HiddenSize / c.NumAttentionHeads
		c.HeadDim = &d
	}
	if len(c.RopeParameters) > 0 {
		rp := c.RopeParameters
		if _, ok := rp["type"]; !ok {
			if t, ok := rp["rope_type"]; ok {
				rp["type"] = t
				delete(rp, "rope_type")
			}
		}
		if c.PartialRotaryFactor, err = rp.Float("partial_rotary_factor", 0.25); err != nil {
			return c, err
		}
		if c.RopeTheta, err = rp.Float("rope_theta", 100000); err != nil {
			return c, err
		}
	}
	return c, nil
}

// New builds qwen3_5 (and qwen3_5_moe: New with the MoE sanitize) from
// config.json and the weights.
func New(config []byte, w *nn.Weights) (nn.Decoder, error) { return build(config, w, false) }

// NewMoE builds qwen3_5_moe: qwen3_5 whose sanitize also splits a Hugging
// Face checkpoint's fused experts.gate_up_proj.
func NewMoE(config []byte, w *nn.Weights) (nn.Decoder, error) { return build(config, w, true) }

// shape is what qwen3_next's layers read of c.
func (c *textArgs) shape() qwen3_next.Shape {
	return qwen3_next.Shape{
		Hidden: c.HiddenSize, Heads: c.NumAttentionHeads, KVHeads: c.NumKeyValueHeads, HeadDim: *c.HeadDim,
		RopeDims:  int(float64(*c.HeadDim) * c.PartialRotaryFactor),
		RopeTheta: c.RopeTheta, RopeScaling: c.RopeParameters, AttentionBias: c.AttentionBias,
		Eps:    float32(c.RMSNormEps),
		VHeads: c.LinearNumValueHeads, KHeads: c.LinearNumKeyHeads,
		KDim: c.LinearKeyHeadDim, VDim: c.LinearValueHeadDim, ConvKernel: c.LinearConvKernelDim,
		Experts: c.NumExperts, TopK: c.NumExpertsPerTok,
		MoEWidth: c.MoEIntermediateSize, SharedWidth: c.SharedExpertIntermediateSize,
		NormTopK: c.NormTopKProb, FullAttentionInterval: c.FullAttentionInterval,
	}
}

func build(config []byte, w *nn.Weights, moe bool) (nn.Decoder, error) {
	c, err := parse(config)
	if err != nil {
		return nil, err
	}
	s := c.shape()
	if err := s.Check(); err != nil {
		return nil, err
	}
	plusOne := sanitize(&c, w, moe)
	rope, err := qwen3_next.NewRoPE(w, &s)
	if err != nil {
		return nil, err
	}
	m := &qwen3_next.Model{Shape: s, ContextLength: c.MaxPositionEmbeddings}
	// Qwen3_5TextModel.pipeline(): with a pipeline-parallel load this rank
	// builds (and reads) only its own run of layers (nn/pipeline.go), after
	// sanitize has seen every tensor.
	m.Stage = w.Stage(c.NumHiddenLayers)
	for i := range c.NumHiddenLayers {
		if !m.Stage.Has(i) {
			continue
		}
		p := fmt.Sprintf("language_model.model.layers.%d.", i)
		l := qwen3_next.NewLayer(w, p, &s, plusOne)
		if s.Linear(i) {
			l.Linear = newGatedDeltaNet(w, p+"linear_attn.", &s)
		} else {
			l.Attn = qwen3_next.NewAttention(w, p+"self_attn.", &s, rope, plusOne)
		}
		if s.Experts > 0 {
			l.MLP = qwen3_next.NewSparseMoE(w, p+"mlp.", &s)
		} else {
			l.MLP = w.MLP(p+"mlp.", s.Hidden, c.IntermediateSize, false)
		}
		m.Layers = append(m.Layers, l)
		if w.Err() != nil {
			return nil, w.Err()
		}
	}
	m.Embed = w.Embedding("language_model.model.embed_tokens", c.VocabSize, s.Hidden)
	m.NormWeight = qwen3_next.NormWeight(w, "language_model.model.norm.weight", s.Hidden, plusOne)
	m.Head = w.Head(m.Embed, s.Hidden, c.VocabSize, c.TieWordEmbeddings)
	return m, w.Finish()
}

// newGatedDeltaNet is qwen3_5.py's GatedDeltaNet: the same layer as
// qwen3_next's with q|k|v, z, b and a each from its own projection.
func newGatedDeltaNet(w *nn.Weights, path string, s *qwen3_next.Shape) *qwen3_next.GatedDeltaNet {
	keyDim, valueDim := s.KHeads*s.KDim, s.VHeads*s.VDim
	qkv := w.Linear(path+"in_proj_qkv", s.Hidden, 2*keyDim+valueDim, false)
	z := w.Linear(path+"in_proj_z", s.Hidden, valueDim, false)
	b := w.Linear(path+"in_proj_b", s.Hidden, s.VHeads, false)
	a := w.Linear(path+"in_proj_a", s.Hidden, s.VHeads, false)
	vHeads, vDim := s.VHeads, s.VDim
	return qwen3_next.NewGatedDeltaNet(w, path, s, func(x *mlx.Array) (*mlx.Array, *mlx.Array, *mlx.Array, *mlx.Array) {
		zz := mlx.Reshape(z.Apply(x), x.Dim(0), x.Dim(1), vHeads, vDim)
		return qkv.Apply(x), zz, b.Apply(x), a.Apply(x)
	})
}

// sanitize is Model.sanitize then TextModel.sanitize (qwen3_5_moe's first
// when moe): the vision tower goes, every key is put under
// language_model.model (model.language_model.* renamed, bare keys
// prefixed), a MoE checkpoint's fused gate_up_proj is split, mtp weights
// and a tied lm_head go, a Hugging Face convolution weight moves its kernel
// axis to the middle and then (the returned flag) the norms are stored as
// offsets from 1.
func sanitize(c *textArgs, w *nn.Weights, moe bool) bool {
	w.Drop(func(n string) bool {
		return strings.HasPrefix(n, "vision_tower") || strings.HasPrefix(n, "model.visual")
	})
	w.Rename(func(n string) string {
		switch {
		case strings.HasPrefix(n, "model.language_model"):
			return strings.Replace(n, "model.language_model", "language_model.model", 1)
		case strings.HasPrefix(n, "language_model."):
			return n
		default:
			return "language_model." + n
		}
	})
	if moe {
		for l := range c.NumHiddenLayers {
			p := fmt.Sprintf("language_model.model.layers.%d.mlp.", l)
			if w.Has(p + "experts.gate_up_proj") {
				w.Split(p+"experts.gate_up_proj", -2, p+"switch_mlp.gate_proj.weight", p+"switch_mlp.up_proj.weight")
				w.Rename(func(n string) string {
					if n == p+"experts.down_proj" {
						return p + "switch_mlp.down_proj.weight"
					}
					return n
				})
			}
		}
	}
	w.Drop(func(n string) bool { return strings.Contains(n, "mtp.") })
	// nn.Head takes the output projection as lm_head.
	w.Rename(func(n string) string {
		// (the tensors and the quantization's module entry)
		if n == "language_model.lm_head" || strings.HasPrefix(n, "language_model.lm_head.") {
			return strings.TrimPrefix(n, "language_model.")
		}
		return n
	})
	if c.TieWordEmbeddings {
		w.Drop(func(n string) bool { return n == "lm_head.weight" })
	}
	// has_unsanitized_conv1d: mlx-lm looks before dropping mtp weights,
	// which have no convolution.
	return qwen3_next.MoveConvAxis(w)
}
