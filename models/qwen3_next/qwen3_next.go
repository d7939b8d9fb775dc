// Package qwen3_next is mlx_lm/models/qwen3_next.py of mlx-lm 0.32.2: a
// hybrid decoder whose layers are Gated DeltaNet linear attention (a
// short causal convolution and a recurrent state, nn.GatedDeltaUpdate)
// except every full_attention_interval-th, which is gated full attention
// (q_proj doubled into queries and a sigmoid output gate, per-head q/k
// RMSNorm, partial RoPE); feed-forward blocks dense or sparse
// mixture-of-experts with a gated shared expert. Op for op so that logits
// are bit-identical to mlx-lm's (DESIGN.md §6, L1). qwen3_5 builds its
// model from the pieces exported here, as qwen3_5.py imports them.
//
// A linear layer's cache is a kv.Arrays of two slots (the convolution's
// last inputs, the recurrent state), which cannot be trimmed; a decode
// batch's rows run that part one row at a time (kv.EachRow).
package qwen3_next

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

// Config is qwen3_next.py's ModelArgs: the fields without a default there
// are required here.
type Config struct {
	HiddenSize                   int            `json:"hidden_size"`
	NumHiddenLayers              int            `json:"num_hidden_layers"`
	IntermediateSize             int            `json:"intermediate_size"`
	NumAttentionHeads            int            `json:"num_attention_heads"`
	LinearNumValueHeads          *int           `json:"linear_num_value_heads"`
	LinearNumKeyHeads            *int           `json:"linear_num_key_heads"`
	LinearKeyHeadDim             *int           `json:"linear_key_head_dim"`
	LinearValueHeadDim           *int           `json:"linear_value_head_dim"`
	LinearConvKernelDim          *int           `json:"linear_conv_kernel_dim"`
	NumExperts                   *int           `json:"num_experts"`
	NumExpertsPerTok             *int           `json:"num_experts_per_tok"`
	DecoderSparseStep            *int           `json:"decoder_sparse_step"`
	SharedExpertIntermediateSize *int           `json:"shared_expert_intermediate_size"`
	MLPOnlyLayers                []int          `json:"mlp_only_layers"`
	MoEIntermediateSize          *int           `json:"moe_intermediate_size"`
	RMSNormEps                   float64        `json:"rms_norm_eps"`
	VocabSize                    int            `json:"vocab_size"`
	NumKeyValueHeads             *int           `json:"num_key_value_heads"`
	RopeTheta                    *float64       `json:"rope_theta"`
	PartialRotaryFactor          *float64       `json:"partial_rotary_factor"`
	MaxPositionEmbeddings        *int           `json:"max_position_embeddings"`
	HeadDim                      *int           `json:"head_dim"`
	NormTopKProb                 bool           `json:"norm_topk_prob"`
	TieWordEmbeddings            bool           `json:"tie_word_embeddings"`
	AttentionBias                bool           `json:"attention_bias"`
	RopeScaling                  nn.RopeScaling `json:"rope_scaling"`
	FullAttentionInterval        int            `json:"full_attention_interval"`
}

// Shape is what the layers shared with qwen3_5 read of either config.
type Shape struct {
	Hidden, Heads, KVHeads, HeadDim, RopeDims int
	RopeTheta                                 float64
	RopeScaling                               nn.RopeScaling
	AttentionBias                             bool
	Eps                                       float32
	// Gated DeltaNet
	VHeads, KHeads, KDim, VDim, ConvKernel int
	// Mixture of experts
	Experts, TopK, MoEWidth, SharedWidth int
	NormTopK                             bool
	FullAttentionInterval                int
}

// Linear reports whether layer i is a Gated DeltaNet layer
// (DecoderLayer.is_linear).
func (s *Shape) Linear(i int) bool { return (i+1)%s.FullAttentionInterval != 0 }

// maxHeads bounds head counts and widths read from a config before any
// weight is read.
const maxHeads = 1 << 16

