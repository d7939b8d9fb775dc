// Package gemma3 is mlx_lm/models/gemma3_text.py of mlx-lm 0.32.2: every
// sliding_window_pattern-th layer is global (rope_theta with rope_scaling),
// the others slide over sliding_window tokens (rope_local_base_freq);
// 1+weight RMSNorms around attention and MLP, q/k norms, embeddings scaled by
// sqrt(hidden) rounded to bfloat16, gelu_approx, and lm_head tied when the
// checkpoint has none. Op for op, so that logits are bit-identical to
// mlx-lm's (DESIGN.md §6, L1).
package gemma3

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models/nn"
)

// Config is gemma3_text.py's ModelArgs.
type Config struct {
	HiddenSize            int            `json:"hidden_size"`
	NumHiddenLayers       int            `json:"num_hidden_layers"`
	IntermediateSize      int            `json:"intermediate_size"`
	NumAttentionHeads     int            `json:"num_attention_heads"`
	HeadDim               *int           `json:"head_dim"`
	RMSNormEps            *float64       `json:"rms_norm_eps"`
	VocabSize             int            `json:"vocab_size"`
	NumKeyValueHeads      *int           `json:"num_key_value_heads"`
	RopeTheta             *float64       `json:"rope_theta"`
	RopeLocalBaseFreq     *float64       `json:"rope_local_base_freq"`
	QueryPreAttnScalar    *float64       `json:"query_pre_attn_scalar"`
	SlidingWindow         *int           `json:"sliding_window"`
	SlidingWindowPattern  *int           `json:"sliding_window_pattern"`
	MaxPositionEmbeddings *int           `json:"max_position_embeddings"`
	RopeScaling           nn.RopeScaling `json:"rope_scaling"`
}

type attention struct {
	qkv            *nn.Projections
	o              *nn.Linear
	qNorm, kNorm   *mlx.Array
	eps            float32
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
	queries = mlx.RMSNorm(queries, a.qNorm, a.eps)
	keys = mlx.RMSNorm(keys, a.kNorm, a.eps)
	// rope at the cache's offset, update_and_fetch, attention, and the heads
	// back to [B, L, heads*dim]
	return a.o.Apply(kv.RoPEAttention(c, a.rope, queries, keys, values, a.scale, mask))
}

type mlp struct {
	gateUp *nn.Projections
	down   *nn.Linear
}

func (m *mlp) apply(x *mlx.Array) *mlx.Array {
	p := m.gateUp.Apply(x)
	return m.down.Apply(mlx.Multiply(mlx.GeluApprox(p[0]), p[1]))
}

type block struct {
	attn                    *attention
	mlp                     *mlp
	inputNorm, postAttnNorm *mlx.Array
	preFFNorm, postFFNorm   *mlx.Array
	eps                     float32
}

func (b *block) apply(x *mlx.Array, mask kv.Mask, c kv.Cache) *mlx.Array {
	r := b.attn.apply(mlx.RMSNorm(x, b.inputNorm, b.eps), mask, c)
	h := clipResidual(x, mlx.RMSNorm(r, b.postAttnNorm, b.eps))
	r = b.mlp.apply(mlx.RMSNorm(h, b.preFFNorm, b.eps))
	return clipResidual(h, mlx.RMSNorm(r, b.postFFNorm, b.eps))
}

// clipResidual is gemma3's residual add: plain for bfloat16 and float32,
// computed in float32 and clipped to the float16 range for float16.
func clipResidual(x, y *mlx.Array) *mlx.Array {
	if x.Dtype() != mlx.Float16 {
		return mlx.Add(x, y)
	}
	bound := float32(65504)
	s := mlx.Add(mlx.AsType(x, mlx.Float32), mlx.AsType(y, mlx.Float32))
	s = mlx.Clip(s, mlx.Scalar(-bound, mlx.Float32), mlx.Scalar(bound, mlx.Float32))
	return mlx.AsType(s, mlx.Float16)
}

// Model is gemma3_text.py's Model (Gemma3Model and the lm head).
type Model struct {
	contextLength int
	embed         *nn.Embedding
	embedScale    *mlx.Array // sqrt(hidden) as bfloat16
	layers        []*block
	norm          *mlx.Array
	eps           float32
	head          *nn.Head
	sliding       []bool // per layer: not every pattern-th
	pattern       int
	window        int
}

