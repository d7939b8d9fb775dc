package models

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models/gguf"
	"github.com/mlxgo/mlxgo/models/nn"
)

// ggufArch is what one GGUF architecture needs beyond the common keys: its
// model_type, the GGUF block tensor names → mlx-lm module paths (what
// llama.cpp's converter renamed them from), and its own config keys.
type ggufArch struct {
	modelType string
	layer     map[string]string
	config    func(f *gguf.File, arch string, c *Config) error
	// float32: widen the token embedding's float16 scales (exactly) so the
	// activations are float32 rather than float16.
	float32 bool
}

var ggufLlamaLayer = map[string]string{
	"attn_norm":   "input_layernorm",
	"ffn_norm":    "post_attention_layernorm",
	"attn_q":      "self_attn.q_proj",
	"attn_k":      "self_attn.k_proj",
	"attn_v":      "self_attn.v_proj",
	"attn_output": "self_attn.o_proj",
	"ffn_gate":    "mlp.gate_proj",
	"ffn_up":      "mlp.up_proj",
	"ffn_down":    "mlp.down_proj",
}

// with is ggufLlamaLayer with entries replaced or added.
func with(extra map[string]string) map[string]string {
	m := map[string]string{}
	for k, v := range ggufLlamaLayer {
		m[k] = v
	}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

var ggufArchs = map[string]ggufArch{
	"llama": {modelType: "llama", layer: ggufLlamaLayer, config: ggufLlamaConfig},
	"qwen2": {modelType: "qwen2", layer: ggufLlamaLayer, config: ggufQwen2Config},
	"qwen3": {modelType: "qwen3", layer: with(map[string]string{
		"attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm"}), config: ggufQwen3Config},
	// Gemma 3's sandwich norms: llama.cpp calls the norm before the MLP
	// ffn_norm and the ones after attention and MLP post_*_norm.
	"gemma3": {modelType: "gemma3_text", layer: with(map[string]string{
		"ffn_norm":            "pre_feedforward_layernorm",
		"post_attention_norm": "post_attention_layernorm",
		"post_ffw_norm":       "post_feedforward_layernorm",
		"attn_q_norm":         "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm"}), config: ggufGemma3Config,
		// In float16 Gemma 3's residual stream is clipped to ±65504 at every
		// layer (mlx-lm's clip_residual) and rounded to 11 bits; llama.cpp
		// keeps it in float32. Measured on Gemma 3 270M against llama.cpp:
		// mean |Δlogit| 0.50 in float16, 0.25 in float32 (README).
		float32: true},
}

var ggufTopNames = map[string]string{"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}

// GGUFArchitectures lists the general.architecture values Load reads.
func GGUFArchitectures() []string { return []string{"gemma3", "llama", "qwen2", "qwen3"} }

// ggufConfig is the HF-style config of a GGUF file, from its metadata.
func ggufConfig(f *gguf.File) (*Config, error) {
	arch := f.Architecture()
	a, ok := ggufArchs[arch]
	if !ok {
		return nil, fmt.Errorf("%w %q in GGUF: supported GGUF architectures are %s", ErrUnsupportedModel, arch,
			strings.Join(GGUFArchitectures(), ", "))
	}
	c := &Config{ModelType: a.modelType}
	var err error
	for _, p := range []struct {
		key string
		dst *int
	}{
		{"embedding_length", &c.HiddenSize}, {"block_count", &c.NumHiddenLayers},
		{"feed_forward_length", &c.IntermediateSize}, {"attention.head_count", &c.NumAttentionHeads},
	} {
		if *p.dst, err = ggufNum(f, arch, p.key); err != nil {
			return nil, err
		}
	}
	kvh, err := ggufNum(f, arch, "attention.head_count_kv")
	if err != nil {
		kvh = c.NumAttentionHeads
	}
	c.NumKeyValueHeads = &kvh
	eps, ok := f.Float(arch + ".attention.layer_norm_rms_epsilon")
	if !ok {
		return nil, fmt.Errorf("GGUF metadata %s.attention.layer_norm_rms_epsilon is missing", arch)
	}
	c.RMSNormEps = &eps
	if theta, ok := f.Float(arch + ".rope.freq_base"); ok {
		c.RopeTheta = &theta
	}
	if ctx, ok := f.Int(arch + ".context_length"); ok && ctx > 0 && ctx <= maxVocab {
		n := int(ctx)
		c.MaxPositionEmbeddings = &n
	}
	if v, ok := f.Int(arch + ".vocab_size"); ok && v > 0 && v <= maxVocab {
		c.VocabSize = int(v)
	} else if toks, ok := f.Strings("tokenizer.ggml.tokens"); ok {
		c.VocabSize = len(toks)
	}
	_, hasOutput := f.Tensor("output.weight")
	tied := !hasOutput
	c.TieWordEmbeddings = &tied
	if eos, ok := f.Int("tokenizer.ggml.eos_token_id"); ok && eos >= 0 && eos <= maxVocab {
		c.EOSTokenID = TokenIDs{int(eos)}
	}
	if err := ggufRopeScaling(f, arch, c); err != nil {
		return nil, err
	}
	if err := a.config(f, arch, c); err != nil {
		return nil, err
	}
	return c, c.validate()
}

func ggufNum(f *gguf.File, arch, key string) (int, error) {
	v, ok := f.Int(arch + "." + key)
	if !ok || v <= 0 || v > maxVocab {
		return 0, fmt.Errorf("GGUF metadata %s.%s is missing or out of range", arch, key)
	}
	return int(v), nil
}

// ggufHeadDim is attention.key_length, checked against value_length (the
// supported architectures have one head dimension), else hidden/heads.
func ggufHeadDim(f *gguf.File, arch string, c *Config) (int, error) {
	k, err := ggufNum(f, arch, "attention.key_length")
	if err != nil {
		if c.HiddenSize%c.NumAttentionHeads != 0 {
			return 0, fmt.Errorf("embedding_length %d is not a multiple of head_count %d", c.HiddenSize, c.NumAttentionHeads)
		}
		return c.HiddenSize / c.NumAttentionHeads, nil
	}
	if v, err := ggufNum(f, arch, "attention.value_length"); err == nil && v != k {
		return 0, fmt.Errorf("attention key_length %d differs from value_length %d", k, v)
	}
	return k, nil
}

// ggufFullRope refuses partial rotary embeddings, which no supported
// architecture has.
func ggufFullRope(f *gguf.File, arch string, headDim int) error {
	if rd, ok := f.Int(arch + ".rope.dimension_count"); ok && int(rd) != headDim {
		return fmt.Errorf("partial rotary embeddings (rope dims %d, head dim %d) are not supported", rd, headDim)
	}
	return nil
}

// ggufRopeScaling maps rope.scaling.type/factor (linear only; yarn and the
// others need more than GGUF's keys say) to rope_scaling.
func ggufRopeScaling(f *gguf.File, arch string, c *Config) error {
	typ, ok := f.String(arch + ".rope.scaling.type")
	if !ok || typ == "none" {
		return nil
	}
	factor, _ := f.Float(arch + ".rope.scaling.factor")
	if typ != "linear" {
		return fmt.Errorf("GGUF rope scaling %q is not supported (linear)", typ)
	}
	if factor == 1 || factor == 0 {
		return nil
	}
	c.RopeScaling = RopeScaling{"type": "linear", "factor": factor}
	return nil
}

func ggufLlamaConfig(f *gguf.File, arch string, c *Config) error {
	if c.HiddenSize%c.NumAttentionHeads != 0 {
		return fmt.Errorf("embedding_length %d is not a multiple of head_count %d", c.HiddenSize, c.NumAttentionHeads)
	}
	if err := ggufFullRope(f, arch, c.HiddenSize/c.NumAttentionHeads); err != nil {
		return err
	}
	if _, ok := f.Tensor("rope_freqs.weight"); ok {
		return fmt.Errorf("GGUF rope_freqs (Llama 3.1 rope scaling) is not supported; use the safetensors model")
	}
	if c.RopeTheta == nil {
		theta := 10000.0
		c.RopeTheta = &theta
	}
	return nil
}

// ggufQwen2Config: qwen2 has q/k/v biases (tensors attn_q.bias…) and head
// dim hidden/heads; llama.cpp's converter leaves its q/k rows unpermuted.
func ggufQwen2Config(f *gguf.File, arch string, c *Config) error {
	if c.HiddenSize%c.NumAttentionHeads != 0 {
		return fmt.Errorf("embedding_length %d is not a multiple of head_count %d", c.HiddenSize, c.NumAttentionHeads)
	}
	return ggufFullRope(f, arch, c.HiddenSize/c.NumAttentionHeads)
}

// ggufQwen3Config: an explicit head dim (key_length), q/k norms.
func ggufQwen3Config(f *gguf.File, arch string, c *Config) error {
	hd, err := ggufHeadDim(f, arch, c)
	if err != nil {
		return err
	}
	c.HeadDim = &hd
	if c.MaxPositionEmbeddings == nil {
		return fmt.Errorf("GGUF metadata %s.context_length is missing", arch)
	}
	if c.RopeTheta == nil {
		return fmt.Errorf("GGUF metadata %s.rope.freq_base is missing", arch)
	}
	return ggufFullRope(f, arch, hd)
}

// ggufGemma3Config follows what llama.cpp (src/llama-model.cpp) assumes for
// gemma3, since the GGUF keys do not carry it: every 6th layer global
// (unless attention.sliding_window_pattern says otherwise), local rope base
// 10000, and queries scaled by 1/sqrt(key_length), except the 62-layer 27B
// whose query_pre_attn_scalar is hidden/heads. (The converter stores the
// norms as 1 + weight: models/gemma3 reads Weights.GGUF.)
func ggufGemma3Config(f *gguf.File, arch string, c *Config) error {
	hd, err := ggufHeadDim(f, arch, c)
	if err != nil {
		return err
	}
	c.HeadDim = &hd
	if err := ggufFullRope(f, arch, hd); err != nil {
		return err
	}
	window, err := ggufNum(f, arch, "attention.sliding_window")
	if err != nil {
		return err
	}
	c.SlidingWindow = &window
	pattern := 6
	if p, ok := f.Int(arch + ".attention.sliding_window_pattern"); ok && p > 0 && p <= maxLayers {
		pattern = int(p)
	}
	c.SlidingWindowPattern = &pattern
	local := 10000.0
	c.RopeLocalBaseFreq = &local
	scalar := float64(hd)
	if c.NumHiddenLayers == 62 {
		scalar = float64(c.HiddenSize / c.NumAttentionHeads)
	}
	c.QueryPreAttnScalar = &scalar
	return nil
}

// ggufName maps a GGUF tensor name to a module path plus the parameter
// (weight or bias), and the GGUF block tensor kind (attn_q …).
func ggufName(a ggufArch, name string) (path, kind string, err error) {
	base, param, ok := cutLast(name, ".")
	if !ok || (param != "weight" && param != "bias") {
		return "", "", fmt.Errorf("cannot map GGUF tensor %s to a %s module", name, a.modelType)
	}
	if p, ok := ggufTopNames[base]; ok {
		return p + "." + param, base, nil
	}
	parts := strings.SplitN(base, ".", 3)
	if len(parts) == 3 && parts[0] == "blk" {
		if m, ok := a.layer[parts[2]]; ok {
			return "model.layers." + parts[1] + "." + m + "." + param, parts[2], nil
		}
	}
	return "", "", fmt.Errorf("cannot map GGUF tensor %s to a %s module", name, a.modelType)
}

func cutLast(s, sep string) (string, string, bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

func loadGGUF(path string, opts LoadOptions) (Model, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot open GGUF model: %w", err)
	}
	defer f.Close() // arrays are copied into MLX before this returns
	if st, err := os.Stat(path); err == nil {
		if err := fitsDevice(st.Size()); err != nil {
			return nil, fmt.Errorf("cannot load GGUF model %s: %w", path, err)
		}
	}
	cfg, err := ggufConfig(f)
	if err != nil {
		return nil, fmt.Errorf("cannot load GGUF model %s: %w", path, err)
	}
	arch := ggufArchs[f.Architecture()]
	q := &Quantization{Mode: "affine", Modules: map[string]*mlx.Quant{}}
	src := map[string]nn.Tensor{}
	for _, ti := range f.Tensors {
		name, kind, err := ggufName(arch, ti.Name)
		if err != nil {
			return nil, err
		}
		mod, param, _ := cutLast(name, ".")
		heads := 0
		// llama.cpp permutes the q/k rows of llama-architecture files only
		// (convert_hf_to_gguf.py LlamaModel); qwen and gemma are as in HF.
		if f.Architecture() == "llama" && param == "weight" {
			switch kind {
			case "attn_q":
				heads = cfg.NumAttentionHeads
			case "attn_k":
				heads = cfg.kvHeads()
			}
		}
		lt := &lazyGGUF{f: f, name: ti.Name, heads: heads, widen: arch.float32 && kind == "token_embd"}
		shape := ti.Shape()
		if bits, ok := gguf.AffineBits(ti.Type); ok && param == "weight" {
			if len(shape) != 2 || shape[1]%32 != 0 {
				return nil, fmt.Errorf("GGUF tensor %s: quantized shape %v is not a matrix of whole blocks", ti.Name, shape)
			}
			q.Modules[mod] = &mlx.Quant{GroupSize: 32, Bits: bits, Mode: "affine"}
			src[mod+".weight"] = nn.Tensor{Shape: []int{shape[0], shape[1] * bits / 32}, Load: lt.part(0)}
			src[mod+".scales"] = nn.Tensor{Shape: []int{shape[0], shape[1] / 32}, Load: lt.part(1)}
			src[mod+".biases"] = nn.Tensor{Shape: []int{shape[0], shape[1] / 32}, Load: lt.part(2)}
			continue
		}
		src[name] = nn.Tensor{Shape: shape, Load: lt.part(0)}
	}
	if len(q.Modules) == 0 {
		q = nil
	} else {
		// The scheme of the first layer's q_proj is the default; only
		// modules stored otherwise (a Q8_0 token_embd in a Q4_1 file) stay
		// listed, as the oracle's converted config.json lists them.
		q.GroupSize, q.Bits = 32, 4
		if m := q.Modules["model.layers.0.self_attn.q_proj"]; m != nil {
			q.Bits = m.Bits
		}
		for k, m := range q.Modules {
			if m.GroupSize == q.GroupSize && m.Bits == q.Bits {
				delete(q.Modules, k)
			}
		}
	}
	// The architecture reads the metadata as the config.json it stands for.
	config, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("cannot load GGUF model %s: %w", path, err)
	}
	cfg.Quantization = q
	w := nn.NewWeights(src, q)
	w.GGUF = true
	if err := castWeights(w, opts); err != nil {
		return nil, err
	}
	adapters, infos, closeAdapters, err := openAdapters(w, opts, cfg.NumHiddenLayers)
	if err != nil {
		return nil, err
	}
	defer closeAdapters()
	m, err := build(cfg, config, w)
	if err != nil {
		return nil, fmt.Errorf("cannot load GGUF model %s: %w", path, err)
	}
	m.info.Format = "gguf"
	m.info.CastTo = opts.Dtype
	m.info.Path = path
	m.info.Artifact = newArtifact([]string{path})
	return adapt(m, adapters, infos), nil
}

// lazyGGUF converts one GGUF tensor on first use and hands out its parts
// (dense data, or packed weight, scales and biases).
type lazyGGUF struct {
	f     *gguf.File
	name  string
	heads int  // > 0: undo llama.cpp's rope row permutation with this many heads
	widen bool // float32 scales and biases (Affine.WidenScales)
	t     *gguf.Tensor
	err   error
}

func (l *lazyGGUF) part(i int) func() (*mlx.Array, error) {
	return func() (*mlx.Array, error) {
		if l.t == nil && l.err == nil {
			l.t, l.err = l.f.Load(l.name)
			if l.err == nil && l.heads > 0 {
				l.t, l.err = l.t.UnpermuteRopeRows(l.heads)
			}
			if l.err == nil && l.widen && l.t.Quant != nil {
				l.t.Quant.WidenScales()
			}
		}
		if l.err != nil {
			return nil, l.err
		}
		t := l.t
		if t.Quant == nil {
			if i != 0 {
				return nil, fmt.Errorf("GGUF tensor %s is not quantized", l.name)
			}
			dt, err := mlx.ParseDtype(string(t.DType))
			if err != nil {
				return nil, err
			}
			return mlx.FromBytes(t.Data, dt, t.Shape...), nil
		}
		a := t.Quant
		sdt, err := mlx.ParseDtype(string(a.ScaleDType))
		if err != nil {
			return nil, err
		}
		switch i {
		case 0:
			return mlx.FromBytes(a.Weight, mlx.Uint32, a.WeightShape...), nil
		case 1:
			return mlx.FromBytes(a.Scales, sdt, a.ScaleShape...), nil
		default:
			return mlx.FromBytes(a.Biases, sdt, a.ScaleShape...), nil
		}
	}
}