// Check refuses shapes no layer can take, as the Python modules' asserts
// and divisions would.
func (s *Shape) Check() error {
	if err := nn.CheckHeads(s.Heads, s.KVHeads, s.HeadDim); err != nil {
		return err
	}
	for _, v := range []int{s.VHeads, s.KHeads, s.KDim, s.VDim} {
		if v <= 0 || v > maxHeads {
			return fmt.Errorf("linear attention heads and head dims must be in 1..%d", maxHeads)
		}
	}
	if s.VHeads%s.KHeads != 0 {
		return fmt.Errorf("num_v_heads (%d) must be divisible by num_k_heads (%d)", s.VHeads, s.KHeads)
	}
	if s.ConvKernel < 2 || s.ConvKernel > 64 {
		return fmt.Errorf("linear_conv_kernel_dim = %d, want 2..64", s.ConvKernel)
	}
	if s.FullAttentionInterval <= 0 {
		return fmt.Errorf("full_attention_interval = %d, want > 0", s.FullAttentionInterval)
	}
	if s.RopeDims < 0 || s.RopeDims > s.HeadDim {
		return fmt.Errorf("partial rotary dims %d outside the head dim %d", s.RopeDims, s.HeadDim)
	}
	if s.Experts < 0 || s.Experts > maxHeads {
		return fmt.Errorf("num_experts = %d, want 0..%d", s.Experts, maxHeads)
	}
	if s.Experts > 0 {
		if s.TopK < 1 || s.TopK > s.Experts {
			return fmt.Errorf("num_experts_per_tok = %d, want 1..num_experts (%d)", s.TopK, s.Experts)
		}
		if s.MoEWidth <= 0 || s.MoEWidth > 1<<20 || s.SharedWidth <= 0 || s.SharedWidth > 1<<20 {
			return fmt.Errorf("moe_intermediate_size and shared_expert_intermediate_size must be in 1..%d", 1<<20)
		}
	}
	return nil
}

// RMSNormGated is Qwen3NextRMSNormGated with a gate: rms_norm(x, weight)
// through precise_swiglu, (silu(float32(gate)) * float32(norm)) in x's dtype.
type RMSNormGated struct {
	weight *mlx.Array
	eps    float32
}

// Apply is RMSNormGated.__call__(x, gate).
func (n *RMSNormGated) Apply(x, gate *mlx.Array) *mlx.Array {
	normed := mlx.RMSNorm(x, n.weight, n.eps)
	g := mlx.AsType(gate, mlx.Float32)
	g = mlx.Multiply(g, mlx.Sigmoid(g)) // nn.silu
	return mlx.AsType(mlx.Multiply(g, mlx.AsType(normed, mlx.Float32)), x.Dtype())
}

// Attention is Qwen3NextAttention.
type Attention struct {
	qkv            *nn.Projections
	o              *nn.Linear
	qNorm, kNorm   *mlx.Array
	eps            float32
	heads, kvHeads int
	scale          float32
	rope           *nn.RoPE
}

// Apply is Qwen3NextAttention.__call__.
func (a *Attention) Apply(x *mlx.Array, mask kv.Mask, c kv.Cache) *mlx.Array {
	b, l := x.Dim(0), x.Dim(1)
	p := a.qkv.Apply(x)
	qg := mlx.Split(mlx.Reshape(p[0], b, l, a.heads, -1), 2, -1)
	queries, gate := qg[0], mlx.Reshape(qg[1], b, l, -1)
	queries = mlx.Transpose(mlx.RMSNorm(queries, a.qNorm, a.eps), 0, 2, 1, 3)
	keys := mlx.Transpose(mlx.RMSNorm(mlx.Reshape(p[1], b, l, a.kvHeads, -1), a.kNorm, a.eps), 0, 2, 1, 3)
	values := mlx.Transpose(mlx.Reshape(p[2], b, l, a.kvHeads, -1), 0, 2, 1, 3)
	out := kv.RoPEAttention(c, a.rope, queries, keys, values, a.scale, mask)
	return a.o.Apply(mlx.Multiply(out, mlx.Sigmoid(gate)))
}

// NewAttention takes a layer's self_attn under path (ending in "."),
// its norms shifted by one when plusOne (sanitize).
func NewAttention(w *nn.Weights, path string, s *Shape, rope *nn.RoPE, plusOne bool) *Attention {
	qd, kvd := s.Heads*s.HeadDim, s.KVHeads*s.HeadDim
	return &Attention{
		qkv:   w.QKV(path, s.Hidden, 2*qd, kvd, s.AttentionBias),
		o:     w.Linear(path+"o_proj", qd, s.Hidden, s.AttentionBias),
		qNorm: NormWeight(w, path+"q_norm.weight", s.HeadDim, plusOne),
		kNorm: NormWeight(w, path+"k_norm.weight", s.HeadDim, plusOne),
		eps:   s.Eps, heads: s.Heads, kvHeads: s.KVHeads,
		scale: float32(math.Pow(float64(s.HeadDim), -0.5)), rope: rope,
	}
}

