// Package gemma4 is mlx_lm/models/gemma4_text.py of mlx-lm 0.32.2 (and
// gemma4.py, the multimodal checkpoint loaded text-only): layer_types mix
// sliding-window layers (default RoPE) with full ones (their own head_dim,
// proportional RoPE on part of it); q/k RMSNorms and a scale-free v norm,
// attention scale 1; the last num_kv_shared_layers layers store no keys and
// values but read those of the last earlier layer of their kind (and have
// double-wide MLPs); per-layer input embeddings gate each layer's output; an
// optional mixture of experts beside the dense MLP; a learned per-layer
// scalar; tied embeddings and a tanh soft cap on the logits. Op for op, so
// that logits are bit-identical to mlx-lm's (DESIGN.md §6, L1).
package gemma4

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models/nn"
)

// Config is gemma4_text.py's ModelArgs; the pointers have its defaults.
type Config struct {
	HiddenSize              *int                      `json:"hidden_size"`
	NumHiddenLayers         *int                      `json:"num_hidden_layers"`
	IntermediateSize        *int                      `json:"intermediate_size"`
	NumAttentionHeads       *int                      `json:"num_attention_heads"`
	HeadDim                 *int                      `json:"head_dim"`
	GlobalHeadDim           *int                      `json:"global_head_dim"`
	RMSNormEps              *float64                  `json:"rms_norm_eps"`
	VocabSize               *int                      `json:"vocab_size"`
	VocabSizePerLayerInput  *int                      `json:"vocab_size_per_layer_input"`
	NumKeyValueHeads        *int                      `json:"num_key_value_heads"`
	NumGlobalKeyValueHeads  *int                      `json:"num_global_key_value_heads"`
	NumKVSharedLayers       *int                      `json:"num_kv_shared_layers"`
	HiddenSizePerLayerInput *int                      `json:"hidden_size_per_layer_input"`
	RopeTraditional         bool                      `json:"rope_traditional"`
	RopeParameters          map[string]nn.RopeScaling `json:"rope_parameters"`
	SlidingWindow           *int                      `json:"sliding_window"`
	SlidingWindowPattern    *int                      `json:"sliding_window_pattern"`
	MaxPositionEmbeddings   *int                      `json:"max_position_embeddings"`
	AttentionKEqV           bool                      `json:"attention_k_eq_v"`
	FinalLogitSoftcapping   json.RawMessage           `json:"final_logit_softcapping"` // absent: 30; null: none
	UseDoubleWideMLP        *bool                     `json:"use_double_wide_mlp"`
	EnableMoEBlock          bool                      `json:"enable_moe_block"`
	NumExperts              *int                      `json:"num_experts"`
	TopKExperts             *int                      `json:"top_k_experts"`
	MoEIntermediateSize     *int                      `json:"moe_intermediate_size"`
	LayerTypes              []string                  `json:"layer_types"`
	TieWordEmbeddings       *bool                     `json:"tie_word_embeddings"`
}

// defaultRope is ModelArgs.__post_init__'s rope_parameters.
var defaultRope = map[string]nn.RopeScaling{
	"full_attention":    {"partial_rotary_factor": 0.25, "rope_theta": 1000000.0, "rope_type": "proportional"},
	"sliding_attention": {"partial_rotary_factor": 1.0, "rope_theta": 10000.0, "rope_type": "default"},
}

// shared is what a layer hands the KV-shared layers after it: its cache (or,
// without one, the keys and values it attended over) and its position.
type shared struct {
	cache        kv.Cache
	keys, values *mlx.Array
	at           kv.Position
}

type attention struct {
	q, k, v, o     *nn.Linear // v nil: k_eq_v, the keys' projection is the values'
	qNorm, kNorm   *mlx.Array
	eps            float32
	heads, kvHeads int
	headDim        int
	hasKV          bool
	rope           *nn.RoPE
}

