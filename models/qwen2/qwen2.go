// Package qwen2 is mlx_lm/models/qwen2.py of mlx-lm 0.32.2: llama's layers
// with q/k/v biases (the output projection and MLP unbiased) and head_dim
// always hidden/heads, op for op so that logits are bit-identical to
// mlx-lm's (DESIGN.md §6, L1).
package qwen2

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models/nn"
)

// Config is qwen2.py's ModelArgs.
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
	RopeTraditional       bool           `json:"rope_traditional"`
	RopeScaling           nn.RopeScaling `json:"rope_scaling"`
	TieWordEmbeddings     *bool          `json:"tie_word_embeddings"`
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
	// transposed to [B, heads, L, -1], as qwen2.py does.
	p := a.qkv.NormHeads(x, norm, eps, a.heads, a.kvHeads, a.kvHeads)
	// rope at the cache's offset, update_and_fetch, attention, and the heads
	// back to [B, L, heads*dim]
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

// Model is qwen2.py's Model (Qwen2Model and the lm head).
type Model struct {
	cfg    Config
	embed  *nn.Embedding
	layers []*block
	norm   *mlx.Array
	eps    float32
	head   *nn.Head
	stage  *nn.Stage // pipeline parallelism: layers holds this rank's only
}

// Forward implements nn.Decoder.
func (m *Model) Forward(tokens *mlx.Array, caches []kv.Cache) *mlx.Array {
	h := m.embed.Apply(tokens)
	mask := kv.AttentionMask(h.Dim(1), kv.At(caches, 0), 0)
	h = m.stage.Enter(h)
	for i, l := range m.layers {
		h = l.apply(h, mask, kv.At(caches, i))
	}
	h = m.stage.Leave(h, kv.At(caches, len(m.layers)-1))
	return mlx.RMSNorm(h, m.norm, m.eps)
}

// Unembed implements nn.Decoder.
func (m *Model) Unembed(h *mlx.Array) *mlx.Array { return m.head.Apply(h) }

// NewCaches is make_prompt_cache: qwen2.py has no make_cache.
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
	if c.NumKeyValueHeads == nil {
		return nil, fmt.Errorf("num_key_value_heads is missing")
	}
	if c.MaxPositionEmbeddings == nil {
		n := 32768
		c.MaxPositionEmbeddings = &n
	}
	theta := 1000000.0
	if c.RopeTheta != nil {
		theta = *c.RopeTheta
	}
	tied := c.TieWordEmbeddings == nil || *c.TieWordEmbeddings
	headDim, kvHeads := c.HiddenSize/c.NumAttentionHeads, *c.NumKeyValueHeads
	if err := nn.CheckHeads(c.NumAttentionHeads, kvHeads, headDim); err != nil {
		return nil, err
	}
	w.Drop(func(n string) bool {
		return strings.Contains(n, "self_attn.rotary_emb.inv_freq") || (tied && n == "lm_head.weight")
	})
	rope, err := nn.NewRoPE(w, headDim, theta, c.RopeTraditional, c.RopeScaling)
	if err != nil {
		return nil, err
	}
	m := &Model{cfg: c, eps: float32(c.RMSNormEps)}
	hidden, scale := c.HiddenSize, float32(math.Pow(float64(headDim), -0.5))
	// shard(): with a tensor-parallel load each rank has 1/n of the heads
	// and of the MLP's width (nn/shard.go); n is 1 otherwise.
	n := w.ShardSize()
	// pipeline(): with a pipeline-parallel load this rank builds (and
	// reads) only its own run of layers (nn/pipeline.go).
	m.stage = w.Stage(c.NumHiddenLayers)
	for i := range c.NumHiddenLayers {
		if !m.stage.Has(i) {
			continue
		}
		p := fmt.Sprintf("model.layers.%d.", i)
		w.ShardAttention(p+"self_attn.", c.NumAttentionHeads, kvHeads)
		w.ShardMLP(p+"mlp.", c.IntermediateSize)
		m.layers = append(m.layers, &block{
			attn: &attention{
				qkv:   w.QKV(p+"self_attn.", hidden, c.NumAttentionHeads*headDim/n, kvHeads*headDim/n, true),
				o:     w.Reduce(w.Linear(p+"self_attn.o_proj", c.NumAttentionHeads*headDim/n, hidden, false)),
				heads: c.NumAttentionHeads / n, kvHeads: kvHeads / n, scale: scale, rope: rope,
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