// Forward implements nn.Decoder: the global layers' mask from the first
// global layer's cache, the sliding one from layer 0's.
func (m *Model) Forward(tokens *mlx.Array, caches []kv.Cache) *mlx.Array {
	h := m.embed.Apply(tokens)
	h = mlx.Multiply(h, mlx.AsType(m.embedScale, h.Dtype()))
	n := h.Dim(1)
	global := kv.AttentionMask(n, kv.At(caches, m.pattern-1), 0)
	var sliding kv.Mask
	if m.pattern > 1 {
		sliding = kv.AttentionMask(n, kv.At(caches, 0), m.window)
	}
	for i, l := range m.layers {
		mask := global
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
// layers, growable for global ones; mlx-lm ignores --max-kv-size here.
func (m *Model) NewCaches(kv.Options) []kv.Cache { return nn.SlidingCaches(m.sliding, m.window) }

// Facts implements nn.Decoder.
func (m *Model) Facts() nn.Facts {
	return nn.Facts{Layers: len(m.layers), ContextLength: m.contextLength, Dtype: m.embed.Dtype().String()}
}

func intOr(p *int, def int) int {
	if p != nil {
		return *p
	}
	return def
}

func floatOr(p *float64, def float64) float64 {
	if p != nil {
		return *p
	}
	return def
}

// New builds the model from config.json and the weights.
func New(config []byte, w *nn.Weights) (nn.Decoder, error) {
	var c Config
	if err := json.Unmarshal(config, &c); err != nil {
		return nil, fmt.Errorf("cannot parse config.json: %w", err)
	}
	headDim, kvHeads := intOr(c.HeadDim, 256), intOr(c.NumKeyValueHeads, 1)
	m := &Model{contextLength: intOr(c.MaxPositionEmbeddings, 32768), eps: float32(floatOr(c.RMSNormEps, 1e-6)),
		pattern: intOr(c.SlidingWindowPattern, 6), window: intOr(c.SlidingWindow, 512)}
	if m.pattern > c.NumHiddenLayers {
		return nil, fmt.Errorf("sliding_window_pattern %d exceeds the %d layers", m.pattern, c.NumHiddenLayers)
	}
	if err := nn.CheckHeads(c.NumAttentionHeads, kvHeads, headDim); err != nil {
		return nil, err
	}
	global, err := nn.NewRoPE(w, headDim, floatOr(c.RopeTheta, 1000000), false, c.RopeScaling)
	if err != nil {
		return nil, err
	}
	local, err := nn.NewRoPE(w, headDim, floatOr(c.RopeLocalBaseFreq, 10000), false, nil)
	if err != nil {
		return nil, err
	}
	// Gemma's RMSNorm scales by 1 + weight. llama.cpp's converter stores the
	// norms of a GGUF file with the 1 added already.
	norm := func(name string, dims int) *mlx.Array {
		v := w.Get(name, dims)
		if v == nil || w.GGUF {
			return v
		}
		return w.Keep(mlx.Add(mlx.ScalarLike(1, v), v))
	}
	hidden := c.HiddenSize
	scale := float32(math.Pow(floatOr(c.QueryPreAttnScalar, 256), -0.5))
	for i := range c.NumHiddenLayers {
		p := fmt.Sprintf("model.layers.%d.", i)
		sliding := (i+1)%m.pattern != 0
		rope := global
		if sliding {
			rope = local
		}
		m.layers = append(m.layers, &block{
			attn: &attention{
				qkv:   w.QKV(p+"self_attn.", hidden, c.NumAttentionHeads*headDim, kvHeads*headDim, false),
				o:     w.Linear(p+"self_attn.o_proj", c.NumAttentionHeads*headDim, hidden, false),
				qNorm: norm(p+"self_attn.q_norm.weight", headDim),
				kNorm: norm(p+"self_attn.k_norm.weight", headDim),
				eps:   m.eps, heads: c.NumAttentionHeads, kvHeads: kvHeads, scale: scale, rope: rope,
			},
			mlp: &mlp{
				gateUp: w.Projections([]string{p + "mlp.gate_proj", p + "mlp.up_proj"}, hidden,
					[]int{c.IntermediateSize, c.IntermediateSize}, false),
				down: w.Linear(p+"mlp.down_proj", c.IntermediateSize, hidden, false),
			},
			inputNorm:    norm(p+"input_layernorm.weight", hidden),
			postAttnNorm: norm(p+"post_attention_layernorm.weight", hidden),
			preFFNorm:    norm(p+"pre_feedforward_layernorm.weight", hidden),
			postFFNorm:   norm(p+"post_feedforward_layernorm.weight", hidden),
			eps:          m.eps,
		})
		m.sliding = append(m.sliding, sliding)
		if w.Err() != nil {
			return nil, w.Err()
		}
	}
	// sanitize: no lm_head.weight means tied embeddings.
	tied := !w.Has("lm_head.weight")
	m.embedScale = w.Keep(mlx.Scalar(float32(math.Sqrt(float64(hidden))), mlx.BFloat16))
	m.embed = w.Embedding("model.embed_tokens", c.VocabSize, hidden)
	m.norm = norm("model.norm.weight", hidden)
	m.head = w.Head(m.embed, hidden, c.VocabSize, tied)
	return m, w.Finish()
}