// apply is Attention.__call__: with from set (a KV-shared layer) the keys,
// values and position are the earlier layer's.
func (a *attention) apply(x *mlx.Array, mask kv.Mask, c kv.Cache, from *shared) (*mlx.Array, *shared) {
	b, l := x.Dim(0), x.Dim(1)
	queries := mlx.RMSNorm(mlx.Reshape(a.q.Apply(x), b, l, a.heads, a.headDim), a.qNorm, a.eps)
	var out *mlx.Array
	if from != nil {
		queries = a.rope.At(mlx.Transpose(queries, 0, 2, 1, 3), from.at)
		if from.cache != nil {
			out = kv.AttendStored(from.cache, queries, 1, mask)
		} else {
			out = kv.Attention(nil, queries, from.keys, from.values, 1, mask)
		}
	} else {
		keys := mlx.Reshape(a.k.Apply(x), b, l, a.kvHeads, a.headDim)
		values := keys
		if a.v != nil {
			values = mlx.Reshape(a.v.Apply(x), b, l, a.kvHeads, a.headDim)
		}
		at := kv.PositionOf(c)
		keys = a.rope.At(mlx.Transpose(mlx.RMSNorm(keys, a.kNorm, a.eps), 0, 2, 1, 3), at)
		values = mlx.Transpose(mlx.RMSNorm(values, nil, a.eps), 0, 2, 1, 3)
		queries = a.rope.At(mlx.Transpose(queries, 0, 2, 1, 3), at)
		out = kv.Attention(c, queries, keys, values, 1, mask)
		from = &shared{cache: c, at: at}
		if c == nil {
			from.keys, from.values = keys, values
		}
	}
	return a.o.Apply(mlx.Reshape(mlx.Transpose(out, 0, 2, 1, 3), b, l, -1)), from
}

// mlp is MLP: down(geglu(gate(x), up(x))).
type mlp struct{ gate, up, down *nn.Linear }

func (m *mlp) apply(x *mlx.Array) *mlx.Array {
	return m.down.Apply(geglu(m.gate.Apply(x), m.up.Apply(x)))
}

// geglu is gelu_approx(gate) * x, one compiled function in mlx-lm (which
// on a GPU fuses the product into gelu's kernel: mlx.GeGLU).
func geglu(gate, x *mlx.Array) *mlx.Array { return mlx.GeGLU(gate, x) }

// router is Router: RMS-normed input (scale * hidden^-0.5), top-k logits
// softmaxed and scaled per expert.
type router struct {
	proj                  *nn.Linear
	scale, perExpertScale *mlx.Array
	root                  float32
	eps                   float32
	topK                  int
}

func (r *router) apply(x *mlx.Array) (inds, weights *mlx.Array) {
	x = mlx.RMSNorm(x, mlx.Multiply(r.scale, mlx.ScalarLike(r.root, r.scale)), r.eps)
	scores := r.proj.Apply(x)
	inds = mlx.Argpartition(scores, -r.topK, -1)
	sh := inds.Shape()
	start := make([]int, len(sh))
	start[len(sh)-1] = sh[len(sh)-1] - r.topK
	inds = mlx.StopGradient(mlx.Slice(inds, start, sh))
	weights = mlx.Softmax(mlx.TakeAlongAxis(scores, inds, -1), []int{-1}, false)
	return inds, mlx.Multiply(weights, mlx.Take(r.perExpertScale, inds, 0))
}

// moe is the mixture beside the dense MLP (enable_moe_block).
type moe struct {
	router                   *router
	experts                  *nn.SwitchGLU
	postFF1, postFF2, preFF2 *mlx.Array
}

type block struct {
	attn                    *attention
	mlp                     *mlp
	moe                     *moe
	inputNorm, postAttnNorm *mlx.Array
	preFFNorm, postFFNorm   *mlx.Array
	// per-layer input gating (hidden_size_per_layer_input > 0)
	pliGate, pliProj *nn.Linear
	pliNorm          *mlx.Array
	layerScalar      *mlx.Array
	eps              float32
}

