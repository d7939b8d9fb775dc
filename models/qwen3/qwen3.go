// Package qwen3 is mlx_lm/models/qwen3.py of mlx-lm 0.32.2: per-head q/k
// RMSNorm before the head axis moves, an explicit head_dim, rope settings
// possibly nested in rope_parameters (transformers 5), op for op so that
// logits are bit-identical to mlx-lm's (DESIGN.md §6, L1).
package qwen3

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models/nn"
)

// Config is qwen3.py's ModelArgs.
type Config struct {
	HiddenSize            int            `json:"hidden_size"`
	NumHiddenLayers       int            `json:"num_hidden_layers"`
	IntermediateSize      int            `json:"intermediate_size"`
	NumAttentionHeads     int            `json:"num_attention_heads"`
	RMSNormEps            float64        `json:"rms_norm_eps"`
	VocabSize             int            `json:"vocab_size"`
	NumKeyValueHeads      *int           `json:"num_key_value_heads"`
	MaxPositionEmbeddings *int           `json:"max_position_embeddings"`
	RopeTheta             *float64       `json:"rope_theta"`
	HeadDim               *int           `json:"head_dim"`
	TieWordEmbeddings     *bool          `json:"tie_word_embeddings"`
	RopeScaling           nn.RopeScaling `json:"rope_scaling"`
	RopeParameters        nn.RopeScaling `json:"rope_parameters"`
}

type attention struct {
	qkv            *nn.Projections
	o              nn.Layer // nn.Linear, or nn.Reduced when tensor-parallel
	qNorm, kNorm   *mlx.Array
	eps            float32
	heads, kvHeads int
	scale          float32
	rope           *nn.RoPE
}

// apply is Attention.__call__ on the block's input_layernorm of x, with x,
// the block's residual, added to its output (h = x + r), which a packed
// output projection adds as it stores.
func (a *attention) apply(x, norm *mlx.Array, eps float32, mask kv.Mask, c kv.Cache) *mlx.Array {
	// q/k/v projections of rms_norm(x) as heads [B, heads, L, -1]; q_norm
	// and k_norm normalize each head's vector, which qwen3.py does before
	// the transpose: the same rows either way.
	p := a.qkv.NormHeads(x, norm, eps, a.heads, a.kvHeads, a.kvHeads)
	queries := mlx.RMSNorm(p[0], a.qNorm, a.eps)
	keys := mlx.RMSNorm(p[1], a.kNorm, a.eps)
	// rope at the cache's offset, update_and_fetch, attention, and the heads
	// back to [B, L, heads*dim]
	out := kv.RoPEAttention(c, a.rope, queries, keys, p[2], a.scale, mask)
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

// Model is qwen3.py's Model (Qwen3Model and the lm head).
type Model struct {
	cfg    Config
	embed  *nn.Embedding
	layers []*block
	norm   *mlx.Array
	eps    float32
	head   *nn.Head
}

// Forward implements nn.Decoder.
func (m *Model) Forward(tokens *mlx.Array, caches []kv.Cache) *mlx.Array {
	h := m.embed.Apply(tokens)
	mask := kv.AttentionMask(h.Dim(1), kv.At(caches, 0), 0)
	for i, l := range m.layers {
		h = l.apply(h, mask, kv.At(caches, i))
	}
	return mlx.RMSNorm(h, m.norm, m.eps)
}

// Unembed implements nn.Decoder.
func (m *Model) Unembed(h *mlx.Array) *mlx.Array { return m.head.Apply(h) }

// NewCaches is make_prompt_cache: qwen3.py has no make_cache.
func (m *Model) NewCaches(opts kv.Options) []kv.Cache { return nn.DefaultCaches(len(m.layers), opts) }

// Facts implements nn.Decoder.
func (m *Model) Facts() nn.Facts {
	return nn.Facts{Layers: len(m.layers), ContextLength: *m.cfg.MaxPositionEmbeddings, Dtype: m.embed.Dtype().String()}
}

// New builds the model from config.json and the weights.
func New(config []byte, w *nn.Weights) (nn.Decoder, error) {
	var c Config
	if err := json.Unmarshal(config, &c); err != nil {
		return nil, fmt.Errorf("cannot parse config.json: %w", err)
	}
	if c.NumKeyValueHeads == nil || c.HeadDim == nil || c.TieWordEmbeddings == nil || c.MaxPositionEmbeddings == nil {
		return nil, fmt.Errorf("qwen3 needs num_key_value_heads, head_dim, tie_word_embeddings and max_position_embeddings")
	}
	theta, scaling := c.RopeTheta, c.RopeScaling
	if len(c.RopeParameters) > 0 {
		if theta == nil {
			if t, ok := c.RopeParameters["rope_theta"].(float64); ok {
				theta = &t
			}
		}
		if scaling == nil {
			scaling = c.RopeParameters
		}
	}
	if theta == nil {
		return nil, fmt.Errorf("rope_theta is missing from the model config")
	}
	headDim, kvHeads, tied := *c.HeadDim, *c.NumKeyValueHeads, *c.TieWordEmbeddings
	if err := nn.CheckHeads(c.NumAttentionHeads, kvHeads, headDim); err != nil {
		return nil, err
	}
	if tied {
		w.Drop(func(n string) bool { return n == "lm_head.weight" })
	}
	rope, err := nn.NewRoPE(w, headDim, *theta, false, scaling)
	if err != nil {
		return nil, err
	}
	m := &Model{cfg: c, eps: float32(c.RMSNormEps)}
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
				qkv:   w.QKV(p+"self_attn.", hidden, c.NumAttentionHeads*headDim/n, kvHeads*headDim/n, false),
				o:     w.Reduce(w.Linear(p+"self_attn.o_proj", c.NumAttentionHeads*headDim/n, hidden, false)),
				qNorm: w.Get(p+"self_attn.q_norm.weight", headDim),
				kNorm: w.Get(p+"self_attn.k_norm.weight", headDim),
				eps:   m.eps, heads: c.NumAttentionHeads / n, kvHeads: kvHeads / n, scale: scale, rope: rope,
			},
			mlp:          w.ReduceMLP(w.MLP(p+"mlp.", hidden, c.IntermediateSize/n, false)),
			inputNorm:    w.Get(p+"input_layernorm.weight", hidden),
			postAttnNorm: w.Get(p+"post_attention_layernorm.weight", hidden),
			eps:          m.eps,
		})
		if w.Err() != nil {
			return nil, w.Err()
		}
	}
	m.embed = w.Embedding("model.embed_tokens", c.VocabSize, hidden)
	m.norm = w.Get("model.norm.weight", hidden)
	m.head = w.Head(m.embed, hidden, c.VocabSize, tied)
	return m, w.Finish()
}
