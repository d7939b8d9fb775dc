// Package phi3 is mlx_lm/models/phi3.py of mlx-lm 0.32.2: Phi-3, Phi-3.5
// and Phi-4-mini: one fused qkv_proj and gate_up_proj, partial rotary
// dimensions, longrope (SuScaledRoPE) or plain/linear RoPE, op for op so
// that logits are bit-identical to mlx-lm's (DESIGN.md §6, L1).
package phi3

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models/nn"
)

// Config is phi3.py's ModelArgs.
type Config struct {
	HiddenSize                    int            `json:"hidden_size"`
	NumHiddenLayers               int            `json:"num_hidden_layers"`
	IntermediateSize              int            `json:"intermediate_size"`
	NumAttentionHeads             int            `json:"num_attention_heads"`
	RMSNormEps                    float64        `json:"rms_norm_eps"`
	VocabSize                     int            `json:"vocab_size"`
	NumKeyValueHeads              *int           `json:"num_key_value_heads"`
	RopeTheta                     *float64       `json:"rope_theta"`
	RopeTraditional               bool           `json:"rope_traditional"`
	RopeScaling                   nn.RopeScaling `json:"rope_scaling"`
	PartialRotaryFactor           *float64       `json:"partial_rotary_factor"`
	MaxPositionEmbeddings         *int           `json:"max_position_embeddings"`
	OriginalMaxPositionEmbeddings *int           `json:"original_max_position_embeddings"`
	TieWordEmbeddings             bool           `json:"tie_word_embeddings"`
}

type attention struct {
	qkv                     *nn.Linear
	o                       *nn.Linear
	heads, kvHeads, headDim int
	scale                   float32
	rope                    *nn.RoPE
}

func (a *attention) apply(x *mlx.Array, mask kv.Mask, c kv.Cache) *mlx.Array {
	b, l := x.Dim(0), x.Dim(1)
	q := a.heads * a.headDim
	p := mlx.SplitAt(a.qkv.Apply(x), []int{q, q + a.kvHeads*a.headDim}, -1)
	queries := mlx.Transpose(mlx.Reshape(p[0], b, l, a.heads, -1), 0, 2, 1, 3)
	keys := mlx.Transpose(mlx.Reshape(p[1], b, l, a.kvHeads, -1), 0, 2, 1, 3)
	values := mlx.Transpose(mlx.Reshape(p[2], b, l, a.kvHeads, -1), 0, 2, 1, 3)
	// rope at the cache's offset, update_and_fetch, attention, and the heads
	// back to [B, L, heads*dim]
	return a.o.Apply(kv.RoPEAttention(c, a.rope, queries, keys, values, a.scale, mask))
}

// mlp is phi3.py's MLP: gate and up as one projection, split in halves.
type mlp struct {
	gateUp, down *nn.Linear
}

func (m *mlp) apply(x *mlx.Array) *mlx.Array {
	p := mlx.Split(m.gateUp.Apply(x), 2, -1)
	return m.down.Apply(mlx.SwiGLU(p[0], p[1]))
}

type block struct {
	attn                    *attention
	mlp                     *mlp
	inputNorm, postAttnNorm *mlx.Array
	eps                     float32
}

func (b *block) apply(x *mlx.Array, mask kv.Mask, c kv.Cache) *mlx.Array {
	r := b.attn.apply(mlx.RMSNorm(x, b.inputNorm, b.eps), mask, c)
	h := mlx.Add(x, r)
	r = b.mlp.apply(mlx.RMSNorm(h, b.postAttnNorm, b.eps))
	return mlx.Add(h, r)
}