func (b *block) apply(x *mlx.Array, mask kv.Mask, c kv.Cache, pli *mlx.Array, from *shared) (*mlx.Array, *shared) {
	h, from := b.attn.apply(mlx.RMSNorm(x, b.inputNorm, b.eps), mask, c, from)
	h = mlx.Add(x, mlx.RMSNorm(h, b.postAttnNorm, b.eps))
	residual := h
	if b.moe != nil {
		h1 := mlx.RMSNorm(b.mlp.apply(mlx.RMSNorm(h, b.preFFNorm, b.eps)), b.moe.postFF1, b.eps)
		inds, weights := b.moe.router.apply(h)
		h2 := b.moe.experts.Apply(mlx.RMSNorm(h, b.moe.preFF2, b.eps), inds)
		h2 = mlx.Sum(mlx.Multiply(mlx.ExpandDims(weights, -1), h2), []int{-2}, false)
		h = mlx.Add(h1, mlx.RMSNorm(h2, b.moe.postFF2, b.eps))
	} else {
		h = b.mlp.apply(mlx.RMSNorm(h, b.preFFNorm, b.eps))
	}
	h = mlx.Add(residual, mlx.RMSNorm(h, b.postFFNorm, b.eps))
	if b.pliGate != nil && pli != nil {
		gate := mlx.Multiply(mlx.GeluApprox(b.pliGate.Apply(h)), pli)
		h = mlx.Add(h, mlx.RMSNorm(b.pliProj.Apply(gate), b.pliNorm, b.eps))
	}
	return mlx.Multiply(h, b.layerScalar), from
}

// Model is gemma4_text.py's Model (Gemma4TextModel and the head).
type Model struct {
	contextLength int
	embed         *nn.Embedding
	embedScale    float32
	layers        []*block
	norm          *mlx.Array
	eps           float32
	head          *nn.Head
	softcap       float32 // 0: none
	sliding       []bool
	window        int
	firstFull     int // the first layer of each kind, whose cache makes its mask
	firstSliding  int
	previous      []int // previous_kvs: the layer whose keys and values each reads
	caches        int   // layers with a cache of their own
	// per-layer inputs
	perLayer                          int // hidden_size_per_layer_input; 0: none
	embedPerLayer                     *nn.Embedding
	perLayerProj                      *nn.Linear
	perLayerProjNorm                  *mlx.Array
	perLayerEmbedScale, perLayerScale float32
	perLayerInputScale                float32
}

// perLayerInputs is _get_per_layer_inputs and _project_per_layer_inputs:
// [B, L, layers, hidden_size_per_layer_input].
func (m *Model) perLayerInputs(tokens, h *mlx.Array) *mlx.Array {
	b, l, n := h.Dim(0), h.Dim(1), len(m.layers)
	pli := m.embedPerLayer.Apply(tokens)
	pli = mlx.Reshape(mlx.Multiply(pli, mlx.ScalarLike(m.perLayerEmbedScale, pli)), b, l, n, m.perLayer)
	proj := m.perLayerProj.Apply(h)
	proj = mlx.Reshape(mlx.Multiply(proj, mlx.ScalarLike(m.perLayerScale, proj)), b, l, n, m.perLayer)
	proj = mlx.RMSNorm(proj, m.perLayerProjNorm, m.eps)
	s := mlx.Add(proj, pli)
	return mlx.Multiply(s, mlx.ScalarLike(m.perLayerInputScale, s))
}