// NewRoPE is the attention's initialize_rope over int(head_dim *
// partial_rotary_factor) dims.
func NewRoPE(w *nn.Weights, s *Shape) (*nn.RoPE, error) {
	return nn.NewRoPE(w, s.RopeDims, s.RopeTheta, false, s.RopeScaling)
}

// GatedDeltaNet is Qwen3NextGatedDeltaNet and qwen3_5's GatedDeltaNet: the
// projections (in_proj_qkvz and in_proj_ba here, four separate ones in
// qwen3_5) give q, k, v, the output gate z, b and a; the rest is one code.
type GatedDeltaNet struct {
	// project is the layer's input projections: mixed q|k|v [B, S, conv
	// dim], z [B, S, Hv, Dv], b and a [B, S, Hv].
	project                    func(x *mlx.Array) (qkv, z, b, a *mlx.Array)
	conv                       *mlx.Array // [conv dim, kernel, 1]
	dtBias, aLog               *mlx.Array
	norm                       *RMSNormGated
	out                        *nn.Linear
	kHeads, vHeads, kDim, vDim int
	keyDim, convDim, kernel    int
}

// Apply is GatedDeltaNet.__call__ without a mask (mlx-lm's ArraysCache
// makes none for a single sequence).
func (g *GatedDeltaNet) Apply(x *mlx.Array, c kv.Cache) *mlx.Array {
	b, s := x.Dim(0), x.Dim(1)
	qkv, z, beta, a := g.project(x)
	out := kv.EachRow(c, g.recur, qkv, a, beta)
	out = g.norm.Apply(out, z)
	return g.out.Apply(mlx.Reshape(out, b, s, -1))
}

// recur is the part of __call__ that reads and writes the cache: the
// causal convolution over the cached inputs and the new ones, then the
// gated delta recurrence from the cached state.
func (g *GatedDeltaNet) recur(c kv.Cache, xs ...*mlx.Array) *mlx.Array {
	qkv, a, beta := xs[0], xs[1], xs[2]
	b, s := qkv.Dim(0), qkv.Dim(1)
	rc, _ := c.(kv.Recurrent)
	if c != nil && rc == nil {
		return mlx.ErrorArray(fmt.Errorf("a linear attention layer cannot keep its state in a %T", c))
	}
	var convState, state *mlx.Array
	if rc != nil {
		convState, state = rc.Get(0), rc.Get(1)
	}
	if convState == nil {
		convState = mlx.Zeros(qkv.Dtype(), b, g.kernel-1, g.convDim)
	}
	convIn := mlx.Concatenate([]*mlx.Array{convState, qkv}, 1)
	if rc != nil {
		n := convIn.Dim(1)
		rc.Set(0, mlx.Contiguous(mlx.Slice(convIn, []int{0, n - (g.kernel - 1), 0}, []int{b, n, g.convDim})))
	}
	convOut := mlx.Conv1d(convIn, g.conv, 1, 0, 1, g.convDim)
	convOut = mlx.Multiply(convOut, mlx.Sigmoid(convOut)) // nn.silu
	parts := mlx.SplitAt(convOut, []int{g.keyDim, 2 * g.keyDim}, -1)
	q := mlx.Reshape(parts[0], b, s, g.kHeads, g.kDim)
	k := mlx.Reshape(parts[1], b, s, g.kHeads, g.kDim)
	v := mlx.Reshape(parts[2], b, s, g.vHeads, g.vDim)
	q, k = nn.NormalizeQK(q, k, math.Pow(float64(g.kDim), -0.5), 1e-6)
	out, state := nn.GatedDeltaUpdate(q, k, v, a, beta, g.aLog, g.dtBias, state)
	if rc != nil {
		rc.Set(1, state)
		rc.Advance(s)
	}
	return out
}

