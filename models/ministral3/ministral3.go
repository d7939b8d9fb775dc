// Package ministral3 is mlx_lm/models/ministral3.py of mlx-lm 0.32.2 (the
// text model of Ministral 3 and of mistral3 checkpoints whose text_config
// says ministral3): llama's blocks with rope settings in rope_parameters
// (YaRN in the released models) and queries scaled by Llama 4's
// position-dependent attention scale, op for op so that logits are
// bit-identical to mlx-lm's (DESIGN.md §6, L1).
package ministral3

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models/nn"
)

// Config is ministral3.py's ModelArgs.
type Config struct {
	HiddenSize            int            `json:"hidden_size"`
	NumHiddenLayers       int            `json:"num_hidden_layers"`
	IntermediateSize      int            `json:"intermediate_size"`
	NumAttentionHeads     int            `json:"num_attention_heads"`
	RMSNormEps            float64        `json:"rms_norm_eps"`
	VocabSize             int            `json:"vocab_size"`
	HeadDim               *int           `json:"head_dim"`
	MaxPositionEmbeddings *int           `json:"max_position_embeddings"`
	NumKeyValueHeads      *int           `json:"num_key_value_heads"`
	RopeParameters        nn.RopeScaling `json:"rope_parameters"`
	TieWordEmbeddings     *bool          `json:"tie_word_embeddings"`
	LayerTypes            []string       `json:"layer_types"`
	SlidingWindow         *int           `json:"sliding_window"`
}

type attention struct {
	qkv            *nn.Projections
	o              *nn.Linear
	heads, kvHeads int
	scale          float32
	rope           *nn.RoPE
}

// apply is Attention.__call__ with the model's attn_scale (the model always
// passes one).
func (a *attention) apply(x, attnScale *mlx.Array, mask kv.Mask, c kv.Cache) *mlx.Array {
	b, l := x.Dim(0), x.Dim(1)
	p := a.qkv.Apply(x)
	queries := mlx.Transpose(mlx.Reshape(p[0], b, l, a.heads, -1), 0, 2, 1, 3)
	keys := mlx.Transpose(mlx.Reshape(p[1], b, l, a.kvHeads, -1), 0, 2, 1, 3)
	values := mlx.Transpose(mlx.Reshape(p[2], b, l, a.kvHeads, -1), 0, 2, 1, 3)
	at := kv.PositionOf(c)
	queries = a.rope.At(queries, at)
	keys = a.rope.At(keys, at)
	queries = mlx.Multiply(queries, attnScale)
	out := kv.Attention(c, queries, keys, values, a.scale, mask)
	return a.o.Apply(mlx.Reshape(mlx.Transpose(out, 0, 2, 1, 3), b, l, -1))
}

// llama4AttnScale is _get_llama_4_attn_scale: 1 + beta * log(1 +
// floor(position / max)) for the l positions from the offset, [L, 1], or
// [B, 1, L, 1] for a batch's rows at their own offsets.
func llama4AttnScale(l int, at kv.Position, beta float64, maxPos int) *mlx.Array {
	pos := mlx.Arange(0, float64(l), 1, mlx.Int32)
	if at.Rows != nil {
		pos = mlx.Add(pos, mlx.ExpandDims(at.Rows, 1))
	} else {
		pos = mlx.Add(pos, mlx.ScalarInt(int64(at.Offset), mlx.Int32))
	}
	f32 := func(v float64) *mlx.Array { return mlx.Scalar(float32(v), mlx.Float32) }
	t := mlx.Floor(mlx.Divide(pos, mlx.ScalarInt(int64(maxPos), mlx.Int32)))
	s := mlx.Add(f32(1), mlx.Multiply(f32(beta), mlx.Log(mlx.Add(f32(1), t))))
	if at.Rows != nil {
		return mlx.ExpandDims(s, 1, 3)
	}
	return mlx.ExpandDims(s, 1)
}

