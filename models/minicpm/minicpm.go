// Package minicpm is mlx_lm/models/minicpm.py of mlx-lm 0.32.2: llama's
// attention and gated MLP (head_dim = hidden / heads) with MiniCPM's
// muP-style scales: embeddings times scale_emb, every residual branch times
// scale_depth / sqrt(layers), and the final hidden states divided by
// hidden / dim_model_base before lm_head. Op for op, so that logits are
// bit-identical to mlx-lm's (DESIGN.md §6, L1).
package minicpm

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models/nn"
)

// Config is minicpm.py's ModelArgs: the pointers are required there.
type Config struct {
	HiddenSize            int            `json:"hidden_size"`
	DimModelBase          *float64       `json:"dim_model_base"`
	NumHiddenLayers       int            `json:"num_hidden_layers"`
	IntermediateSize      int            `json:"intermediate_size"`
	NumAttentionHeads     int            `json:"num_attention_heads"`
	RMSNormEps            *float64       `json:"rms_norm_eps"`
	VocabSize             int            `json:"vocab_size"`
	NumKeyValueHeads      *int           `json:"num_key_value_heads"`
	ScaleDepth            *float64       `json:"scale_depth"`
	ScaleEmb              *float64       `json:"scale_emb"`
	MaxPositionEmbeddings *int           `json:"max_position_embeddings"`
	RopeTheta             *float64       `json:"rope_theta"`
	RopeTraditional       bool           `json:"rope_traditional"`
	RopeScaling           nn.RopeScaling `json:"rope_scaling"`
	TieWordEmbeddings     bool           `json:"tie_word_embeddings"`
}

type attention struct {
	qkv            *nn.Projections
	o              *nn.Linear
	heads, kvHeads int
	scale          float32
	rope           *nn.RoPE
}

func (a *attention) apply(x *mlx.Array, mask kv.Mask, c kv.Cache) *mlx.Array {
	b, l := x.Dim(0), x.Dim(1)
	p := a.qkv.Apply(x)
	queries := mlx.Transpose(mlx.Reshape(p[0], b, l, a.heads, -1), 0, 2, 1, 3)
	keys := mlx.Transpose(mlx.Reshape(p[1], b, l, a.kvHeads, -1), 0, 2, 1, 3)
	values := mlx.Transpose(mlx.Reshape(p[2], b, l, a.kvHeads, -1), 0, 2, 1, 3)
	// rope at the cache's offset, update_and_fetch, attention, and the heads
	// back to [B, L, heads*dim]
	return a.o.Apply(kv.RoPEAttention(c, a.rope, queries, keys, values, a.scale, mask))
}

type block struct {
	attn                    *attention
	mlp                     *nn.MLP
	inputNorm, postAttnNorm *mlx.Array
	eps                     float32
	depth                   float32 // scale_depth / sqrt(num_hidden_layers), as Python's float
}

func (b *block) apply(x *mlx.Array, mask kv.Mask, c kv.Cache) *mlx.Array {
	r := b.attn.apply(mlx.RMSNorm(x, b.inputNorm, b.eps), mask, c)
	h := mlx.Add(x, mlx.Multiply(r, mlx.ScalarLike(b.depth, r)))
	r = b.mlp.Apply(mlx.RMSNorm(h, b.postAttnNorm, b.eps))
	return mlx.Add(h, mlx.Multiply(r, mlx.ScalarLike(b.depth, r)))
}

// Model is minicpm.py's Model (MiniCPMModel and the lm head).
type Model struct {
	contextLength int
	embed         *nn.Embedding
	scaleEmb      float32
	layers        []*block
	norm          *mlx.Array
	eps           float32
	head          *nn.Head // lm_head, or the embedding table as sanitize copies it
	headDiv       float32  // hidden_size / dim_model_base
}

// Forward implements nn.Decoder.
func (m *Model) Forward(tokens *mlx.Array, caches []kv.Cache) *mlx.Array {
	h := m.embed.Apply(tokens)
	h = mlx.Multiply(h, mlx.ScalarLike(m.scaleEmb, h))
	mask := kv.AttentionMask(h.Dim(1), kv.At(caches, 0), 0)
	for i, l := range m.layers {
		h = l.apply(h, mask, kv.At(caches, i))
	}
	return mlx.RMSNorm(h, m.norm, m.eps)
}

// Unembed implements nn.Decoder: lm_head(out / (hidden / dim_model_base)).
func (m *Model) Unembed(h *mlx.Array) *mlx.Array {
	return m.head.Apply(mlx.Divide(h, mlx.ScalarLike(m.headDiv, h)))
}

// NewCaches is make_prompt_cache: minicpm.py has no make_cache.
func (m *Model) NewCaches(opts kv.Options) []kv.Cache { return nn.DefaultCaches(len(m.layers), opts) }