// NewGatedDeltaNet takes what both layouts share under path (ending in
// "."); project gives the layer's projections.
func NewGatedDeltaNet(w *nn.Weights, path string, s *Shape, project func(x *mlx.Array) (qkv, z, b, a *mlx.Array)) *GatedDeltaNet {
	keyDim, valueDim := s.KHeads*s.KDim, s.VHeads*s.VDim
	convDim := 2*keyDim + valueDim
	return &GatedDeltaNet{
		project: project,
		conv:    w.Get(path+"conv1d.weight", convDim, s.ConvKernel, 1),
		dtBias:  w.Get(path+"dt_bias", s.VHeads),
		aLog:    w.Get(path+"A_log", s.VHeads),
		norm:    &RMSNormGated{weight: w.Get(path+"norm.weight", s.VDim), eps: s.Eps},
		out:     w.Linear(path+"out_proj", valueDim, s.Hidden, false),
		kHeads:  s.KHeads, vHeads: s.VHeads, kDim: s.KDim, vDim: s.VDim,
		keyDim: keyDim, convDim: convDim, kernel: s.ConvKernel,
	}
}

// newLinearAttention is Qwen3NextGatedDeltaNet: in_proj_qkvz and
// in_proj_ba grouped by key head, regrouped by fix_query_key_value_ordering.
func newLinearAttention(w *nn.Weights, path string, s *Shape) *GatedDeltaNet {
	keyDim, valueDim := s.KHeads*s.KDim, s.VHeads*s.VDim
	qkvz := w.Linear(path+"in_proj_qkvz", s.Hidden, 2*keyDim+2*valueDim, false)
	ba := w.Linear(path+"in_proj_ba", s.Hidden, 2*s.VHeads, false)
	nk, dn, nv, dv := s.KHeads, s.KDim, s.VHeads, s.VDim
	return NewGatedDeltaNet(w, path, s, func(x *mlx.Array) (qkv, z, b, a *mlx.Array) {
		bs, sl := x.Dim(0), x.Dim(1)
		mixed := mlx.Reshape(qkvz.Apply(x), bs, sl, nk, -1)
		mixedBA := mlx.Reshape(ba.Apply(x), bs, sl, nk, -1)
		p := mlx.SplitAt(mixed, []int{dn, 2 * dn, 2*dn + nv/nk*dv}, -1)
		q, k := p[0], p[1]
		v := mlx.Reshape(p[2], bs, sl, -1, dv)
		z = mlx.Reshape(p[3], bs, sl, -1, dv)
		pb := mlx.SplitAt(mixedBA, []int{nv / nk}, -1)
		b = mlx.Reshape(pb[0], bs, sl, nv)
		a = mlx.Reshape(pb[1], bs, sl, nv)
		qkv = mlx.Concatenate([]*mlx.Array{
			mlx.Reshape(q, bs, sl, -1), mlx.Reshape(k, bs, sl, -1), mlx.Reshape(v, bs, sl, -1),
		}, -1)
		return qkv, z, b, a
	})
}

// SparseMoE is Qwen3NextSparseMoeBlock: a softmax router over top-k
// experts (SwitchGLU) plus a shared expert behind a sigmoid gate.
type SparseMoE struct {
	gate       *nn.Linear
	switchMLP  *nn.SwitchGLU
	shared     *nn.MLP
	sharedGate *nn.Linear
	topK       int
	norm       bool
}

// Apply is Qwen3NextSparseMoeBlock.__call__.
func (m *SparseMoE) Apply(x *mlx.Array) *mlx.Array {
	gates := mlx.Softmax(m.gate.Apply(x), []int{-1}, true)
	k := m.topK
	inds := mlx.Argpartition(gates, -k, -1)
	sh := inds.Shape()
	start := make([]int, len(sh))
	start[len(sh)-1] = sh[len(sh)-1] - k
	inds = mlx.StopGradient(mlx.Slice(inds, start, sh))
	scores := mlx.TakeAlongAxis(gates, inds, -1)
	if m.norm {
		scores = mlx.Divide(scores, mlx.Sum(scores, []int{-1}, true))
	}
	y := m.switchMLP.Apply(x, inds)
	y = mlx.Sum(mlx.Multiply(y, mlx.ExpandDims(scores, -1)), []int{-2}, false)
	sharedY := mlx.Multiply(mlx.Sigmoid(m.sharedGate.Apply(x)), m.shared.Apply(x))
	return mlx.Add(y, sharedY)
}

