// Package qwen3_moe is mlx_lm/models/qwen3_moe.py of mlx-lm 0.32.2: qwen3's
// attention (per-head q/k RMSNorm, explicit head_dim, plain RoPE) with
// sparse mixture-of-experts blocks (a softmax router, top-k experts through
// switch_layers.py's SwitchGLU) on the layers decoder_sparse_step and
// mlp_only_layers pick, op for op so that logits are bit-identical to
// mlx-lm's (DESIGN.md §6, L1).
package qwen3_moe

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models/nn"
)

// Config is qwen3_moe.py's ModelArgs: every field but rope_scaling is
// required there (rope_scaling is read and not used: the RoPE is plain).
type Config struct {
	HiddenSize            int      `json:"hidden_size"`
	NumHiddenLayers       int      `json:"num_hidden_layers"`
	IntermediateSize      int      `json:"intermediate_size"`
	NumAttentionHeads     int      `json:"num_attention_heads"`
	NumExperts            *int     `json:"num_experts"`
	NumExpertsPerTok      *int     `json:"num_experts_per_tok"`
	DecoderSparseStep     *int     `json:"decoder_sparse_step"`
	MLPOnlyLayers         []int    `json:"mlp_only_layers"`
	MoEIntermediateSize   *int     `json:"moe_intermediate_size"`
	RMSNormEps            float64  `json:"rms_norm_eps"`
	VocabSize             int      `json:"vocab_size"`
	NumKeyValueHeads      *int     `json:"num_key_value_heads"`
	HeadDim               *int     `json:"head_dim"`
	RopeTheta             *float64 `json:"rope_theta"`
	TieWordEmbeddings     *bool    `json:"tie_word_embeddings"`
	MaxPositionEmbeddings *int     `json:"max_position_embeddings"`
	NormTopKProb          *bool    `json:"norm_topk_prob"`
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
	queries := mlx.RMSNorm(mlx.Reshape(p[0], b, l, a.heads, -1), a.qNorm, a.eps)
	keys := mlx.RMSNorm(mlx.Reshape(p[1], b, l, a.kvHeads, -1), a.kNorm, a.eps)
	queries = mlx.Transpose(queries, 0, 2, 1, 3)
	keys = mlx.Transpose(keys, 0, 2, 1, 3)
	values := mlx.Transpose(mlx.Reshape(p[2], b, l, a.kvHeads, -1), 0, 2, 1, 3)
	// rope at the cache's offset, update_and_fetch, attention, and the heads
	// back to [B, L, heads*dim]
	return a.o.Apply(kv.RoPEAttention(c, a.rope, queries, keys, values, a.scale, mask))
}

// sparseMoE is Qwen3MoeSparseMoeBlock.
type sparseMoE struct {
	gate      *nn.Linear // the router
	switchMLP *nn.SwitchGLU
	topK      int
	norm      bool
}

func (m *sparseMoE) Apply(x *mlx.Array) *mlx.Array {
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
	return mlx.AsType(mlx.Sum(mlx.Multiply(y, mlx.ExpandDims(scores, -1)), []int{-2}, false), y.Dtype())
}

// mlp is the layer's feed-forward block: the dense MLP or the sparse one.
type mlp interface{ Apply(*mlx.Array) *mlx.Array }

type block struct {
	attn                    *attention
	mlp                     mlp
	inputNorm, postAttnNorm *mlx.Array
	eps                     float32
}

func (b *block) apply(x *mlx.Array, mask kv.Mask, c kv.Cache) *mlx.Array {
	r := b.attn.apply(mlx.RMSNorm(x, b.inputNorm, b.eps), mask, c)
	h := mlx.Add(x, r)
	r = b.mlp.Apply(mlx.RMSNorm(h, b.postAttnNorm, b.eps))
	return mlx.Add(h, r)
}

// Model is qwen3_moe.py's Model (Qwen3MoeModel and the lm head).
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

// NewCaches is make_prompt_cache: qwen3_moe.py has no make_cache.
func (m *Model) NewCaches(opts kv.Options) []kv.Cache { return nn.DefaultCaches(len(m.layers), opts) }

// Facts implements nn.Decoder.
func (m *Model) Facts() nn.Facts {
	return nn.Facts{Layers: len(m.layers), ContextLength: *m.cfg.MaxPositionEmbeddings, Dtype: m.embed.Dtype().String()}
}

// maxExperts bounds num_experts before any weight is read (real models have
// up to a few hundred).
const maxExperts = 1 << 16