type block struct {
	attn                    *attention
	mlp                     *nn.MLP
	inputNorm, postAttnNorm *mlx.Array
	eps                     float32
}

func (b *block) apply(x, attnScale *mlx.Array, mask kv.Mask, c kv.Cache) *mlx.Array {
	r := b.attn.apply(mlx.RMSNorm(x, b.inputNorm, b.eps), attnScale, mask, c)
	h := mlx.Add(x, r)
	r = b.mlp.Apply(mlx.RMSNorm(h, b.postAttnNorm, b.eps))
	return mlx.Add(h, r)
}

// Model is ministral3.py's Model (LanguageModel and the lm head).
type Model struct {
	cfg     Config
	embed   *nn.Embedding
	layers  []*block
	norm    *mlx.Array
	eps     float32
	head    *nn.Head
	sliding []bool
	// faIdx and swaIdx are the first full and sliding layers, whose caches
	// make the masks (swaIdx < 0: none).
	faIdx, swaIdx int
	window        int
	beta          float64 // llama_4_scaling_beta
	origMax       int     // original_max_position_embeddings
}

// Forward implements nn.Decoder.
func (m *Model) Forward(tokens *mlx.Array, caches []kv.Cache) *mlx.Array {
	h := m.embed.Apply(tokens)
	n := h.Dim(1)
	full := kv.AttentionMask(n, kv.At(caches, m.faIdx), 0)
	var sliding kv.Mask
	if m.swaIdx >= 0 {
		sliding = kv.AttentionMask(n, kv.At(caches, m.swaIdx), m.window)
	}
	// offset = cache[0].offset
	scale := mlx.AsType(llama4AttnScale(tokens.Dim(1), kv.PositionOf(kv.At(caches, 0)), m.beta, m.origMax), h.Dtype())
	for i, l := range m.layers {
		mask := full
		if m.sliding[i] {
			mask = sliding
		}
		h = l.apply(h, scale, mask, kv.At(caches, i))
	}
	return mlx.RMSNorm(h, m.norm, m.eps)
}

// Unembed implements nn.Decoder.
func (m *Model) Unembed(h *mlx.Array) *mlx.Array { return m.head.Apply(h) }

// NewCaches is Model.make_cache: a rotating cache of the window for sliding
// layers, growable otherwise; mlx-lm ignores --max-kv-size here.
func (m *Model) NewCaches(kv.Options) []kv.Cache { return nn.SlidingCaches(m.sliding, m.window) }

// Facts implements nn.Decoder.
func (m *Model) Facts() nn.Facts {
	ctx := 0
	if m.cfg.MaxPositionEmbeddings != nil {
		ctx = *m.cfg.MaxPositionEmbeddings
	}
	return nn.Facts{Layers: len(m.layers), ContextLength: ctx, Dtype: m.embed.Dtype().String()}
}