// Forward implements nn.Decoder.
func (m *Model) Forward(tokens *mlx.Array, caches []kv.Cache) *mlx.Array {
	h := m.embed.Apply(tokens)
	h = mlx.Multiply(h, mlx.ScalarLike(m.embedScale, h))
	var pli *mlx.Array
	if m.perLayer > 0 {
		pli = m.perLayerInputs(tokens, h)
	}
	n := h.Dim(1)
	var full, slide kv.Mask
	if m.firstFull >= 0 {
		full = kv.AttentionMask(n, kv.At(caches, m.firstFull), 0)
	}
	if m.firstSliding >= 0 {
		slide = kv.AttentionMask(n, kv.At(caches, m.firstSliding), m.window)
	}
	kvs := make([]*shared, len(m.layers))
	for i, l := range m.layers {
		mask := full
		if m.sliding[i] {
			mask = slide
		}
		var in *mlx.Array
		if pli != nil {
			sh := pli.Shape()
			in = mlx.Squeeze(mlx.Slice(pli, []int{0, 0, i, 0}, []int{sh[0], sh[1], i + 1, sh[3]}), 2)
		}
		var c kv.Cache
		if i < m.caches {
			c = kv.At(caches, i)
		}
		h, kvs[i] = l.apply(h, mask, c, in, kvs[m.previous[i]])
	}
	return mlx.RMSNorm(h, m.norm, m.eps)
}

// Unembed implements nn.Decoder: the head, then tanh(x / cap) * cap.
func (m *Model) Unembed(h *mlx.Array) *mlx.Array {
	out := m.head.Apply(h)
	if m.softcap == 0 {
		return out
	}
	return mlx.LogitSoftcap(out, m.softcap)
}

// NewCaches is Model.make_cache: caches for the layers before the
// KV-shared ones only, rotating (window, keep 0) for sliding layers;
// --max-kv-size is ignored.
func (m *Model) NewCaches(kv.Options) []kv.Cache {
	return nn.SlidingCaches(m.sliding[:m.caches], m.window)
}

// Facts implements nn.Decoder.
func (m *Model) Facts() nn.Facts {
	return nn.Facts{Layers: len(m.layers), ContextLength: m.contextLength, Dtype: m.embed.Dtype().String(), Caches: m.caches}
}

func intOr(p *int, def int) int {
	if p != nil {
		return *p
	}
	return def
}

// maxExperts bounds num_experts before any weight is read.
const maxExperts = 1 << 16

// maxDim bounds every width read here before any array is made (real
// models are far below it), as models.ParseConfig bounds the common ones.
const maxDim = 1 << 20

// spec is what New reads of config.json: ModelArgs with its defaults and
// __post_init__ applied, checked.
type spec struct {
	hidden, layers, width               int
	heads, headDim, globalHeadDim       int
	vocab, vocabPerLayer                int
	kvHeads, globalKVHeads, perLayer    int
	eps, softcap                        float64
	rope                                map[string]nn.RopeScaling
	types                               []string
	window                              int
	first                               int   // the first KV-shared layer
	previous                            []int // previous_kvs
	moe                                 bool
	experts, topK, moeWidth             int
	kEqV, traditional, doubleWide, tied bool
	contextLength                       int
}