// NewSparseMoE takes a layer's mlp under path (ending in ".").
func NewSparseMoE(w *nn.Weights, path string, s *Shape) *SparseMoE {
	return &SparseMoE{
		gate:       w.Linear(path+"gate", s.Hidden, s.Experts, false),
		switchMLP:  w.SwitchGLU(path+"switch_mlp.", s.Hidden, s.MoEWidth, s.Experts),
		shared:     w.MLP(path+"shared_expert.", s.Hidden, s.SharedWidth, false),
		sharedGate: w.Linear(path+"shared_expert_gate", s.Hidden, 1, false),
		topK:       s.TopK, norm: s.NormTopK,
	}
}

// FeedForward is a layer's mlp: nn.MLP (Qwen3NextMLP) or SparseMoE.
type FeedForward interface{ Apply(*mlx.Array) *mlx.Array }

// Layer is Qwen3NextDecoderLayer (qwen3_5's DecoderLayer): linear or
// full attention, then the feed-forward block, pre-norm residuals.
type Layer struct {
	Linear                  *GatedDeltaNet // nil on a full-attention layer
	Attn                    *Attention
	MLP                     FeedForward
	inputNorm, postAttnNorm *mlx.Array
	eps                     float32
}

// NewLayer takes the norms under path (ending in "."), shifted by one
// when plusOne (sanitize): the caller sets the attention and the
// feed-forward block.
func NewLayer(w *nn.Weights, path string, s *Shape, plusOne bool) *Layer {
	return &Layer{
		inputNorm:    NormWeight(w, path+"input_layernorm.weight", s.Hidden, plusOne),
		postAttnNorm: NormWeight(w, path+"post_attention_layernorm.weight", s.Hidden, plusOne),
		eps:          s.Eps,
	}
}

// Apply is DecoderLayer.__call__.
func (l *Layer) Apply(x *mlx.Array, mask kv.Mask, c kv.Cache) *mlx.Array {
	var r *mlx.Array
	if l.Linear != nil {
		r = l.Linear.Apply(mlx.RMSNorm(x, l.inputNorm, l.eps), c)
	} else {
		r = l.Attn.Apply(mlx.RMSNorm(x, l.inputNorm, l.eps), mask, c)
	}
	h := mlx.Add(x, r)
	return mlx.Add(h, l.MLP.Apply(mlx.RMSNorm(h, l.postAttnNorm, l.eps)))
}

// Model is Qwen3NextModel with the lm head (qwen3_5's TextModel too).
type Model struct {
	Shape         Shape
	ContextLength int
	Embed         *nn.Embedding
	Layers        []*Layer
	NormWeight    *mlx.Array
	Head          *nn.Head
	// Stage is the pipeline stage (nn/pipeline.go) when Layers holds only
	// this rank's run of the layers; nil for the whole model.
	Stage *nn.Stage
}

// Forward implements nn.Decoder: the full-attention layers' mask from the
// cache of layer full_attention_interval-1 (fa_idx); the linear layers
// need none (create_ssm_mask gives None for one sequence per cache). On a
// pipeline stage fa_idx is the rank's first full-attention layer (none on
// a rank of linear layers only, as pipeline() recomputes it), the hidden
// state is received before the layers and handed on after them, the send
// tied to the rank's last cache.
func (m *Model) Forward(tokens *mlx.Array, caches []kv.Cache) *mlx.Array {
	h := m.Embed.Apply(tokens)
	fa := m.Shape.FullAttentionInterval - 1
	if m.Stage != nil {
		fa = -1
		for i, l := range m.Layers {
			if l.Attn != nil {
				fa = i
				break
			}
		}
	}
	var faMask kv.Mask
	if fa >= 0 {
		faMask = kv.AttentionMask(h.Dim(1), kv.At(caches, fa), 0)
	}
	h = m.Stage.Enter(h)
	for i, l := range m.Layers {
		h = l.Apply(h, faMask, kv.At(caches, i))
	}
	h = m.Stage.Leave(h, kv.At(caches, len(m.Layers)-1))
	return mlx.RMSNorm(h, m.NormWeight, m.Shape.Eps)
}