// New builds the model from config.json (or a mistral3 text_config) and the
// weights.
func New(config []byte, w *nn.Weights) (nn.Decoder, error) {
	var c Config
	if err := json.Unmarshal(config, &c); err != nil {
		return nil, fmt.Errorf("cannot parse config.json: %w", err)
	}
	headDim := c.HiddenSize / c.NumAttentionHeads
	if c.HeadDim != nil && *c.HeadDim != 0 {
		headDim = *c.HeadDim
	}
	kvHeads := c.NumAttentionHeads
	if c.NumKeyValueHeads != nil {
		kvHeads = *c.NumKeyValueHeads
	}
	tied := c.TieWordEmbeddings == nil || *c.TieWordEmbeddings
	rp := c.RopeParameters
	theta, err1 := rp.Float("rope_theta", math.NaN())
	beta, err2 := rp.Float("llama_4_scaling_beta", math.NaN())
	origMax, err3 := rp.Float("original_max_position_embeddings", math.NaN())
	for _, err := range []error{err1, err2, err3} {
		if err != nil {
			return nil, err
		}
	}
	if math.IsNaN(theta) || math.IsNaN(beta) || math.IsNaN(origMax) || origMax < 1 || origMax > math.MaxInt32 {
		return nil, fmt.Errorf("ministral3 needs rope_parameters with rope_theta, llama_4_scaling_beta and original_max_position_embeddings >= 1")
	}
	layerTypes := c.LayerTypes
	if layerTypes == nil {
		layerTypes = slices.Repeat([]string{"full_attention"}, c.NumHiddenLayers)
	}
	if len(layerTypes) != c.NumHiddenLayers {
		return nil, fmt.Errorf("layer_types has %d entries for %d layers", len(layerTypes), c.NumHiddenLayers)
	}
	m := &Model{cfg: c, eps: float32(c.RMSNormEps), faIdx: slices.Index(layerTypes, "full_attention"),
		swaIdx: slices.Index(layerTypes, "sliding_attention"), beta: beta, origMax: int(origMax)}
	if m.faIdx < 0 {
		return nil, fmt.Errorf("layer_types has no full_attention layer")
	}
	if c.SlidingWindow != nil {
		m.window = *c.SlidingWindow
	}
	if m.swaIdx >= 0 && m.window <= 0 {
		return nil, fmt.Errorf("sliding_attention layers need sliding_window")
	}
	if err := nn.CheckHeads(c.NumAttentionHeads, kvHeads, headDim); err != nil {
		return nil, err
	}
	if err := sanitize(w, tied); err != nil {
		return nil, err
	}
	rope, err := nn.NewRoPE(w, headDim, theta, false, rp)
	if err != nil {
		return nil, err
	}
	hidden, scale := c.HiddenSize, float32(math.Pow(float64(headDim), -0.5))
	for i := range c.NumHiddenLayers {
		p := fmt.Sprintf("model.layers.%d.", i)
		m.layers = append(m.layers, &block{
			attn: &attention{
				qkv:   w.QKV(p+"self_attn.", hidden, c.NumAttentionHeads*headDim, kvHeads*headDim, false),
				o:     w.Linear(p+"self_attn.o_proj", c.NumAttentionHeads*headDim, hidden, false),
				heads: c.NumAttentionHeads, kvHeads: kvHeads, scale: scale, rope: rope,
			},
			mlp:          w.MLP(p+"mlp.", hidden, c.IntermediateSize, false),
			inputNorm:    w.Get(p+"input_layernorm.weight", hidden),
			postAttnNorm: w.Get(p+"post_attention_layernorm.weight", hidden),
			eps:          m.eps,
		})
		m.sliding = append(m.sliding, layerTypes[i] == "sliding_attention")
		if w.Err() != nil {
			return nil, w.Err()
		}
	}
	m.embed = w.Embedding("model.embed_tokens", c.VocabSize, hidden)
	m.norm = w.Get("model.norm.weight", hidden)
	m.head = w.Head(m.embed, hidden, c.VocabSize, tied)
	return m, w.Finish()
}

// sanitize is Model.sanitize: precomputed rotary frequencies go, and
// lm_head when tied. FP8 checkpoints (weight_scale_inv, which mlx-lm
// multiplies in) are refused: safetensors' float8 is not read here.
func sanitize(w *nn.Weights, tied bool) error {
	w.Drop(func(n string) bool {
		return strings.Contains(n, "self_attn.rotary_emb.inv_freq") || (tied && n == "lm_head.weight") ||
			strings.Contains(n, "activation_scale")
	})
	fp8 := false
	w.Drop(func(n string) bool {
		fp8 = fp8 || strings.Contains(n, "weight_scale_inv")
		return false
	})
	if fp8 {
		return fmt.Errorf("FP8 checkpoints (weight_scale_inv) are not supported: convert with mlx_lm.convert first")
	}
	return nil
}
