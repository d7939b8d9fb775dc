package models

import (
	"fmt"
	"strings"

	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models/gguf"
)

// GGUF tensor names → mlx-lm llama module paths (what llama.cpp's converter
// renamed them from).
var (
	ggufLayerNames = map[string]string{
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
	ggufTopNames = map[string]string{"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}
)

// ggufConfig is the HF-style config of a llama-architecture GGUF file.
func ggufConfig(f *gguf.File) (*Config, error) {
	arch := f.Architecture()
	if arch != "llama" {
		return nil, fmt.Errorf("%w %q in GGUF: supported GGUF architectures are llama", ErrUnsupportedModel, arch)
	}
	num := func(key string) (int, error) {
		v, ok := f.Int(arch + "." + key)
		if !ok || v <= 0 || v > maxVocab {
			return 0, fmt.Errorf("GGUF metadata %s.%s is missing or out of range", arch, key)
		}
		return int(v), nil
	}
	c := &Config{ModelType: "llama"}
	var err error
	for _, p := range []struct {
		key string
		dst *int
	}{
		{"embedding_length", &c.HiddenSize}, {"block_count", &c.NumHiddenLayers},
		{"feed_forward_length", &c.IntermediateSize}, {"attention.head_count", &c.NumAttentionHeads},
	} {
		if *p.dst, err = num(p.key); err != nil {
			return nil, err
		}
	}
	kvh, err := num("attention.head_count_kv")
	if err != nil {
		kvh = c.NumAttentionHeads
	}
	c.NumKeyValueHeads = &kvh
	if c.HiddenSize%c.NumAttentionHeads != 0 {
		return nil, fmt.Errorf("embedding_length %d is not a multiple of head_count %d", c.HiddenSize, c.NumAttentionHeads)
	}
	if rd, ok := f.Int(arch + ".rope.dimension_count"); ok && int(rd) != c.HiddenSize/c.NumAttentionHeads {
		return nil, fmt.Errorf("partial rotary embeddings (rope dims %d, head dim %d) are not supported", rd, c.HiddenSize/c.NumAttentionHeads)
	}
	if _, ok := f.Tensor("rope_freqs.weight"); ok {
		return nil, fmt.Errorf("GGUF rope_freqs (Llama 3.1 rope scaling) is not supported; use the safetensors model")
	}
	eps, ok := f.Float(arch + ".attention.layer_norm_rms_epsilon")
	if !ok {
		return nil, fmt.Errorf("GGUF metadata %s.attention.layer_norm_rms_epsilon is missing", arch)
	}
	c.RMSNormEps = &eps
	theta, ok := f.Float(arch + ".rope.freq_base")
	if !ok {
		theta = 10000
	}
	c.RopeTheta = &theta
	if ctx, ok := f.Int(arch + ".context_length"); ok && ctx > 0 {
		n := int(ctx)
		c.MaxPositionEmbeddings = &n
	}
	if v, ok := f.Int(arch + ".vocab_size"); ok && v > 0 {
		c.VocabSize = int(v)
	} else if toks, ok := f.Strings("tokenizer.ggml.tokens"); ok {
		c.VocabSize = len(toks)
	}
	_, hasOutput := f.Tensor("output.weight")
	tied := !hasOutput
	c.TieWordEmbeddings = &tied
	if eos, ok := f.Int("tokenizer.ggml.eos_token_id"); ok {
		c.EOSTokenID = TokenIDs{int(eos)}
	}
	return c, c.validate()
}

// ggufName maps a GGUF tensor base name (without .weight) to a module path.
func ggufName(base string) (path string, kind string, err error) {
	if p, ok := ggufTopNames[base]; ok {
		return p, base, nil
	}
	parts := strings.SplitN(base, ".", 3)
	if len(parts) == 3 && parts[0] == "blk" {
		if m, ok := ggufLayerNames[parts[2]]; ok {
			return "model.layers." + parts[1] + "." + m, parts[2], nil
		}
	}
	return "", "", fmt.Errorf("cannot map GGUF tensor %s to a llama module", base)
}

func loadGGUF(path string) (Model, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot open GGUF model: %w", err)
	}
	defer f.Close() // arrays are copied into MLX before this returns
	cfg, err := ggufConfig(f)
	if err != nil {
		return nil, fmt.Errorf("cannot load GGUF model %s: %w", path, err)
	}
	q := &Quantization{Mode: "affine", Modules: map[string]*mlx.Quant{}}
	src := map[string]tensorSource{}
	for _, ti := range f.Tensors {
		base, ok := strings.CutSuffix(ti.Name, ".weight")
		if !ok {
			return nil, fmt.Errorf("cannot map GGUF tensor %s to a llama module", ti.Name)
		}
		mod, kind, err := ggufName(base)
		if err != nil {
			return nil, err
		}
		heads := 0
		switch kind {
		case "attn_q":
			heads = cfg.NumAttentionHeads
		case "attn_k":
			heads = cfg.kvHeads()
		}
		lt := &lazyGGUF{f: f, name: ti.Name, heads: heads}
		shape := ti.Shape()
		switch ti.Type {
		case gguf.Q4_0, gguf.Q4_1, gguf.Q8_0:
			bits := 4
			if ti.Type == gguf.Q8_0 {
				bits = 8
			}
			if len(shape) != 2 || shape[1]%32 != 0 {
				return nil, fmt.Errorf("GGUF tensor %s: quantized shape %v is not a matrix of whole blocks", ti.Name, shape)
			}
			q.Modules[mod] = &mlx.Quant{GroupSize: 32, Bits: bits, Mode: "affine"}
			src[mod+".weight"] = tensorSource{shape: []int{shape[0], shape[1] * bits / 32}, load: lt.part(0)}
			src[mod+".scales"] = tensorSource{shape: []int{shape[0], shape[1] / 32}, load: lt.part(1)}
			src[mod+".biases"] = tensorSource{shape: []int{shape[0], shape[1] / 32}, load: lt.part(2)}
		default:
			src[mod+".weight"] = tensorSource{shape: shape, load: lt.part(0)}
		}
	}
	if len(q.Modules) == 0 {
		q = nil
	} else {
		// The file type's scheme is the default; only modules stored
		// otherwise (a Q8_0 token_embd in a Q4_1 file) stay listed, as the
		// oracle's converted config.json lists them.
		q.GroupSize, q.Bits = 32, 4
		if _, ok := q.Modules["model.layers.0.self_attn.q_proj"]; ok && q.Modules["model.layers.0.self_attn.q_proj"].Bits == 8 {
			q.Bits = 8
		}
		for k, m := range q.Modules {
			if m.GroupSize == q.GroupSize && m.Bits == q.Bits {
				delete(q.Modules, k)
			}
		}
	}
	cfg.Quantization = q
	d, err := buildLlama(cfg, newWeightSet(src, q))
	if err != nil {
		return nil, fmt.Errorf("cannot load GGUF model %s: %w", path, err)
	}
	d.info.Format = "gguf"
	d.info.Path = path
	d.info.Artifact = newArtifact([]string{path})
	return d, nil
}

// lazyGGUF converts one GGUF tensor on first use and hands out its parts
// (dense data, or packed weight, scales and biases).
type lazyGGUF struct {
	f     *gguf.File
	name  string
	heads int // > 0: undo llama.cpp's rope row permutation with this many heads
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