// parse reads and checks config.json; it makes no arrays.
func parse(config []byte) (*spec, error) {
	var c Config
	if err := json.Unmarshal(config, &c); err != nil {
		return nil, fmt.Errorf("cannot parse config.json: %w", err)
	}
	s := &spec{
		hidden: intOr(c.HiddenSize, 1536), layers: intOr(c.NumHiddenLayers, 35), width: intOr(c.IntermediateSize, 6144),
		heads: intOr(c.NumAttentionHeads, 8), headDim: intOr(c.HeadDim, 256), globalHeadDim: intOr(c.GlobalHeadDim, 512),
		vocab: intOr(c.VocabSize, 262144), vocabPerLayer: intOr(c.VocabSizePerLayerInput, 262144),
		kvHeads: intOr(c.NumKeyValueHeads, 1), perLayer: intOr(c.HiddenSizePerLayerInput, 256),
		eps: 1e-6, softcap: 30, rope: c.RopeParameters, window: intOr(c.SlidingWindow, 512),
		moe: c.EnableMoEBlock, kEqV: c.AttentionKEqV, traditional: c.RopeTraditional,
		doubleWide: c.UseDoubleWideMLP == nil || *c.UseDoubleWideMLP, tied: c.TieWordEmbeddings == nil || *c.TieWordEmbeddings,
		contextLength: intOr(c.MaxPositionEmbeddings, 131072),
	}
	s.globalKVHeads = s.kvHeads
	if s.kEqV && c.NumGlobalKeyValueHeads != nil {
		s.globalKVHeads = *c.NumGlobalKeyValueHeads
	}
	for _, d := range []struct {
		name   string
		v, min int
	}{
		{"hidden_size", s.hidden, 1}, {"num_hidden_layers", s.layers, 1}, {"intermediate_size", s.width, 1},
		{"num_attention_heads", s.heads, 1}, {"head_dim", s.headDim, 1}, {"global_head_dim", s.globalHeadDim, 0},
		{"vocab_size", s.vocab, 1}, {"vocab_size_per_layer_input", s.vocabPerLayer, 1},
		{"num_key_value_heads", s.kvHeads, 1}, {"num_global_key_value_heads", s.globalKVHeads, 1},
		{"hidden_size_per_layer_input", s.perLayer, 0}, {"sliding_window", s.window, 1},
	} {
		if d.v < d.min || d.v > maxDim {
			return nil, fmt.Errorf("%s = %d, want %d..%d", d.name, d.v, d.min, maxDim)
		}
	}
	if s.layers > 4096 || s.layers*s.perLayer > maxDim {
		return nil, fmt.Errorf("num_hidden_layers %d x hidden_size_per_layer_input %d is too large", s.layers, s.perLayer)
	}
	if c.RMSNormEps != nil {
		s.eps = *c.RMSNormEps
	}
	if math.IsNaN(s.eps) || s.eps < 0 {
		return nil, fmt.Errorf("rms_norm_eps = %v, want >= 0", s.eps)
	}
	if raw := bytes.TrimSpace(c.FinalLogitSoftcapping); len(raw) > 0 {
		if bytes.Equal(raw, []byte("null")) {
			s.softcap = 0
		} else if err := json.Unmarshal(raw, &s.softcap); err != nil || !(s.softcap > 0) || math.IsInf(s.softcap, 0) {
			return nil, fmt.Errorf("final_logit_softcapping = %s, want a positive number or null", raw)
		}
	}
	if s.rope == nil {
		s.rope = defaultRope
	}
	s.types = c.LayerTypes
	if s.types == nil {
		p := intOr(c.SlidingWindowPattern, 5)
		if p < 1 || p > maxDim {
			return nil, fmt.Errorf("sliding_window_pattern = %d, want 1..%d", p, maxDim)
		}
		pattern := append(slices.Repeat([]string{"sliding_attention"}, p-1), "full_attention")
		s.types = slices.Repeat(pattern, s.layers/len(pattern)+1)[:s.layers]
	}
	if len(s.types) != s.layers {
		return nil, fmt.Errorf("layer_types has %d entries for %d layers", len(s.types), s.layers)
	}
	for _, t := range s.types {
		if t != "full_attention" && t != "sliding_attention" {
			return nil, fmt.Errorf("layer type %q, want full_attention or sliding_attention", t)
		}
	}
	shared := intOr(c.NumKVSharedLayers, 20)
	s.first = s.layers - shared
	if shared < 0 || s.first < 1 {
		return nil, fmt.Errorf("num_kv_shared_layers = %d, want 0..%d", shared, s.layers-1)
	}
	// previous_kvs: a KV-shared layer reads the last earlier layer of its kind.
	last := map[string]int{}
	for i := range s.layers {
		s.previous = append(s.previous, i)
		if i < s.first {
			last[s.types[i]] = i
			continue
		}
		j, ok := last[s.types[i]]
		if !ok {
			return nil, fmt.Errorf("KV-shared layer %d (%s) has no earlier layer of its kind", i, s.types[i])
		}
		s.previous[i] = j
	}
	if s.moe {
		s.experts, s.topK, s.moeWidth = intOr(c.NumExperts, 0), intOr(c.TopKExperts, 0), intOr(c.MoEIntermediateSize, 0)
		if s.experts < 1 || s.experts > maxExperts || s.topK < 1 || s.topK > s.experts || s.moeWidth < 1 || s.moeWidth > maxDim {
			return nil, fmt.Errorf("enable_moe_block needs num_experts (1..%d), top_k_experts (1..num_experts) and moe_intermediate_size", maxExperts)
		}
	}
	for i, t := range s.types {
		hd, nkv := s.dims(i)
		if err := nn.CheckHeads(s.heads, nkv, hd); err != nil {
			return nil, err
		}
		if _, err := s.rope[t].Float("rope_theta", 10000); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// dims is layer i's head dimension and KV heads: a full layer's own
// (global_head_dim; num_global_key_value_heads with K = V).
func (s *spec) dims(i int) (headDim, kvHeads int) {
	if s.types[i] == "sliding_attention" {
		return s.headDim, s.kvHeads
	}
	headDim = s.headDim
	if s.globalHeadDim > 0 {
		headDim = s.globalHeadDim
	}
	if s.kEqV {
		return headDim, s.globalKVHeads
	}
	return headDim, s.kvHeads
}

// New builds the model from config.json and the weights.
func New(config []byte, w *nn.Weights) (nn.Decoder, error) {
	s, err := parse(config)
	if err != nil {
		return nil, err
	}
	hidden, layers, width, heads, experts, perLayer := s.hidden, s.layers, s.width, s.heads, s.experts, s.perLayer
	first := s.first
	m := &Model{contextLength: s.contextLength, eps: float32(s.eps), softcap: float32(s.softcap),
		window: s.window, firstFull: slices.Index(s.types, "full_attention"),
		firstSliding: slices.Index(s.types, "sliding_attention"), caches: first, previous: s.previous,
		embedScale: float32(math.Sqrt(float64(hidden)))}
	if err := sanitize(w, layers, first); err != nil {
		return nil, err
	}
	ropes := map[string]*nn.RoPE{}
	for i := range layers {
		t := s.types[i]
		sliding := t == "sliding_attention"
		hd, nkv := s.dims(i)
		kEqV := s.kEqV && !sliding
		r, ok := ropes[t]
		if !ok {
			params := s.rope[t]
			theta, _ := params.Float("rope_theta", 10000)
			if r, err = nn.NewRoPE(w, hd, theta, s.traditional, params); err != nil {
				return nil, fmt.Errorf("%s rope: %w", t, err)
			}
			ropes[t] = r
		}
		p := fmt.Sprintf("model.layers.%d.", i)
		a := &attention{
			q:     w.Linear(p+"self_attn.q_proj", hidden, heads*hd, false),
			o:     w.Linear(p+"self_attn.o_proj", heads*hd, hidden, false),
			qNorm: w.Get(p+"self_attn.q_norm.weight", hd),
			eps:   m.eps, heads: heads, kvHeads: nkv, headDim: hd, hasKV: i < first, rope: r,
		}
		if a.hasKV {
			a.k = w.Linear(p+"self_attn.k_proj", hidden, nkv*hd, false)
			if !kEqV {
				a.v = w.Linear(p+"self_attn.v_proj", hidden, nkv*hd, false)
			}
			a.kNorm = w.Get(p+"self_attn.k_norm.weight", hd)
		}
		mw := width
		if s.doubleWide && i >= first {
			mw = 2 * width
		}
		b := &block{
			attn: a,
			mlp: &mlp{
				gate: w.Linear(p+"mlp.gate_proj", hidden, mw, false),
				up:   w.Linear(p+"mlp.up_proj", hidden, mw, false),
				down: w.Linear(p+"mlp.down_proj", mw, hidden, false),
			},
			inputNorm:    w.Get(p+"input_layernorm.weight", hidden),
			postAttnNorm: w.Get(p+"post_attention_layernorm.weight", hidden),
			preFFNorm:    w.Get(p+"pre_feedforward_layernorm.weight", hidden),
			postFFNorm:   w.Get(p+"post_feedforward_layernorm.weight", hidden),
			layerScalar:  w.Get(p+"layer_scalar", 1),
			eps:          m.eps,
		}
		if s.moe {
			b.moe = &moe{
				router: &router{
					proj:           w.Linear(p+"router.proj", hidden, experts, false),
					scale:          w.Get(p+"router.scale", hidden),
					perExpertScale: w.Get(p+"router.per_expert_scale", experts),
					root:           float32(math.Pow(float64(hidden), -0.5)), eps: m.eps, topK: s.topK,
				},
				experts: w.SwitchGLUWith(p+"experts.switch_glu.", hidden, s.moeWidth, experts, false,
					func(x, gate *mlx.Array) *mlx.Array { return geglu(gate, x) }),
				postFF1: w.Get(p+"post_feedforward_layernorm_1.weight", hidden),
				postFF2: w.Get(p+"post_feedforward_layernorm_2.weight", hidden),
				preFF2:  w.Get(p+"pre_feedforward_layernorm_2.weight", hidden),
			}
		}
		if perLayer > 0 {
			b.pliGate = w.Linear(p+"per_layer_input_gate", hidden, perLayer, false)
			b.pliProj = w.Linear(p+"per_layer_projection", perLayer, hidden, false)
			b.pliNorm = w.Get(p+"post_per_layer_input_norm.weight", hidden)
		}
		m.layers = append(m.layers, b)
		m.sliding = append(m.sliding, sliding)
		if w.Err() != nil {
			return nil, w.Err()
		}
	}
	if perLayer > 0 {
		m.perLayer = perLayer
		m.embedPerLayer = w.Embedding("model.embed_tokens_per_layer", s.vocabPerLayer, layers*perLayer)
		m.perLayerProj = w.Linear("model.per_layer_model_projection", hidden, layers*perLayer, false)
		m.perLayerProjNorm = w.Get("model.per_layer_projection_norm.weight", perLayer)
		m.perLayerEmbedScale = float32(math.Sqrt(float64(perLayer)))
		m.perLayerScale = float32(math.Pow(float64(hidden), -0.5))
		m.perLayerInputScale = float32(math.Pow(2, -0.5))
	}
	m.embed = w.Embedding("model.embed_tokens", s.vocab, hidden)
	m.norm = w.Get("model.norm.weight", hidden)
	m.head = w.Head(m.embed, hidden, s.vocab, s.tied)
	return m, w.Finish()
}

// sanitize is Model.sanitize: rotary tables and activation clipping ranges
// go, and so do the key/value projections of KV-shared layers; a Hugging
// Face checkpoint's fused experts (experts.gate_up_proj [E, 2I, H], split in
// two along axis -2 into contiguous copies, and experts.down_proj) become
// switch_glu's.
func sanitize(w *nn.Weights, layers, first int) error {
	for l := range layers {
		p := fmt.Sprintf("model.layers.%d.experts.", l)
		if w.Has(p + "gate_up_proj") {
			w.Split(p+"gate_up_proj", -2, p+"switch_glu.gate_proj.weight", p+"switch_glu.up_proj.weight")
		}
		if w.Has(p + "down_proj") {
			down := p + "down_proj"
			w.Rename(func(k string) string {
				if k == down {
					return p + "switch_glu.down_proj.weight"
				}
				return k
			})
		}
	}
	if err := w.Err(); err != nil {
		return err
	}
	w.Drop(func(k string) bool {
		for _, s := range []string{"self_attn.rotary_emb", "input_max", "input_min", "output_max", "output_min"} {
			if strings.Contains(k, s) {
				return true
			}
		}
		for _, s := range []string{".self_attn.k_proj", ".self_attn.v_proj", ".self_attn.k_norm"} {
			if !strings.Contains(k, s) {
				continue
			}
			_, rest, ok := strings.Cut(k, "layers.")
			if !ok {
				continue
			}
			var idx int
			if _, err := fmt.Sscanf(rest, "%d.", &idx); err == nil && idx >= first {
				return true
			}
		}
		return false
	})
	return nil
}