func parse(config []byte) (Config, error) {
	var c Config
	if err := json.Unmarshal(config, &c); err != nil {
		return c, fmt.Errorf("cannot parse config.json: %w", err)
	}
	if c.NumExperts == nil || c.NumExpertsPerTok == nil || c.DecoderSparseStep == nil || c.MLPOnlyLayers == nil ||
		c.MoEIntermediateSize == nil || c.NumKeyValueHeads == nil || c.HeadDim == nil || c.RopeTheta == nil ||
		c.TieWordEmbeddings == nil || c.MaxPositionEmbeddings == nil || c.NormTopKProb == nil {
		return c, fmt.Errorf("qwen3_moe needs num_experts, num_experts_per_tok, decoder_sparse_step, mlp_only_layers, " +
			"moe_intermediate_size, num_key_value_heads, head_dim, rope_theta, tie_word_embeddings, " +
			"max_position_embeddings and norm_topk_prob")
	}
	if e := *c.NumExperts; e < 0 || e > maxExperts {
		return c, fmt.Errorf("num_experts = %d, want 0..%d", e, maxExperts)
	}
	if *c.NumExperts > 0 {
		if k := *c.NumExpertsPerTok; k < 1 || k > *c.NumExperts {
			return c, fmt.Errorf("num_experts_per_tok = %d, want 1..num_experts (%d)", k, *c.NumExperts)
		}
		if *c.DecoderSparseStep <= 0 {
			return c, fmt.Errorf("decoder_sparse_step = %d, want > 0", *c.DecoderSparseStep)
		}
		if w := *c.MoEIntermediateSize; w <= 0 || w > 1<<20 {
			return c, fmt.Errorf("moe_intermediate_size = %d, want 1..%d", w, 1<<20)
		}
	}
	return c, nil
}

// sparse is the decoder layer's test for a Qwen3MoeSparseMoeBlock.
func (c *Config) sparse(layer int) bool {
	return !slices.Contains(c.MLPOnlyLayers, layer) && *c.NumExperts > 0 && (layer+1)%*c.DecoderSparseStep == 0
}

// New builds the model from config.json and the weights.
func New(config []byte, w *nn.Weights) (nn.Decoder, error) {
	c, err := parse(config)
	if err != nil {
		return nil, err
	}
	headDim, kvHeads, tied := *c.HeadDim, *c.NumKeyValueHeads, *c.TieWordEmbeddings
	if err := nn.CheckHeads(c.NumAttentionHeads, kvHeads, headDim); err != nil {
		return nil, err
	}
	sanitize(&c, w)
	rope, err := nn.NewRoPE(w, headDim, *c.RopeTheta, false, nil)
	if err != nil {
		return nil, err
	}
	m := &Model{cfg: c, eps: float32(c.RMSNormEps)}
	hidden, scale := c.HiddenSize, float32(math.Pow(float64(headDim), -0.5))
	// pipeline(): with a pipeline-parallel load this rank builds (and
	// reads) only its own run of layers (nn/pipeline.go).
	m.stage = w.Stage(c.NumHiddenLayers)
	for i := range c.NumHiddenLayers {
		if !m.stage.Has(i) {
			continue
		}
		p := fmt.Sprintf("model.layers.%d.", i)
		var ff mlp
		if c.sparse(i) {
			ff = &sparseMoE{
				gate:      w.Linear(p+"mlp.gate", hidden, *c.NumExperts, false),
				switchMLP: w.SwitchGLU(p+"mlp.switch_mlp.", hidden, *c.MoEIntermediateSize, *c.NumExperts),
				topK:      *c.NumExpertsPerTok, norm: *c.NormTopKProb,
			}
		} else {
			ff = w.MLP(p+"mlp.", hidden, c.IntermediateSize, false)
		}
		m.layers = append(m.layers, &block{
			attn: &attention{
				qkv:   w.QKV(p+"self_attn.", hidden, c.NumAttentionHeads*headDim, kvHeads*headDim, false),
				o:     w.Linear(p+"self_attn.o_proj", c.NumAttentionHeads*headDim, hidden, false),
				qNorm: w.Get(p+"self_attn.q_norm.weight", headDim),
				kNorm: w.Get(p+"self_attn.k_norm.weight", headDim),
				eps:   m.eps, heads: c.NumAttentionHeads, kvHeads: kvHeads, scale: scale, rope: rope,
			},
			mlp:          ff,
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

// sanitize is Model.sanitize: a tied checkpoint's lm_head goes, and a
// Hugging Face checkpoint's per-expert weights (mlp.experts.E.up_proj ...)
// become the stacked switch_mlp tensors.
func sanitize(c *Config, w *nn.Weights) {
	if *c.TieWordEmbeddings {
		w.Drop(func(n string) bool { return n == "lm_head.weight" })
	}
	for l := range c.NumHiddenLayers {
		p := fmt.Sprintf("model.layers.%d.mlp.", l)
		if !w.Has(p + "experts.0.up_proj.weight") {
			continue
		}
		for _, n := range []string{"up_proj", "down_proj", "gate_proj"} {
			srcs := make([]string, *c.NumExperts)
			for e := range srcs {
				srcs[e] = fmt.Sprintf("%sexperts.%d.%s.weight", p, e, n)
			}
			w.Stack(p+"switch_mlp."+n+".weight", srcs)
		}
	}
}