// Model is phi3.py's Model (Phi3Model and the lm head).
type Model struct {
	embed   *nn.Embedding
	layers  []*block
	norm    *mlx.Array
	eps     float32
	head    *nn.Head
	context int
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

// NewCaches is make_prompt_cache: phi3.py has no make_cache.
func (m *Model) NewCaches(opts kv.Options) []kv.Cache { return nn.DefaultCaches(len(m.layers), opts) }

// Facts implements nn.Decoder.
func (m *Model) Facts() nn.Facts {
	return nn.Facts{Layers: len(m.layers), ContextLength: m.context, Dtype: m.embed.Dtype().String()}
}

// newRoPE is Attention's choice of rotary embedding (after
// ModelArgs.__post_init__'s check of rope_scaling).
func newRoPE(c *Config, w *nn.Weights, dims int, theta float64, maxPos int) (*nn.RoPE, error) {
	sc := c.RopeScaling
	if len(sc) > 0 {
		t, _ := sc["type"].(string)
		_, long := sc["long_factor"]
		if !long || sc["type"] == nil {
			return nil, fmt.Errorf("rope_scaling must contain keys long_factor and type")
		}
		switch t {
		case "longrope", "su":
			origMax := 4096
			if c.OriginalMaxPositionEmbeddings != nil {
				origMax = *c.OriginalMaxPositionEmbeddings
			}
			if _, ok := sc["short_factor"]; !ok {
				return nil, fmt.Errorf("%s rope_scaling needs short_factor", t)
			}
			lf, err := factors(sc["long_factor"])
			if err != nil {
				return nil, err
			}
			return nn.NewSuScaledRoPE(w, dims, theta, maxPos, origMax, lf)
		case "linear":
			return nn.NewRoPE(w, dims, theta, c.RopeTraditional, nn.RopeScaling{"type": "linear", "factor": sc["factor"]})
		}
		// any other type: mlx-lm warns and drops rope_scaling
	}
	return nn.NewRoPE(w, dims, theta, c.RopeTraditional, nil)
}

// factors is a long_factor: one number or a list of them.
func factors(v any) ([]float64, error) {
	switch v := v.(type) {
	case float64:
		return []float64{v}, nil
	case []any:
		out := make([]float64, len(v))
		for i, e := range v {
			f, ok := e.(float64)
			if !ok {
				return nil, fmt.Errorf("rope_scaling.long_factor[%d] is %T, want a number", i, e)
			}
			out[i] = f
		}
		return out, nil
	}
	return nil, fmt.Errorf("rope_scaling.long_factor is %T, want a number or a list", v)
}

// New builds the model from config.json and the weights.
func New(config []byte, w *nn.Weights) (nn.Decoder, error) {
	var c Config
	if err := json.Unmarshal(config, &c); err != nil {
		return nil, fmt.Errorf("cannot parse config.json: %w", err)
	}
	heads := c.NumAttentionHeads
	headDim := c.HiddenSize / heads
	kvHeads := heads
	if c.NumKeyValueHeads != nil {
		kvHeads = *c.NumKeyValueHeads
	}
	theta, partial, maxPos := 10000.0, 1.0, 131072
	if c.RopeTheta != nil {
		theta = *c.RopeTheta
	}
	if c.PartialRotaryFactor != nil {
		partial = *c.PartialRotaryFactor
	}
	if c.MaxPositionEmbeddings != nil {
		maxPos = *c.MaxPositionEmbeddings
	}
	if err := nn.CheckHeads(heads, kvHeads, headDim); err != nil {
		return nil, err
	}
	ropeDim := int(float64(headDim) * partial)
	if ropeDim < 2 || ropeDim > headDim {
		return nil, fmt.Errorf("partial_rotary_factor %v gives %d rotary dimensions of %d", partial, ropeDim, headDim)
	}
	rope, err := newRoPE(&c, w, ropeDim, theta, maxPos)
	if err != nil {
		return nil, err
	}
	m := &Model{eps: float32(c.RMSNormEps), context: maxPos}
	hidden, scale := c.HiddenSize, float32(math.Pow(float64(headDim), -0.5))
	for i := range c.NumHiddenLayers {
		p := fmt.Sprintf("model.layers.%d.", i)
		m.layers = append(m.layers, &block{
			attn: &attention{
				qkv:   w.Linear(p+"self_attn.qkv_proj", hidden, (heads+2*kvHeads)*headDim, false),
				o:     w.Linear(p+"self_attn.o_proj", heads*headDim, hidden, false),
				heads: heads, kvHeads: kvHeads, headDim: headDim, scale: scale, rope: rope,
			},
			mlp: &mlp{
				gateUp: w.Linear(p+"mlp.gate_up_proj", hidden, 2*c.IntermediateSize, false),
				down:   w.Linear(p+"mlp.down_proj", c.IntermediateSize, hidden, false),
			},
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
	m.head = w.Head(m.embed, hidden, c.VocabSize, c.TieWordEmbeddings)
	return m, w.Finish()
}