// Facts implements nn.Decoder.
func (m *Model) Facts() nn.Facts {
	return nn.Facts{Layers: len(m.layers), ContextLength: m.contextLength, Dtype: m.embed.Dtype().String()}
}

// maxDim bounds the widths before any array is made.
const maxDim = 1 << 20

// parse reads and checks config.json; it makes no arrays.
func parse(config []byte) (*Config, error) {
	var c Config
	if err := json.Unmarshal(config, &c); err != nil {
		return nil, fmt.Errorf("cannot parse config.json: %w", err)
	}
	for name, v := range map[string]int{"hidden_size": c.HiddenSize, "num_hidden_layers": c.NumHiddenLayers,
		"intermediate_size": c.IntermediateSize, "num_attention_heads": c.NumAttentionHeads, "vocab_size": c.VocabSize} {
		if v < 1 || v > maxDim {
			return nil, fmt.Errorf("%s = %d, want 1..%d", name, v, maxDim)
		}
	}
	if c.DimModelBase == nil || c.ScaleDepth == nil || c.ScaleEmb == nil || c.RMSNormEps == nil || c.NumKeyValueHeads == nil {
		return nil, fmt.Errorf("minicpm needs dim_model_base, scale_depth, scale_emb, rms_norm_eps and num_key_value_heads")
	}
	if *c.DimModelBase == 0 {
		return nil, fmt.Errorf("dim_model_base = 0, want a non-zero width")
	}
	// A tied model computes out @ embed_tokens.weight.T, but sanitize adds
	// lm_head.weight, which the tied model has no place for: mlx-lm's strict
	// load refuses every tied minicpm checkpoint, and so does mlxgo.
	if c.TieWordEmbeddings {
		return nil, fmt.Errorf("minicpm with tie_word_embeddings: mlx-lm 0.32.2 cannot load it (its sanitize adds an lm_head the tied model lacks)")
	}
	if err := nn.CheckHeads(c.NumAttentionHeads, *c.NumKeyValueHeads, c.HiddenSize/c.NumAttentionHeads); err != nil {
		return nil, err
	}
	return &c, nil
}

// New builds the model from config.json and the weights.
func New(config []byte, w *nn.Weights) (nn.Decoder, error) {
	cp, err := parse(config)
	if err != nil {
		return nil, err
	}
	c := *cp
	heads, kvHeads := c.NumAttentionHeads, *c.NumKeyValueHeads
	headDim := c.HiddenSize / heads
	theta := 1000000.0
	if c.RopeTheta != nil {
		theta = *c.RopeTheta
	}
	rope, err := nn.NewRoPE(w, headDim, theta, c.RopeTraditional, c.RopeScaling)
	if err != nil {
		return nil, err
	}
	m := &Model{eps: float32(*c.RMSNormEps), scaleEmb: float32(*c.ScaleEmb),
		headDiv: float32(float64(c.HiddenSize) / *c.DimModelBase)}
	if c.MaxPositionEmbeddings != nil {
		m.contextLength = *c.MaxPositionEmbeddings
	}
	hidden, scale := c.HiddenSize, float32(math.Pow(float64(headDim), -0.5))
	depth := float32(*c.ScaleDepth / math.Sqrt(float64(c.NumHiddenLayers)))
	for i := range c.NumHiddenLayers {
		p := fmt.Sprintf("model.layers.%d.", i)
		m.layers = append(m.layers, &block{
			attn: &attention{
				qkv:   w.QKV(p+"self_attn.", hidden, heads*headDim, kvHeads*headDim, false),
				o:     w.Linear(p+"self_attn.o_proj", heads*headDim, hidden, false),
				heads: heads, kvHeads: kvHeads, scale: scale, rope: rope,
			},
			mlp:          w.MLP(p+"mlp.", hidden, c.IntermediateSize, false),
			inputNorm:    w.Get(p+"input_layernorm.weight", hidden),
			postAttnNorm: w.Get(p+"post_attention_layernorm.weight", hidden),
			eps:          m.eps, depth: depth,
		})
		if w.Err() != nil {
			return nil, w.Err()
		}
	}
	// sanitize: without lm_head.weight the head is a copy of the embedding
	// table (unquantized: a quantized table's copy would lack its scales).
	if !w.Has("lm_head.weight") {
		if w.Has("model.embed_tokens.scales") {
			return nil, fmt.Errorf("a quantized minicpm checkpoint needs lm_head.weight")
		}
	}
	m.embed = w.Embedding("model.embed_tokens", c.VocabSize, hidden)
	m.head = w.Head(m.embed, hidden, c.VocabSize, !w.Has("lm_head.weight"))
	m.norm = w.Get("model.norm.weight", hidden)
	return m, w.Finish()
}
