// Package gpt_oss is mlx_lm/models/gpt_oss.py of mlx-lm 0.32.2: biased
// q/k/v/o projections with per-head attention sinks, layers alternating
// between a sliding window and full attention, and a mixture of experts in
// every layer (a biased router's top-k, softmax over the chosen logits,
// biased experts through SwitchGLU with the SwigluOAI activation). Op for op,
// so that logits are bit-identical to mlx-lm's (DESIGN.md §6, L1).
package gpt_oss

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models/nn"
)

// Config is gpt_oss.py's ModelArgs; the pointers have its defaults.
type Config struct {
	NumHiddenLayers   *int           `json:"num_hidden_layers"`
	NumLocalExperts   *int           `json:"num_local_experts"`
	NumExpertsPerTok  *int           `json:"num_experts_per_tok"`
	VocabSize         *int           `json:"vocab_size"`
	RMSNormEps        *float64       `json:"rms_norm_eps"`
	HiddenSize        *int           `json:"hidden_size"`
	IntermediateSize  *int           `json:"intermediate_size"`
	HeadDim           *int           `json:"head_dim"`
	NumAttentionHeads *int           `json:"num_attention_heads"`
	NumKeyValueHeads  *int           `json:"num_key_value_heads"`
	SlidingWindow     *int           `json:"sliding_window"`
	RopeTheta         *float64       `json:"rope_theta"`
	RopeScaling       nn.RopeScaling `json:"rope_scaling"`
	LayerTypes        []string       `json:"layer_types"`
	// read for Facts only: gpt_oss.py does not use it
	MaxPositionEmbeddings *int `json:"max_position_embeddings"`
}

type attention struct {
	q, k, v, o     *nn.Linear
	sinks          *mlx.Array
	heads, kvHeads int
	headDim        int
	scale          float32
	rope           *nn.RoPE
}

func (a *attention) apply(x *mlx.Array, mask kv.Mask, c kv.Cache) *mlx.Array {
	b, l := x.Dim(0), x.Dim(1)
	q := mlx.SwapAxes(mlx.Reshape(a.q.Apply(x), b, l, -1, a.headDim), 1, 2)
	k := mlx.SwapAxes(mlx.Reshape(a.k.Apply(x), b, l, -1, a.headDim), 1, 2)
	v := mlx.SwapAxes(mlx.Reshape(a.v.Apply(x), b, l, -1, a.headDim), 1, 2)
	at := kv.PositionOf(c)
	q = a.rope.At(q, at)
	k = a.rope.At(k, at)
	out := kv.AttentionSinks(c, q, k, v, a.scale, mask, a.sinks)
	return a.o.Apply(mlx.Reshape(mlx.SwapAxes(out, 1, 2), b, l, -1))
}

// moe is MLPBlock: the router's top-k logits, softmaxed, weigh the experts'
// outputs.
type moe struct {
	router  *nn.Linear
	experts *nn.SwitchGLU
	topK    int
}

func (m *moe) apply(x *mlx.Array) *mlx.Array {
	g := m.router.Apply(x)
	// mlx_topk: argpartition, the last k, their values
	inds := mlx.Argpartition(g, -m.topK, -1)
	sh := inds.Shape()
	start := make([]int, len(sh))
	start[len(sh)-1] = sh[len(sh)-1] - m.topK
	inds = mlx.StopGradient(mlx.Slice(inds, start, sh))
	weights := mlx.Softmax(mlx.TakeAlongAxis(g, inds, -1), []int{-1}, true)
	y := m.experts.Apply(x, inds)
	y = mlx.Multiply(y, mlx.ExpandDims(weights, -1))
	return mlx.Sum(y, []int{-2}, false)
}

// swigluOAI is activations.swiglu_oai with alpha 1.702 and limit 7: the gate
// clipped from above only, 1 added to the linear part.
func swigluOAI(x, gate *mlx.Array) *mlx.Array {
	const alpha, limit = 1.702, 7.0
	gate = mlx.Minimum(gate, mlx.ScalarLike(limit, gate))
	x = mlx.Clip(x, mlx.ScalarLike(-limit, x), mlx.ScalarLike(limit, x))
	glu := mlx.Multiply(gate, mlx.Sigmoid(mlx.Multiply(mlx.ScalarLike(alpha, gate), gate)))
	return mlx.Multiply(mlx.Add(x, mlx.ScalarLike(1, x)), glu)
}

