package models

import (
	"fmt"

	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
)

// decoder is the one forward pass the supported architectures share; the
// builders in llama.go, qwen.go and gemma3.go set the knobs where their
// mlx-lm classes differ.
type decoder struct {
	embed    *embedding
	embedMul *mlx.Array // gemma3: sqrt(hidden) as bfloat16 (nil: none)
	layers   []*block
	norm     *mlx.Array
	eps      float32
	lmHead   *linear // nil: tied to the embedding (as_linear)
	ws       *weightSet
	info     Info
	cfg      *Config
	// Mask selection: globalIdx/slidingIdx are the layers whose caches make
	// the full and sliding-window masks (mlx-lm's fa_idx / swa_idx, or
	// gemma3's sliding_window_pattern - 1 and 0); slidingIdx < 0: none.
	globalIdx, slidingIdx int
	window                int
	// makeCache is the architecture's own make_cache; nil: mlx-lm's default
	// (KVCache, or RotatingKVCache(max_kv_size, keep=4) when asked).
	makeCache func() []kv.Cache
}

func cacheAt(caches []kv.Cache, i int) kv.Cache {
	if i < 0 || i >= len(caches) {
		return nil
	}
	return caches[i]
}

// Forward implements Model.
func (d *decoder) Forward(tokens *mlx.Array, caches []kv.Cache) *mlx.Array {
	if err := tokens.Err(); err != nil {
		return tokens
	}
	if tokens.Ndim() != 2 {
		return mlx.ErrorArray(fmt.Errorf("cannot run the model: token ids of shape %v, want [batch, length]", tokens.Shape()))
	}
	if caches != nil && len(caches) != len(d.layers) {
		return mlx.ErrorArray(fmt.Errorf("cannot run the model: %d caches for %d layers", len(caches), len(d.layers)))
	}
	// Only the logits leave: handles on intermediate activations would keep
	// MLX from freeing them while the logits are evaluated (peak memory).
	s := mlx.NewScope()
	defer s.Close()
	out := d.forward(tokens, caches)
	s.Keep(out)
	return out
}

func (d *decoder) forward(tokens *mlx.Array, caches []kv.Cache) *mlx.Array {
	h := d.embedIn(tokens)
	n := h.Dim(1)
	full := kv.AttentionMask(n, cacheAt(caches, d.globalIdx), 0)
	var sliding kv.Mask
	if d.slidingIdx >= 0 {
		sliding = kv.AttentionMask(n, cacheAt(caches, d.slidingIdx), d.window)
	}
	for i, l := range d.layers {
		mask := full
		if l.sliding {
			mask = sliding
		}
		h = l.apply(h, mask, cacheAt(caches, i))
	}
	return d.head(h)
}

// embedIn is the embedding lookup (scaled for gemma3).
func (d *decoder) embedIn(tokens *mlx.Array) *mlx.Array {
	h := d.embed.lookup(tokens)
	if d.embedMul != nil {
		h = mlx.Multiply(h, mlx.AsType(d.embedMul, h.Dtype()))
	}
	return h
}

// head is the final norm and the output projection (tied or not).
func (d *decoder) head(h *mlx.Array) *mlx.Array {
	h = mlx.RMSNorm(h, d.norm, d.eps)
	if d.lmHead != nil {
		return d.lmHead.apply(h)
	}
	return d.embed.asLinear(h)
}

// NewCaches implements Model: the architecture's make_cache when mlx-lm's
// class has one (which then ignores MaxKVSize, as mlx-lm does), else
// rotating caches of MaxKVSize keeping 4 tokens, else growable caches.
func (d *decoder) NewCaches(opts kv.Options) []kv.Cache {
	if d.makeCache != nil {
		return d.makeCache()
	}
	out := make([]kv.Cache, len(d.layers))
	for i := range out {
		if opts.MaxKVSize > 0 {
			out[i] = kv.NewRotating(opts.MaxKVSize, 4)
		} else {
			out[i] = kv.NewKVCache()
		}
	}
	return out
}

func (d *decoder) Info() Info { return d.info }

func (d *decoder) Close() error {
	if d.ws != nil {
		d.ws.free()
	}
	return nil
}