// Unembed implements nn.Decoder.
func (m *Model) Unembed(h *mlx.Array) *mlx.Array { return m.Head.Apply(h) }

// NewCaches is make_cache: ArraysCache(2) for a linear layer, KVCache
// otherwise (--max-kv-size does not apply: the model's make_cache wins).
func (m *Model) NewCaches(kv.Options) []kv.Cache {
	out := make([]kv.Cache, len(m.Layers))
	for i, l := range m.Layers {
		if l.Linear != nil {
			out[i] = kv.NewArrays(2)
		} else {
			out[i] = kv.NewKVCache()
		}
	}
	return out
}

// Facts implements nn.Decoder.
func (m *Model) Facts() nn.Facts {
	return nn.Facts{Layers: len(m.Layers), ContextLength: m.ContextLength, Dtype: m.Embed.Dtype().String()}
}

func parse(config []byte) (Config, error) {
	c := Config{FullAttentionInterval: 4}
	if err := json.Unmarshal(config, &c); err != nil {
		return c, fmt.Errorf("cannot parse config.json: %w", err)
	}
	if c.LinearNumValueHeads == nil || c.LinearNumKeyHeads == nil || c.LinearKeyHeadDim == nil ||
		c.LinearValueHeadDim == nil || c.LinearConvKernelDim == nil || c.NumExperts == nil ||
		c.NumExpertsPerTok == nil || c.DecoderSparseStep == nil || c.SharedExpertIntermediateSize == nil ||
		c.MLPOnlyLayers == nil || c.MoEIntermediateSize == nil || c.NumKeyValueHeads == nil ||
		c.RopeTheta == nil || c.PartialRotaryFactor == nil || c.MaxPositionEmbeddings == nil || c.HeadDim == nil {
		return c, fmt.Errorf("qwen3_next needs linear_num_value_heads, linear_num_key_heads, linear_key_head_dim, " +
			"linear_value_head_dim, linear_conv_kernel_dim, num_experts, num_experts_per_tok, decoder_sparse_step, " +
			"shared_expert_intermediate_size, mlp_only_layers, moe_intermediate_size, num_key_value_heads, " +
			"rope_theta, partial_rotary_factor, max_position_embeddings and head_dim")
	}
	if *c.NumExperts > 0 && *c.DecoderSparseStep <= 0 {
		return c, fmt.Errorf("decoder_sparse_step = %d, want > 0", *c.DecoderSparseStep)
	}
	return c, nil
}

// shape is what the layers read of c (parse has checked the pointers).
func (c *Config) shape() Shape {
	return Shape{
		Hidden: c.HiddenSize, Heads: c.NumAttentionHeads, KVHeads: *c.NumKeyValueHeads, HeadDim: *c.HeadDim,
		RopeDims:  int(float64(*c.HeadDim) * *c.PartialRotaryFactor),
		RopeTheta: *c.RopeTheta, RopeScaling: c.RopeScaling, AttentionBias: c.AttentionBias,
		Eps:    float32(c.RMSNormEps),
		VHeads: *c.LinearNumValueHeads, KHeads: *c.LinearNumKeyHeads,
		KDim: *c.LinearKeyHeadDim, VDim: *c.LinearValueHeadDim, ConvKernel: *c.LinearConvKernelDim,
		Experts: *c.NumExperts, TopK: *c.NumExpertsPerTok,
		MoEWidth: *c.MoEIntermediateSize, SharedWidth: *c.SharedExpertIntermediateSize,
		NormTopK: c.NormTopKProb, FullAttentionInterval: c.FullAttentionInterval,
	}
}