type block struct {
	attn                    *attention
	mlp                     *moe
	inputNorm, postAttnNorm *mlx.Array
	eps                     float32
}

func (b *block) apply(x *mlx.Array, mask kv.Mask, c kv.Cache) *mlx.Array {
	h := mlx.Add(x, b.attn.apply(mlx.RMSNorm(x, b.inputNorm, b.eps), mask, c))
	return mlx.Add(h, b.mlp.apply(mlx.RMSNorm(h, b.postAttnNorm, b.eps)))
}

// Model is gpt_oss.py's Model (GptOssMoeModel and the lm head).
type Model struct {
	contextLength int
	embed         *nn.Embedding
	layers        []*block
	norm          *mlx.Array
	eps           float32
	lmHead        *nn.Linear
	sliding       []bool
	swaIdx, gaIdx int // the first sliding and full layers, whose caches make the masks
	window        int
}

// Forward implements nn.Decoder.
func (m *Model) Forward(tokens *mlx.Array, caches []kv.Cache) *mlx.Array {
	x := m.embed.Apply(tokens)
	n := x.Dim(1)
	full := kv.AttentionMask(n, kv.At(caches, m.gaIdx), 0)
	swa := kv.AttentionMask(n, kv.At(caches, m.swaIdx), m.window)
	for i, l := range m.layers {
		mask := full
		if m.sliding[i] {
			mask = swa
		}
		x = l.apply(x, mask, kv.At(caches, i))
	}
	return mlx.RMSNorm(x, m.norm, m.eps)
}

// Unembed implements nn.Decoder: lm_head is never tied.
func (m *Model) Unembed(h *mlx.Array) *mlx.Array { return m.lmHead.Apply(h) }

// NewCaches is Model.make_cache: a rotating cache of the window (keep 0)
// for sliding layers, growable for full ones; --max-kv-size is ignored.
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

// maxExperts bounds num_local_experts before any weight is read.
const maxExperts = 1 << 16

// spec is what New reads of config.json: ModelArgs with its defaults,
// checked.
type spec struct {
	layers, experts, topK         int
	vocab, hidden, width          int
	headDim, heads, kvHeads       int
	eps, theta                    float64
	types                         []string
	window, swaIdx, gaIdx, ctxLen int
	rope                          nn.RopeScaling
}

// maxDim bounds every width before any array is made.
const maxDim = 1 << 20

// parse reads and checks config.json; it makes no arrays.
func parse(config []byte) (*spec, error) {
	var c Config
	if err := json.Unmarshal(config, &c); err != nil {
		return nil, fmt.Errorf("cannot parse config.json: %w", err)
	}
	s := &spec{
		layers: intOr(c.NumHiddenLayers, 36), experts: intOr(c.NumLocalExperts, 128), topK: intOr(c.NumExpertsPerTok, 4),
		vocab: intOr(c.VocabSize, 201088), hidden: intOr(c.HiddenSize, 2880), width: intOr(c.IntermediateSize, 2880),
		headDim: intOr(c.HeadDim, 64), heads: intOr(c.NumAttentionHeads, 64), kvHeads: intOr(c.NumKeyValueHeads, 8),
		eps: 1e-5, theta: 150000, window: intOr(c.SlidingWindow, 128), ctxLen: intOr(c.MaxPositionEmbeddings, 0),
		rope: c.RopeScaling,
	}
	if c.RMSNormEps != nil {
		s.eps = *c.RMSNormEps
	}
	if c.RopeTheta != nil {
		s.theta = *c.RopeTheta
	}
	for _, d := range []struct {
		name string
		v    int
	}{
		{"num_hidden_layers", s.layers}, {"vocab_size", s.vocab}, {"hidden_size", s.hidden}, {"intermediate_size", s.width},
		{"head_dim", s.headDim}, {"num_attention_heads", s.heads}, {"num_key_value_heads", s.kvHeads}, {"sliding_window", s.window},
	} {
		if d.v < 1 || d.v > maxDim {
			return nil, fmt.Errorf("%s = %d, want 1..%d", d.name, d.v, maxDim)
		}
	}
	if s.layers > 4096 {
		return nil, fmt.Errorf("num_hidden_layers = %d, want 1..4096", s.layers)
	}
	if s.experts < 1 || s.experts > maxExperts {
		return nil, fmt.Errorf("num_local_experts = %d, want 1..%d", s.experts, maxExperts)
	}
	if s.topK < 1 || s.topK > s.experts {
		return nil, fmt.Errorf("num_experts_per_tok = %d, want 1..num_local_experts (%d)", s.topK, s.experts)
	}
	if err := nn.CheckHeads(s.heads, s.kvHeads, s.headDim); err != nil {
		return nil, err
	}
	s.types = c.LayerTypes
	if s.types == nil {
		s.types = slices.Repeat([]string{"sliding_attention", "full_attention"}, s.layers/2)
	}
	s.swaIdx, s.gaIdx = slices.Index(s.types, "sliding_attention"), slices.Index(s.types, "full_attention")
	// gpt_oss.py zips the layers with layer_types and looks both kinds up.
	if len(s.types) != s.layers || s.swaIdx < 0 || s.gaIdx < 0 {
		return nil, fmt.Errorf("gpt_oss needs layer_types of %d entries with both sliding_attention and full_attention layers, got %d", s.layers, len(s.types))
	}
	return s, nil
}