// slidingCaches is the make_cache of llama (layer_types) and gemma3: a
// rotating cache of the window for sliding layers, growable otherwise.
func (d *decoder) slidingCaches() []kv.Cache {
	out := make([]kv.Cache, len(d.layers))
	for i, l := range d.layers {
		if l.sliding {
			out[i] = kv.NewRotating(d.window, 0)
		} else {
			out[i] = kv.NewKVCache()
		}
	}
	return out
}

// layerSpec is what differs between the blocks of one architecture.
type layerSpec struct {
	headDim        int
	bias           bool // q/k/v biases (qwen2, llama attention_bias)
	oBias, mlpBias bool
	normPlace      qkNormPlace
	onePlus        bool // gemma: norms scale by 1 + weight
	gelu, sandwich bool
	scale          float32
}

// buildBlocks takes the layers' weights under model.layers.N.
func buildBlocks(cfg *Config, ws *weightSet, spec layerSpec, ropeFor func(i int) (*rope, bool, error)) ([]*block, error) {
	hidden, heads, kvHeads, hd := cfg.HiddenSize, cfg.NumAttentionHeads, cfg.kvHeads(), spec.headDim
	if kvHeads <= 0 || heads%kvHeads != 0 {
		return nil, fmt.Errorf("num_attention_heads %d is not a multiple of num_key_value_heads %d", heads, kvHeads)
	}
	if hd <= 0 {
		return nil, fmt.Errorf("head dimension %d, want > 0", hd)
	}
	eps := float32(floatOr(cfg.RMSNormEps, 0))
	norm := func(name string, dims int) *mlx.Array {
		w := ws.get(name, dims)
		if spec.onePlus && w != nil {
			w = ws.keepArray(mlx.Add(mlx.ScalarLike(1, w), w))
		}
		return w
	}
	blocks := make([]*block, cfg.NumHiddenLayers)
	for i := range blocks {
		p := fmt.Sprintf("model.layers.%d.", i)
		r, sliding, err := ropeFor(i)
		if err != nil {
			return nil, err
		}
		a := &attention{
			headDim: hd, heads: heads, kvHeads: kvHeads, scale: spec.scale, rope: r,
			normPlace: spec.normPlace, eps: eps,
		}
		if !spec.bias {
			a.qkv = ws.linears([]string{p + "self_attn.q_proj", p + "self_attn.k_proj", p + "self_attn.v_proj"},
				hidden, []int{heads * hd, kvHeads * hd, kvHeads * hd})
		}
		if a.qkv == nil {
			a.q = ws.linear(p+"self_attn.q_proj", hidden, heads*hd, spec.bias)
			a.k = ws.linear(p+"self_attn.k_proj", hidden, kvHeads*hd, spec.bias)
			a.v = ws.linear(p+"self_attn.v_proj", hidden, kvHeads*hd, spec.bias)
		}
		a.o = ws.linear(p+"self_attn.o_proj", heads*hd, hidden, spec.oBias)
		if spec.normPlace != noQKNorm {
			a.qNorm = norm(p+"self_attn.q_norm.weight", hd)
			a.kNorm = norm(p+"self_attn.k_norm.weight", hd)
		}
		b := &block{
			attn:         a,
			mlp:          newMLP(ws, p+"mlp.", hidden, cfg.IntermediateSize, spec.mlpBias, spec.gelu),
			inputNorm:    norm(p+"input_layernorm.weight", hidden),
			postAttnNorm: norm(p+"post_attention_layernorm.weight", hidden),
			eps:          eps,
			sandwich:     spec.sandwich,
			sliding:      sliding,
		}
		if spec.sandwich {
			b.preFFNorm = norm(p+"pre_feedforward_layernorm.weight", hidden)
			b.postFFNorm = norm(p+"post_feedforward_layernorm.weight", hidden)
		}
		if ws.err != nil {
			return nil, ws.err
		}
		blocks[i] = b
	}
	return blocks, nil
}

// newMLP takes the gated MLP at path, gate and up as one linear when
// weightSet.linears can.
func newMLP(ws *weightSet, path string, hidden, width int, bias, gelu bool) *mlp {
	m := &mlp{width: width, gelu: gelu}
	if !bias {
		m.gateUp = ws.linears([]string{path + "gate_proj", path + "up_proj"}, hidden, []int{width, width})
	}
	if m.gateUp == nil {
		m.gate = ws.linear(path+"gate_proj", hidden, width, bias)
		m.up = ws.linear(path+"up_proj", hidden, width, bias)
	}
	m.down = ws.linear(path+"down_proj", width, hidden, bias)
	return m
}
