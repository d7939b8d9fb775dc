package models

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models/gguf"
	"github.com/mlxgo/mlxgo/models/nn"
)

var ggufTopNames = map[string]string{"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}

// GGUFArchitectures lists the general.architecture values Load reads.
func GGUFArchitectures() []string {
	out := make([]string, 0, len(ggufArchs))
	for k := range ggufArchs {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ggufConfig is the HF-style config of a GGUF file, from its metadata: the
// keys every architecture shares here, the rest from its package's
// nn.GGUF.Config. The config.json bytes are what the architecture's
// Builder reads.
func ggufConfig(f *gguf.File) (*Config, error) {
	c, _, err := ggufConfigJSON(f)
	return c, err
}

func ggufConfigJSON(f *gguf.File) (*Config, []byte, error) {
	arch := f.Architecture()
	a, ok := ggufArchs[arch]
	if !ok {
		return nil, nil, fmt.Errorf("%w %q in GGUF: supported GGUF architectures are %s", ErrUnsupportedModel, arch,
			strings.Join(GGUFArchitectures(), ", "))
	}
	c := &Config{ModelType: a.ModelType}
	var err error
	for _, p := range []struct {
		key string
		dst *int
	}{
		{"embedding_length", &c.HiddenSize}, {"block_count", &c.NumHiddenLayers},
		{"feed_forward_length", &c.IntermediateSize}, {"attention.head_count", &c.NumAttentionHeads},
	} {
		if *p.dst, err = ggufNum(f, arch, p.key); err != nil {
			return nil, nil, err
		}
	}
	kvh, err := ggufNum(f, arch, "attention.head_count_kv")
	if err != nil {
		kvh = c.NumAttentionHeads
	}
	c.NumKeyValueHeads = &kvh
	eps, ok := f.Float(arch + ".attention.layer_norm_rms_epsilon")
	if !ok {
		return nil, nil, fmt.Errorf("GGUF metadata %s.attention.layer_norm_rms_epsilon is missing", arch)
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
		return nil, nil, err
	}
	extra, err := a.Config(nn.GGUFMeta{File: f, Arch: arch}, nn.GGUFHeader{
		HiddenSize: c.HiddenSize, NumHiddenLayers: c.NumHiddenLayers, NumAttentionHeads: c.NumAttentionHeads,
		HasContextLength: c.MaxPositionEmbeddings != nil, HasRopeTheta: c.RopeTheta != nil})
	if err != nil {
		return nil, nil, err
	}
	// The shared keys and the architecture's, as one config.json.
	shared, err := json.Marshal(c)
	if err != nil {
		return nil, nil, err
	}
	keys := map[string]any{}
	if err := json.Unmarshal(shared, &keys); err != nil {
		return nil, nil, err
	}
	for k, v := range extra {
		keys[k] = v
	}
	config, err := json.Marshal(keys)
	if err != nil {
		return nil, nil, err
	}
	c = &Config{}
	if err := json.Unmarshal(config, c); err != nil {
		return nil, nil, err
	}
	return c, config, c.validate()
}

func ggufNum(f *gguf.File, arch, key string) (int, error) {
	v, ok := f.Int(arch + "." + key)
	if !ok || v <= 0 || v > maxVocab {
		return 0, fmt.Errorf("GGUF metadata %s.%s is missing or out of range", arch, key)
	}
	return int(v), nil
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

// ggufName maps a GGUF tensor name to a module path plus the parameter
// (weight or bias), and the GGUF block tensor kind (attn_q …).
func ggufName(a nn.GGUF, name string) (path, kind string, err error) {
	base, param, ok := cutLast(name, ".")
	if !ok || (param != "weight" && param != "bias") {
		return "", "", fmt.Errorf("cannot map GGUF tensor %s to a %s module", name, a.ModelType)
	}
	if p, ok := ggufTopNames[base]; ok {
		return p + "." + param, base, nil
	}
	parts := strings.SplitN(base, ".", 3)
	if len(parts) == 3 && parts[0] == "blk" {
		if m, ok := a.Layer[parts[2]]; ok {
			return "model.layers." + parts[1] + "." + m + "." + param, parts[2], nil
		}
	}
	return "", "", fmt.Errorf("cannot map GGUF tensor %s to a %s module", name, a.ModelType)
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
	cfg, config, err := ggufConfigJSON(f)
	if err != nil {
		return nil, fmt.Errorf("cannot load GGUF model %s: %w", path, err)
	}
	arch := ggufArchs[f.Architecture()]
	q := &Quantization{Mode: "affine", Modules: map[string]*mlx.Quant{}}
	src := map[string]nn.Tensor{}
	for _, ti := range f.Tensors {
		if slices.Contains(arch.MetaTensors, ti.Name) {
			continue
		}
		name, kind, err := ggufName(arch, ti.Name)
		if err != nil {
			return nil, err
		}
		mod, param, _ := cutLast(name, ".")
		heads := 0
		// llama.cpp permutes the q/k rows of some architectures only
		// (convert_hf_to_gguf.py LlamaModel); the others are as in HF.
		if arch.PermutedQK && param == "weight" {
			switch kind {
			case "attn_q":
				heads = cfg.NumAttentionHeads
			case "attn_k":
				heads = cfg.kvHeads()
			}
		}
		lt := &lazyGGUF{f: f, name: ti.Name, heads: heads, widen: arch.Float32 && kind == "token_embd"}
		shape := ti.Shape()
		if bits, ok := gguf.AffineBits(ti.Type); ok && param == "weight" {
			// A matrix, or a stack of them (qwen3moe's experts [E, out, in]):
			// groups run along the last axis either way.
			last := len(shape) - 1
			if last < 1 || shape[last]%32 != 0 {
				return nil, fmt.Errorf("GGUF tensor %s: quantized shape %v is not a matrix of whole blocks", ti.Name, shape)
			}
			lead := shape[:last]
			q.Modules[mod] = &mlx.Quant{GroupSize: 32, Bits: bits, Mode: "affine"}
			src[mod+".weight"] = nn.Tensor{Shape: append(slices.Clone(lead), shape[last]*bits/32), Load: lt.part(0)}
			src[mod+".scales"] = nn.Tensor{Shape: append(slices.Clone(lead), shape[last]/32), Load: lt.part(1)}
			src[mod+".biases"] = nn.Tensor{Shape: append(slices.Clone(lead), shape[last]/32), Load: lt.part(2)}
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