// New builds the model from config.json and the weights.
func New(config []byte, w *nn.Weights) (nn.Decoder, error) {
	s, err := parse(config)
	if err != nil {
		return nil, err
	}
	layers, experts, topK, vocab, hidden, width := s.layers, s.experts, s.topK, s.vocab, s.hidden, s.width
	headDim, heads, kvHeads, types := s.headDim, s.heads, s.kvHeads, s.types
	m := &Model{contextLength: s.ctxLen, eps: float32(s.eps), window: s.window, swaIdx: s.swaIdx, gaIdx: s.gaIdx}
	// sanitize: a checkpoint mlx-lm has converted has the experts split;
	// the Hugging Face layout (experts.gate_up_proj, mxfp4 _blocks) is not
	// read here.
	if hf := "model.layers.0.mlp.experts.gate_up_proj"; w.Has(hf) || w.Has(hf+"_blocks") {
		return nil, fmt.Errorf("gpt_oss weights in the Hugging Face layout (experts.gate_up_proj) are not supported: convert them with mlx_lm.convert first")
	}
	rope, err := nn.NewRoPE(w, headDim, s.theta, false, s.rope)
	if err != nil {
		return nil, err
	}
	scale := float32(1 / math.Sqrt(float64(headDim)))
	for i := range layers {
		p := fmt.Sprintf("model.layers.%d.", i)
		m.layers = append(m.layers, &block{
			attn: &attention{
				q:     w.Linear(p+"self_attn.q_proj", hidden, heads*headDim, true),
				k:     w.Linear(p+"self_attn.k_proj", hidden, kvHeads*headDim, true),
				v:     w.Linear(p+"self_attn.v_proj", hidden, kvHeads*headDim, true),
				o:     w.Linear(p+"self_attn.o_proj", heads*headDim, hidden, true),
				sinks: w.Get(p+"self_attn.sinks", heads),
				heads: heads, kvHeads: kvHeads, headDim: headDim, scale: scale, rope: rope,
			},
			mlp: &moe{
				router:  w.Linear(p+"mlp.router", hidden, experts, true),
				experts: w.SwitchGLUWith(p+"mlp.experts.", hidden, width, experts, true, swigluOAI),
				topK:    topK,
			},
			inputNorm:    w.Get(p+"input_layernorm.weight", hidden),
			postAttnNorm: w.Get(p+"post_attention_layernorm.weight", hidden),
			eps:          m.eps,
		})
		m.sliding = append(m.sliding, types[i] != "full_attention")
		if w.Err() != nil {
			return nil, w.Err()
		}
	}
	m.embed = w.Embedding("model.embed_tokens", vocab, hidden)
	m.norm = w.Get("model.norm.weight", hidden)
	m.lmHead = w.Linear("lm_head", hidden, vocab, false)
	return m, w.Finish()
}
