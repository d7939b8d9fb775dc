// Package llama is mlx_lm/models/llama.py of mlx-lm 0.32.2: SmolLM2, Llama
// 2/3.x and kin (optionally biased projections, optional sliding-window
// layers named by layer_types), op for op so that logits are bit-identical
// to mlx-lm's (DESIGN.md §6, L1).
package llama

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

// Config is llama.py's ModelArgs.
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
	AttentionBias         bool           `json:"attention_bias"`
	MLPBias               bool           `json:"mlp_bias"`
	RopeTheta             *float64       `json:"rope_theta"`
	RopeTraditional       bool           `json:"rope_traditional"`
	RopeScaling           nn.RopeScaling `json:"rope_scaling"`
	TieWordEmbeddings     *bool          `json:"tie_word_embeddings"`
	LayerTypes            []string       `json:"layer_types"`
	SlidingWindow         *int           `json:"sliding_window"`
}

type attention struct {
	qkv            *nn.Projections
	o              nn.Layer // nn.Linear, or nn.Reduced when tensor-parallel
	heads, kvHeads int
	scale          float32
	rope           *nn.RoPE
}

// apply is Attention.__call__ on the block's input_layernorm of x, with x,
// the block's residual, added to its output (h = x + r), which a packed
// output projection adds as it stores.
func (a *attention) apply(x, norm *mlx.Array, eps float32, mask kv.Mask, c kv.Cache) *mlx.Array {
	// q/k/v projections of rms_norm(x) reshaped to [B, L, heads, -1] and
	// transposed to [B, heads, L, -1], as llama.py does.
	p := a.qkv.NormHeads(x, norm, eps, a.heads, a.kvHeads, a.kvHeads)
	// rope at the cache's offset, update_and_fetch, attention, and the
	// heads back to [B, L, heads*dim].
	out := kv.RoPEAttention(c, a.rope, p[0], p[1], p[2], a.scale, mask)
	return nn.AddApply(x, a.o, out)
}

type block struct {
	attn                    *attention
	mlp                     nn.Layer // nn.MLP, its down projection reduced when tensor-parallel
	inputNorm, postAttnNorm *mlx.Array
	eps                     float32
}

func (b *block) apply(x *mlx.Array, mask kv.Mask, c kv.Cache) *mlx.Array {
	h := b.attn.apply(x, b.inputNorm, b.eps, mask, c)       // x + r
	return nn.AddNormApply(h, b.mlp, b.postAttnNorm, b.eps) // h + r, r = mlp(rms_norm(h))
}

// Model is llama.py's Model (LlamaModel and the lm head).
type Model struct {
	cfg     Config
	embed   *nn.Embedding
	layers  []*block
	norm    *mlx.Array
	eps     float32
	head    *nn.Head
	sliding []bool // per layer: attends over the last window tokens
	// faIdx and swaIdx are the first full and sliding layers, whose caches
	// make the masks (swaIdx < 0: none).
	faIdx, swaIdx int
	window        int
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
	for i, l := range m.layers {
		mask := full
		if m.sliding[i] {
			mask = sliding
		}
		h = l.apply(h, mask, kv.At(caches, i))
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

// New builds the model from config.json and the weights.
func New(config []byte, w *nn.Weights) (nn.Decoder, error) {
	var c Config
	if err := json.Unmarshal(config, &c); err != nil {
		return nil, fmt.Errorf("cannot parse config.json: %w", err)
	}
	headDim := c.HiddenSize / c.NumAttentionHeads
	if c.HeadDim != nil {
		headDim = *c.HeadDim
	}
	kvHeads := c.NumAttentionHeads
	if c.NumKeyValueHeads != nil {
		kvHeads = *c.NumKeyValueHeads
	}
	theta := 10000.0
	if c.RopeTheta != nil {
		theta = *c.RopeTheta
	}
	tied := c.TieWordEmbeddings == nil || *c.TieWordEmbeddings
	layerTypes := c.LayerTypes
	if layerTypes == nil {
		layerTypes = slices.Repeat([]string{"full_attention"}, c.NumHiddenLayers)
	}
	if len(layerTypes) != c.NumHiddenLayers {
		return nil, fmt.Errorf("layer_types has %d entries for %d layers", len(layerTypes), c.NumHiddenLayers)
	}
	m := &Model{cfg: c, eps: float32(c.RMSNormEps), faIdx: slices.Index(layerTypes, "full_attention"),
		swaIdx: slices.Index(layerTypes, "sliding_attention")}
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
	// sanitize: drop precomputed rotary frequencies, and lm_head when tied.
	w.Drop(func(n string) bool {
		return strings.Contains(n, "self_attn.rotary_emb.inv_freq") || (tied && n == "lm_head.weight")
	})
	rope, err := nn.NewRoPE(w, headDim, theta, c.RopeTraditional, c.RopeScaling)
	if err != nil {
		return nil, err
	}
	hidden, scale := c.HiddenSize, float32(math.Pow(float64(headDim), -0.5))
	// shard(): with a tensor-parallel load each rank has 1/n of the heads
	// and of the MLP's width (nn/shard.go); n is 1 otherwise.
	n := w.ShardSize()
	for i := range c.NumHiddenLayers {
		p := fmt.Sprintf("model.layers.%d.", i)
		w.ShardAttention(p+"self_attn.", c.NumAttentionHeads, kvHeads)
		w.ShardMLP(p+"mlp.", c.IntermediateSize)
		m.layers = append(m.layers, &block{
			attn: &attention{
				qkv:   w.QKV(p+"self_attn.", hidden, c.NumAttentionHeads*headDim/n, kvHeads*headDim/n, c.AttentionBias),
				o:     w.Reduce(w.Linear(p+"self_attn.o_proj", c.NumAttentionHeads*headDim/n, hidden, c.AttentionBias)),
				heads: c.NumAttentionHeads / n, kvHeads: kvHeads / n, scale: scale, rope: rope,
			},
			mlp:          w.ReduceMLP(w.MLP(p+"mlp.", hidden, c.IntermediateSize/n, c.MLPBias)),
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