// New builds the model from config.json and the weights.
func New(config []byte, w *nn.Weights) (nn.Decoder, error) {
	c, err := parse(config)
	if err != nil {
		return nil, err
	}
	s := c.shape()
	if err := s.Check(); err != nil {
		return nil, err
	}
	plusOne := sanitize(&c, w)
	rope, err := NewRoPE(w, &s)
	if err != nil {
		return nil, err
	}
	m := &Model{Shape: s, ContextLength: *c.MaxPositionEmbeddings}
	// pipeline(): with a pipeline-parallel load this rank builds (and
	// reads) only its own run of layers (nn/pipeline.go), after sanitize
	// has seen every tensor.
	m.Stage = w.Stage(c.NumHiddenLayers)
	for i := range c.NumHiddenLayers {
		if !m.Stage.Has(i) {
			continue
		}
		p := fmt.Sprintf("model.layers.%d.", i)
		l := NewLayer(w, p, &s, plusOne)
		if s.Linear(i) {
			l.Linear = newLinearAttention(w, p+"linear_attn.", &s)
		} else {
			l.Attn = NewAttention(w, p+"self_attn.", &s, rope, plusOne)
		}
		if !slices.Contains(c.MLPOnlyLayers, i) && s.Experts > 0 && (i+1)%*c.DecoderSparseStep == 0 {
			l.MLP = NewSparseMoE(w, p+"mlp.", &s)
		} else {
			l.MLP = w.MLP(p+"mlp.", s.Hidden, c.IntermediateSize, false)
		}
		m.Layers = append(m.Layers, l)
		if w.Err() != nil {
			return nil, w.Err()
		}
	}
	m.Embed = w.Embedding("model.embed_tokens", c.VocabSize, s.Hidden)
	m.NormWeight = NormWeight(w, "model.norm.weight", s.Hidden, plusOne)
	m.Head = w.Head(m.Embed, s.Hidden, c.VocabSize, c.TieWordEmbeddings)
	return m, w.Finish()
}

// sanitize is Model.sanitize: only a Hugging Face checkpoint (one with
// per-expert weights) is changed: mtp weights and a tied lm_head go, the
// experts are stacked into switch_mlp, the convolution's weight moves its
// kernel axis to the middle, and (the returned flag) the norms it names
// are stored as offsets from 1. An MLX checkpoint is read as it is.
func sanitize(c *Config, w *nn.Weights) bool {
	var moe []int
	for l := range c.NumHiddenLayers {
		if w.Has(fmt.Sprintf("model.layers.%d.mlp.experts.0.up_proj.weight", l)) {
			moe = append(moe, l)
		}
	}
	if len(moe) == 0 {
		return false
	}
	w.Drop(func(n string) bool { return strings.Contains(n, "mtp.") })
	if c.TieWordEmbeddings {
		w.Drop(func(n string) bool { return n == "lm_head.weight" })
	}
	for _, l := range moe {
		p := fmt.Sprintf("model.layers.%d.mlp.", l)
		for _, n := range []string{"up_proj", "down_proj", "gate_proj"} {
			srcs := make([]string, *c.NumExperts)
			for e := range srcs {
				srcs[e] = fmt.Sprintf("%sexperts.%d.%s.weight", p, e, n)
			}
			w.Stack(p+"switch_mlp."+n+".weight", srcs)
		}
	}
	MoveConvAxis(w)
	return true
}

// MoveConvAxis is sanitize's conv1d.weight.moveaxis(2, 1) for every
// convolution weight whose last axis is not 1 (Hugging Face's [C, 1, K]);
// it reports whether there was one.
func MoveConvAxis(w *nn.Weights) bool {
	moved := false
	w.Transform(func(name string, shape []int) ([]int, bool) {
		if !strings.Contains(name, "conv1d.weight") || len(shape) != 3 || shape[2] == 1 {
			return nil, false
		}
		moved = true
		return []int{shape[0], shape[2], shape[1]}, true
	}, func(a *mlx.Array) *mlx.Array { return mlx.SwapAxes(a, 1, 2) })
	return moved
}

// normSuffixes are the norm weights sanitize stores as v + 1.0.
var normSuffixes = []string{".input_layernorm.weight", ".post_attention_layernorm.weight", "model.norm.weight", ".q_norm.weight", ".k_norm.weight"}

// NormWeight takes a norm weight, plus one when plusOne and the name is
// one sanitize shifts (a 1-d weight: the shape check asks for one).
func NormWeight(w *nn.Weights, name string, dim int, plusOne bool) *mlx.Array {
	a := w.Get(name, dim)
	if !plusOne || a == nil || !slices.ContainsFunc(normSuffixes, func(s string) bool { return strings.HasSuffix(name, s) }) {
		return a
	}
	out := mlx.Add(a, mlx.ScalarLike(1, a))
	if err := mlx.Eval(out); err != nil {
		w.Fail(err)
		return nil
	}
	w.Release(a)
	return w.Keep(out)
}
