// Package whisper is OpenAI's Whisper speech recognizer on MLX, built as
// mlx-whisper 0.4.3's whisper.py builds it (the same ops in the same order,
// the same dtypes), so that on the same libmlx its encoder output and decoder
// logits are bit-identical to mlx-whisper's; decode.go and transcribe.go are
// its decoding.py and transcribe.py (greedy decoding, OpenAI's logit filters,
// temperature fallback, long-form seeking).
//
// Weights load from a CTranslate2 Whisper directory (model.bin, as
// faster-whisper uses it; ct2.go reads it) or from mlx-whisper's own layout
// (config.json + weights.safetensors). Everything that touches MLX runs on the
// executor (inside mlx.Do); weights are detached from scopes and freed by Close.
package whisper

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models/safetensors"
)

// Dims are Whisper's model dimensions (mlx-whisper's ModelDimensions).
type Dims struct {
	NMels       int `json:"n_mels"`
	NAudioCtx   int `json:"n_audio_ctx"`
	NAudioState int `json:"n_audio_state"`
	NAudioHead  int `json:"n_audio_head"`
	NAudioLayer int `json:"n_audio_layer"`
	NVocab      int `json:"n_vocab"`
	NTextCtx    int `json:"n_text_ctx"`
	NTextState  int `json:"n_text_state"`
	NTextHead   int `json:"n_text_head"`
	NTextLayer  int `json:"n_text_layer"`
}

// Multilingual reports whether the vocabulary has the language tokens.
func (d Dims) Multilingual() bool { return d.NVocab >= 51865 }

// NumLanguages is the number of language tokens (mlx-whisper's num_languages).
func (d Dims) NumLanguages() int {
	n := d.NVocab - 51765
	if d.Multilingual() {
		n--
	}
	return n
}

func (d Dims) check() error {
	for _, v := range []int{d.NMels, d.NAudioCtx, d.NAudioState, d.NAudioHead, d.NAudioLayer, d.NVocab, d.NTextCtx, d.NTextState, d.NTextHead, d.NTextLayer} {
		if v <= 0 || v > 1<<20 {
			return fmt.Errorf("model dimensions %+v: every one must be positive", d)
		}
	}
	switch {
	case d.NAudioState%d.NAudioHead != 0 || d.NTextState%d.NTextHead != 0:
		return fmt.Errorf("model dimensions %+v: state not a multiple of the heads", d)
	case d.NAudioState != d.NTextState:
		return fmt.Errorf("model dimensions %+v: audio and text state differ", d)
	case d.NMels != 80 && d.NMels != 128:
		return fmt.Errorf("%d mel bins: Whisper uses 80 or 128", d.NMels)
	case d.NAudioCtx*2 != 3000:
		return fmt.Errorf("n_audio_ctx %d: Whisper's 30 s window has 1500 positions", d.NAudioCtx)
	case d.NVocab < 51864:
		return fmt.Errorf("n_vocab %d is smaller than Whisper's", d.NVocab)
	}
	return nil
}

type linear struct{ w, b *mlx.Array } // w is [out, in], torch's layout

// apply is nn.Linear: addmm with a bias, x @ W.T without.
func (l linear) apply(x *mlx.Array) *mlx.Array {
	if l.b != nil {
		return mlx.Addmm(l.b, x, mlx.Transpose(l.w), 1, 1)
	}
	return mlx.Matmul(x, mlx.Transpose(l.w))
}

type norm struct{ w, b *mlx.Array }

func (n norm) apply(x *mlx.Array) *mlx.Array { return mlx.LayerNorm(x, n.w, n.b, 1e-5) }

type attention struct {
	query, key, value, out linear
	nHead                  int
}

type block struct {
	attn, cross     *attention
	attnLn, crossLn norm
	mlp1, mlp2      linear
	mlpLn           norm
}

// Model is a loaded Whisper model.
type Model struct {
	Dims Dims
	// Dtype is the weights' dtype; Activation the dtype of the mel, the
	// encoder's positions and the decoder's mask (mlx-whisper's dtype
	// argument: float16 unless fp16=False asks for float32). The weights are
	// never converted: MLX promotes them per op, as in mlx-whisper.
	Dtype, Activation mlx.Dtype
	// Source names where the weights came from, e.g. "ctranslate2 model.bin".
	Source string
	// AlignmentHeads are the (layer, head) pairs word timestamps read
	// (CTranslate2 config.json's alignment_heads); empty: mlx-whisper's
	// default, every head of the last half of the decoder layers.
	AlignmentHeads [][2]int

	conv1w, conv1b, conv2w, conv2b *mlx.Array
	audioPos                       *mlx.Array
	encBlocks                      []block
	lnPost                         norm

	tokEmb, textPos *mlx.Array
	// tokEmbT is tokEmb transposed once at load and made contiguous: the
	// output projection x @ Wᵀ reads it (the same products in the same order;
	// TestL1AgainstMLXWhisper holds it to mlx-whisper's bits) at about two
	// thirds of the time of the transposed view on the CPU pack.
	tokEmbT   *mlx.Array
	decBlocks []block
	ln        norm

	arrays []*mlx.Array
}

// Close frees the weights.
func (m *Model) Close() {
	for _, a := range m.arrays {
		a.Free()
	}
	m.arrays = nil
}

// Load reads a Whisper model directory: CTranslate2 (model.bin) or
// mlx-whisper's layout (config.json + weights.safetensors). Call it inside mlx.Do.
func Load(dir string) (*Model, error) {
	if _, err := os.Stat(filepath.Join(dir, "model.bin")); err == nil {
		return loadCT2(dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "weights.safetensors")); err == nil {
		return loadMLX(dir)
	}
	if st, err := os.Stat(dir); err != nil {
		return nil, err
	} else if !st.IsDir() {
		return nil, fmt.Errorf("%s is not a directory (a Whisper model is a directory: model.bin + tokenizer.json, or config.json + weights.safetensors)", dir)
	}
	return nil, fmt.Errorf("%s holds no model.bin (CTranslate2) or weights.safetensors (mlx-whisper)", dir)
}

// tensor is one weight in mlx-whisper's naming, as raw bytes.
type tensor struct {
	shape []int
	dtype mlx.Dtype
	data  []byte
}

func loadCT2(dir string) (*Model, error) {
	ct, err := ReadCT2File(filepath.Join(dir, "model.bin"))
	if err != nil {
		return nil, err
	}
	if !isWhisperSpec(ct.Spec) {
		return nil, fmt.Errorf("%s: %w (%q)", filepath.Join(dir, "model.bin"), errNotWhisperSpec, ct.Spec)
	}
	ts, dims, err := ct2Tensors(ct)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "model.bin"), err)
	}
	m, err := build(dims, ts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "model.bin"), err)
	}
	m.Source = fmt.Sprintf("CTranslate2 model.bin (binary version %d, %s revision %d)", ct.Version, ct.Spec, ct.Revision)
	if b, err := os.ReadFile(filepath.Join(dir, "config.json")); err == nil {
		var cfg struct {
			AlignmentHeads [][2]int `json:"alignment_heads"`
		}
		if err := json.Unmarshal(b, &cfg); err != nil {
			m.Close()
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "config.json"), err)
		}
		for _, lh := range cfg.AlignmentHeads {
			if lh[0] < 0 || lh[0] >= m.Dims.NTextLayer || lh[1] < 0 || lh[1] >= m.Dims.NTextHead {
				m.Close()
				return nil, fmt.Errorf("%s: alignment head %v outside %d layers of %d heads", filepath.Join(dir, "config.json"), lh, m.Dims.NTextLayer, m.Dims.NTextHead)
			}
		}
		m.AlignmentHeads = cfg.AlignmentHeads
	}
	return m, nil
}

func ct2Dtype(v *CT2Var) (mlx.Dtype, error) {
	switch v.Dtype {
	case CT2Float32:
		return mlx.Float32, nil
	case CT2Float16:
		return mlx.Float16, nil
	case CT2BFloat16:
		return mlx.BFloat16, nil
	}
	return 0, fmt.Errorf("%s is %s: quantized CTranslate2 models (int8, int16) are not supported", v.Name, v.Dtype)
}

// ct2Tensors maps a WhisperSpec's variables onto mlx-whisper's names: the
// fused q|k|v (self-attention) and k|v (cross-attention) projections are
// split by rows, the key's bias (zeros: Whisper's key has none) dropped, and
// the convolutions moved to MLX's [out, kernel, in] layout.
func ct2Tensors(ct *CT2Model) (map[string]tensor, Dims, error) {
	ts := map[string]tensor{}
	var d Dims
	get := func(name string, rank int) (*CT2Var, mlx.Dtype, error) {
		v, ok := ct.Var(name)
		if !ok {
			return nil, 0, fmt.Errorf("cannot find variable %s", name)
		}
		if len(v.Shape) != rank {
			return nil, 0, fmt.Errorf("variable %s has shape %v, want rank %d", name, v.Shape, rank)
		}
		dt, err := ct2Dtype(v)
		return v, dt, err
	}
	put := func(name, src string, rank int) error {
		v, dt, err := get(src, rank)
		if err != nil {
			return err
		}
		ts[name] = tensor{shape: v.Shape, dtype: dt, data: v.Data}
		return nil
	}
	// rows splits a [n*k, in] weight (or [n*k] bias) into its k row blocks.
	rows := func(src string, rank, k int, names []string, zeroOK map[int]bool) error {
		v, dt, err := get(src, rank)
		if err != nil {
			return err
		}
		if v.Shape[0]%k != 0 {
			return fmt.Errorf("variable %s has %d rows, not %d equal parts", src, v.Shape[0], k)
		}
		n := v.Shape[0] / k
		stride := len(v.Data) / k
		for i, name := range names {
			part := v.Data[i*stride : (i+1)*stride]
			if name == "" {
				if zeroOK[i] && !allZero(part) {
					return fmt.Errorf("variable %s: the key projection has a non-zero bias, which Whisper's key has not", src)
				}
				continue
			}
			shape := append([]int{n}, v.Shape[1:]...)
			ts[name] = tensor{shape: shape, dtype: dt, data: part}
		}
		return nil
	}
	conv := func(name, src string) error {
		v, dt, err := get(src, 3)
		if err != nil {
			return err
		}
		out, in, k := v.Shape[0], v.Shape[1], v.Shape[2]
		sz := dt.Size()
		b := make([]byte, len(v.Data))
		for o := range out {
			for i := range in {
				for j := range k {
					copy(b[((o*k+j)*in+i)*sz:][:sz], v.Data[((o*in+i)*k+j)*sz:][:sz])
				}
			}
		}
		ts[name] = tensor{shape: []int{out, k, in}, dtype: dt, data: b}
		return nil
	}
	scalar := func(name string) (int, error) {
		v, ok := ct.Var(name)
		if !ok {
			return 0, fmt.Errorf("cannot find variable %s", name)
		}
		n, err := v.Scalar()
		return int(n), err
	}
	var err error
	if d.NAudioHead, err = scalar("encoder/num_heads"); err != nil {
		return nil, d, err
	}
	if d.NTextHead, err = scalar("decoder/num_heads"); err != nil {
		return nil, d, err
	}
	if pre, err := scalar("decoder/pre_norm"); err != nil || pre != 1 {
		return nil, d, fmt.Errorf("decoder/pre_norm must be 1 for Whisper (%d, %v)", pre, err)
	}
	for ; ; d.NAudioLayer++ {
		if _, ok := ct.Var(fmt.Sprintf("encoder/layer_%d/ffn/linear_0/weight", d.NAudioLayer)); !ok {
			break
		}
	}
	for ; ; d.NTextLayer++ {
		if _, ok := ct.Var(fmt.Sprintf("decoder/layer_%d/ffn/linear_0/weight", d.NTextLayer)); !ok {
			break
		}
	}
	lin := func(name, src string, bias bool) error {
		if err := put(name+".weight", src+"/weight", 2); err != nil {
			return err
		}
		if bias {
			return put(name+".bias", src+"/bias", 1)
		}
		return nil
	}
	ln := func(name, src string) error {
		if err := put(name+".weight", src+"/gamma", 1); err != nil {
			return err
		}
		return put(name+".bias", src+"/beta", 1)
	}
	steps := []func() error{
		func() error { return conv("encoder.conv1.weight", "encoder/conv1/weight") },
		func() error { return put("encoder.conv1.bias", "encoder/conv1/bias", 1) },
		func() error { return conv("encoder.conv2.weight", "encoder/conv2/weight") },
		func() error { return put("encoder.conv2.bias", "encoder/conv2/bias", 1) },
		func() error { return ln("encoder.ln_post", "encoder/layer_norm") },
		func() error { return put("decoder.token_embedding.weight", "decoder/embeddings/weight", 2) },
		func() error { return put("decoder.positional_embedding", "decoder/position_encodings/encodings", 2) },
		func() error { return ln("decoder.ln", "decoder/layer_norm") },
	}
	selfAttn := func(p, src string) []func() error {
		return []func() error{
			func() error {
				return rows(src+"/linear_0/weight", 2, 3, []string{p + ".query.weight", p + ".key.weight", p + ".value.weight"}, nil)
			},
			func() error {
				return rows(src+"/linear_0/bias", 1, 3, []string{p + ".query.bias", "", p + ".value.bias"}, map[int]bool{1: true})
			},
			func() error { return lin(p+".out", src+"/linear_1", true) },
		}
	}
	for i := range d.NAudioLayer {
		p, src := fmt.Sprintf("encoder.blocks.%d", i), fmt.Sprintf("encoder/layer_%d", i)
		steps = append(steps, selfAttn(p+".attn", src+"/self_attention")...)
		steps = append(steps,
			func() error { return ln(p+".attn_ln", src+"/self_attention/layer_norm") },
			func() error { return lin(p+".mlp1", src+"/ffn/linear_0", true) },
			func() error { return lin(p+".mlp2", src+"/ffn/linear_1", true) },
			func() error { return ln(p+".mlp_ln", src+"/ffn/layer_norm") })
	}
	for i := range d.NTextLayer {
		p, src := fmt.Sprintf("decoder.blocks.%d", i), fmt.Sprintf("decoder/layer_%d", i)
		steps = append(steps, selfAttn(p+".attn", src+"/self_attention")...)
		steps = append(steps,
			func() error { return ln(p+".attn_ln", src+"/self_attention/layer_norm") },
			func() error { return lin(p+".cross_attn.query", src+"/attention/linear_0", true) },
			func() error {
				return rows(src+"/attention/linear_1/weight", 2, 2, []string{p + ".cross_attn.key.weight", p + ".cross_attn.value.weight"}, nil)
			},
			func() error {
				return rows(src+"/attention/linear_1/bias", 1, 2, []string{"", p + ".cross_attn.value.bias"}, map[int]bool{0: true})
			},
			func() error { return lin(p+".cross_attn.out", src+"/attention/linear_2", true) },
			func() error { return ln(p+".cross_attn_ln", src+"/attention/layer_norm") },
			func() error { return lin(p+".mlp1", src+"/ffn/linear_0", true) },
			func() error { return lin(p+".mlp2", src+"/ffn/linear_1", true) },
			func() error { return ln(p+".mlp_ln", src+"/ffn/layer_norm") })
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return nil, d, err
		}
	}
	c1 := ts["encoder.conv1.weight"].shape
	d.NMels, d.NAudioState = c1[2], c1[0]
	if v, ok := ct.Var("encoder/position_encodings/encodings"); ok && len(v.Shape) == 2 {
		d.NAudioCtx = v.Shape[0]
	}
	d.NVocab = ts["decoder.token_embedding.weight"].shape[0]
	d.NTextCtx = ts["decoder.positional_embedding"].shape[0]
	d.NTextState = ts["decoder.token_embedding.weight"].shape[1]
	return ts, d, d.check()
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 && c != 0x80 { // +0 or -0 in any float encoding's top byte
			return false
		}
	}
	return true
}

func loadMLX(dir string) (*Model, error) {
	data, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, fmt.Errorf("cannot read whisper config: %w", err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "config.json"), err)
	}
	if _, ok := raw["quantization"]; ok {
		return nil, fmt.Errorf("%s: quantized mlx-whisper models are not supported yet", filepath.Join(dir, "config.json"))
	}
	var d Dims
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "config.json"), err)
	}
	if err := d.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "config.json"), err)
	}
	// mlx-whisper's file is weights.safetensors, a name OpenDir does not look for.
	file, err := safetensors.Open(filepath.Join(dir, "weights.safetensors"))
	if err != nil {
		return nil, fmt.Errorf("cannot open whisper weights: %w", err)
	}
	defer file.Close()
	ts := map[string]tensor{}
	for _, t := range file.Tensors {
		var dt mlx.Dtype
		switch t.DType {
		case safetensors.F32:
			dt = mlx.Float32
		case safetensors.F16:
			dt = mlx.Float16
		case safetensors.BF16:
			dt = mlx.BFloat16
		default:
			return nil, fmt.Errorf("weight %s has dtype %s, want F32, F16 or BF16", t.Name, t.DType)
		}
		ts[t.Name] = tensor{shape: t.Shape, dtype: dt, data: file.Data(t)}
	}
	m, err := build(d, ts)
	if err != nil {
		return nil, fmt.Errorf("cannot load whisper model from %s: %w", dir, err)
	}
	m.Source = "mlx-whisper weights.safetensors"
	return m, nil
}

// build makes the model from weights in mlx-whisper's naming.
func build(d Dims, ts map[string]tensor) (m *Model, err error) {
	m = &Model{Dims: d}
	used := map[string]bool{}
	defer func() {
		if err != nil {
			m.Close()
			m = nil
		}
	}()
	te, ok := ts["decoder.token_embedding.weight"]
	if !ok {
		return nil, fmt.Errorf("cannot find weight decoder.token_embedding.weight")
	}
	dt := te.dtype
	m.Dtype = dt
	get := func(name string, shape ...int) *mlx.Array {
		if err != nil {
			return nil
		}
		t, ok := ts[name]
		if !ok {
			err = fmt.Errorf("cannot find weight %s", name)
			return nil
		}
		if !slices.Equal(t.shape, shape) {
			err = fmt.Errorf("weight %s has shape %v, want %v", name, t.shape, shape)
			return nil
		}
		if t.dtype != dt {
			err = fmt.Errorf("weight %s is %s, the model's other weights %s", name, t.dtype, dt)
			return nil
		}
		a := mlx.FromBytes(t.data, t.dtype, t.shape...)
		if e := mlx.Eval(a); e != nil {
			err = fmt.Errorf("cannot load weight %s: %w", name, e)
			return nil
		}
		mlx.Detach(a)
		m.arrays = append(m.arrays, a)
		used[name] = true
		return a
	}
	lin := func(p string, in, out int, bias bool) linear {
		l := linear{w: get(p+".weight", out, in)}
		if bias {
			l.b = get(p+".bias", out)
		}
		return l
	}
	ln := func(p string, n int) norm { return norm{w: get(p+".weight", n), b: get(p+".bias", n)} }
	att := func(p string, n, heads int) *attention {
		return &attention{
			query: lin(p+".query", n, n, true), key: lin(p+".key", n, n, false),
			value: lin(p+".value", n, n, true), out: lin(p+".out", n, n, true), nHead: heads,
		}
	}
	blk := func(p string, n, heads int, cross bool) block {
		b := block{attn: att(p+".attn", n, heads), attnLn: ln(p+".attn_ln", n)}
		if cross {
			b.cross, b.crossLn = att(p+".cross_attn", n, heads), ln(p+".cross_attn_ln", n)
		}
		b.mlp1, b.mlp2, b.mlpLn = lin(p+".mlp1", n, 4*n, true), lin(p+".mlp2", 4*n, n, true), ln(p+".mlp_ln", n)
		return b
	}
	n := d.NAudioState
	m.conv1w, m.conv1b = get("encoder.conv1.weight", n, 3, d.NMels), get("encoder.conv1.bias", n)
	m.conv2w, m.conv2b = get("encoder.conv2.weight", n, 3, n), get("encoder.conv2.bias", n)
	for i := range d.NAudioLayer {
		m.encBlocks = append(m.encBlocks, blk(fmt.Sprintf("encoder.blocks.%d", i), n, d.NAudioHead, false))
	}
	m.lnPost = ln("encoder.ln_post", n)
	m.tokEmb = get("decoder.token_embedding.weight", d.NVocab, d.NTextState)
	m.textPos = get("decoder.positional_embedding", d.NTextCtx, d.NTextState)
	if err == nil {
		m.tokEmbT = mlx.Contiguous(mlx.Transpose(m.tokEmb))
		if e := mlx.Eval(m.tokEmbT); e != nil {
			return nil, fmt.Errorf("cannot transpose the token embedding: %w", e)
		}
		mlx.Detach(m.tokEmbT)
		m.arrays = append(m.arrays, m.tokEmbT)
	}
	for i := range d.NTextLayer {
		m.decBlocks = append(m.decBlocks, blk(fmt.Sprintf("decoder.blocks.%d", i), d.NTextState, d.NTextHead, true))
	}
	m.ln = ln("decoder.ln", d.NTextState)
	if err != nil {
		return nil, err
	}
	if e := m.SetActivation(dt); e != nil {
		return nil, e
	}
	var extra []string
	for name := range ts {
		if !used[name] && name != "encoder.positional_embedding" && !strings.HasPrefix(name, "alignment_heads") {
			extra = append(extra, name)
		}
	}
	if len(extra) > 0 {
		slices.Sort(extra)
		return nil, fmt.Errorf("unexpected weights: %s", strings.Join(extra, ", "))
	}
	return m, nil
}

// SetActivation sets the activation dtype (float16 or float32) and
// computes the encoder's sinusoids for it, as mlx-whisper's sinusoids()
// does (float32 exp, sin and cos on MLX), cast to that dtype.
func (m *Model) SetActivation(dt mlx.Dtype) error {
	if dt != mlx.Float16 && dt != mlx.Float32 && dt != mlx.BFloat16 {
		return fmt.Errorf("activation dtype %s: want float16 or float32", dt)
	}
	pos := mlx.AsType(sinusoids(m.Dims.NAudioCtx, m.Dims.NAudioState), dt)
	if e := mlx.Eval(pos); e != nil {
		return fmt.Errorf("cannot compute the positional embedding: %w", e)
	}
	mlx.Detach(pos)
	if m.audioPos != nil {
		m.arrays = slices.DeleteFunc(m.arrays, func(a *mlx.Array) bool { return a == m.audioPos })
		m.audioPos.Free()
	}
	m.audioPos, m.Activation = pos, dt
	m.arrays = append(m.arrays, pos)
	return nil
}

func sinusoids(length, channels int) *mlx.Array {
	s := mlx.NewScope()
	defer s.Close()
	inc := math.Log(10000) / float64(channels/2-1)
	inv := mlx.Exp(mlx.Multiply(mlx.Scalar(float32(-inc), mlx.Float32), mlx.Arange(0, float64(channels/2), 1, mlx.Int32)))
	t := mlx.Multiply(mlx.ExpandDims(mlx.Arange(0, float64(length), 1, mlx.Int32), 1), mlx.ExpandDims(inv, 0))
	out := mlx.Concatenate([]*mlx.Array{mlx.Sin(t), mlx.Cos(t)}, 1)
	s.Keep(out)
	return out
}

// gelu is mlx.nn.gelu: x * (1 + erf(x / sqrt(2))) / 2, scalars in x's dtype.
func gelu(x *mlx.Array) *mlx.Array {
	dt := x.Dtype()
	y := mlx.Erf(mlx.Divide(x, mlx.Scalar(float32(math.Sqrt2), dt)))
	y = mlx.Add(mlx.Scalar(1, dt), y)
	return mlx.Divide(mlx.Multiply(x, y), mlx.Scalar(2, dt))
}

// attend is MultiHeadAttention.qkv_attention.
func (a *attention) attend(q, k, v, mask *mlx.Array) *mlx.Array {
	out, _ := a.attendQK(q, k, v, mask)
	return out
}

// attendQK is attend that also returns qk, the scores before the softmax
// (qkv_attention's second result, what find_alignment reads).
func (a *attention) attendQK(q, k, v, mask *mlx.Array) (*mlx.Array, *mlx.Array) {
	b, nCtx, nState := q.Dim(0), q.Dim(1), q.Dim(2)
	dt := q.Dtype()
	scale := mlx.Scalar(float32(math.Pow(float64(nState/a.nHead), -0.25)), dt)
	q = mlx.Multiply(mlx.Transpose(mlx.Reshape(q, b, nCtx, a.nHead, -1), 0, 2, 1, 3), scale)
	// k and v keep their own batch: one row of audio features serves a
	// group of beams or samples by broadcasting, as in mlx-whisper.
	k = mlx.Multiply(mlx.Transpose(mlx.Reshape(k, k.Dim(0), k.Dim(1), a.nHead, -1), 0, 2, 3, 1), scale)
	v = mlx.Transpose(mlx.Reshape(v, v.Dim(0), v.Dim(1), a.nHead, -1), 0, 2, 1, 3)
	qk := mlx.Matmul(q, k)
	if mask != nil {
		qk = mlx.Add(qk, mask)
	}
	w := mlx.Softmax(qk, []int{-1}, true)
	out := mlx.Transpose(mlx.Matmul(w, v), 0, 2, 1, 3)
	return a.out.apply(mlx.Reshape(out, b, nCtx, nState)), qk
}

// Encode runs the audio encoder on mel [batch, 3000, n_mels] (the model's
// dtype) and returns the audio features [batch, 1500, state].
func (m *Model) Encode(mel *mlx.Array) *mlx.Array {
	if err := mel.Err(); err != nil {
		return mel
	}
	if mel.Ndim() != 3 || mel.Dim(1) != 2*m.Dims.NAudioCtx || mel.Dim(2) != m.Dims.NMels {
		return mlx.ErrorArray(fmt.Errorf("whisper encoder: mel of shape %v, want [batch %d %d]", mel.Shape(), 2*m.Dims.NAudioCtx, m.Dims.NMels))
	}
	x := gelu(mlx.Add(mlx.Conv1d(mel, m.conv1w, 1, 1, 1, 1), m.conv1b))
	x = gelu(mlx.Add(mlx.Conv1d(x, m.conv2w, 2, 1, 1, 1), m.conv2b))
	x = mlx.Add(x, m.audioPos)
	for i := range m.encBlocks {
		b := &m.encBlocks[i]
		h := b.attnLn.apply(x)
		x = mlx.Add(x, b.attn.attend(b.attn.query.apply(h), b.attn.key.apply(h), b.attn.value.apply(h), nil))
		x = mlx.Add(x, b.mlp2.apply(gelu(b.mlp1.apply(b.mlpLn.apply(x)))))
	}
	return m.lnPost.apply(x)
}

// Cache is the decoder's state for one sequence of calls: self-attention keys
// and values grown by concatenation, cross-attention ones computed once.
type Cache struct {
	selfK, selfV, crossK, crossV []*mlx.Array
	offset                       int
	// KeepCrossQK makes Decode record each layer's cross-attention scores
	// [batch, heads, n, audio ctx] (in the caller's scope) in CrossQK:
	// forward_with_cross_qk, for word timestamps.
	KeepCrossQK bool
	CrossQK     []*mlx.Array
}

// Len is the number of tokens the cache holds.
func (c *Cache) Len() int { return c.offset }

// Free releases the cache's arrays.
func (c *Cache) Free() {
	for _, l := range [][]*mlx.Array{c.selfK, c.selfV, c.crossK, c.crossV} {
		for _, a := range l {
			a.Free()
		}
	}
	*c = Cache{KeepCrossQK: c.KeepCrossQK}
}

// Reorder keeps the rows src of the self-attention keys and values, in that
// order (beam search's rearrange_kv_cache; nothing when src is 0, 1, …).
// The cross-attention ones are one row shared by the group and stay.
func (c *Cache) Reorder(src []int32) error {
	identity := true
	for i, j := range src {
		identity = identity && int(j) == i
	}
	if identity || c.selfK == nil {
		return nil
	}
	s := mlx.NewScope()
	defer s.Close()
	idx := mlx.FromSlice(src, len(src))
	next := make([]*mlx.Array, 0, 2*len(c.selfK))
	for i := range c.selfK {
		next = append(next, mlx.Take(c.selfK[i], idx, 0), mlx.Take(c.selfV[i], idx, 0))
	}
	if err := mlx.Eval(next...); err != nil {
		return err
	}
	mlx.Detach(next...)
	for i := range c.selfK {
		c.selfK[i].Free()
		c.selfV[i].Free()
		c.selfK[i], c.selfV[i] = next[2*i], next[2*i+1]
	}
	return nil
}

// causalMask is mlx-whisper's decoder mask[:n, :n]: create_additive_causal_mask
// in float32 (finfo.min above the diagonal, 0·min = -0 elsewhere) cast to the
// model's dtype, where finfo(float32).min overflows to -inf for float16.
func causalMask(n int, dt mlx.Dtype) *mlx.Array {
	vals := make([]float32, n*n)
	for i := range n {
		for j := range n {
			if i < j {
				vals[i*n+j] = -math.MaxFloat32
			} else {
				vals[i*n+j] = float32(math.Copysign(0, -1))
			}
		}
	}
	return mlx.AsType(mlx.FromSlice(vals, n, n), dt)
}

// Decode runs the text decoder on tokens [batch, n] (int32) against the
// audio features, extending c, and returns the logits [batch, n, vocab] in
// float32 (Inference.logits: the decoder's output cast to float32). The
// arrays c keeps are detached from the caller's scope.
func (m *Model) Decode(tokens, audio *mlx.Array, c *Cache) *mlx.Array {
	if err := tokens.Err(); err != nil {
		return tokens
	}
	n := tokens.Dim(1)
	if c.offset+n > m.Dims.NTextCtx {
		return mlx.ErrorArray(fmt.Errorf("whisper decoder: %d tokens exceed the text context of %d", c.offset+n, m.Dims.NTextCtx))
	}
	pos := mlx.Slice(m.textPos, []int{c.offset, 0}, []int{c.offset + n, m.Dims.NTextState})
	x := mlx.Add(mlx.Take(m.tokEmb, tokens, 0), pos)
	mask := causalMask(n, m.Activation)
	first := c.selfK == nil
	if first {
		c.selfK = make([]*mlx.Array, len(m.decBlocks))
		c.selfV = make([]*mlx.Array, len(m.decBlocks))
		c.crossK = make([]*mlx.Array, len(m.decBlocks))
		c.crossV = make([]*mlx.Array, len(m.decBlocks))
	}
	var kept []*mlx.Array
	var old []*mlx.Array
	for i := range m.decBlocks {
		b := &m.decBlocks[i]
		h := b.attnLn.apply(x)
		q, k, v := b.attn.query.apply(h), b.attn.key.apply(h), b.attn.value.apply(h)
		if !first {
			k = mlx.Concatenate([]*mlx.Array{c.selfK[i], k}, 1)
			v = mlx.Concatenate([]*mlx.Array{c.selfV[i], v}, 1)
			old = append(old, c.selfK[i], c.selfV[i])
		}
		c.selfK[i], c.selfV[i] = k, v
		kept = append(kept, k, v)
		x = mlx.Add(x, b.attn.attend(q, k, v, mask))
		h = b.crossLn.apply(x)
		if first {
			c.crossK[i], c.crossV[i] = b.cross.key.apply(audio), b.cross.value.apply(audio)
			kept = append(kept, c.crossK[i], c.crossV[i])
		}
		ca, qk := b.cross.attendQK(b.cross.query.apply(h), c.crossK[i], c.crossV[i], nil)
		if c.KeepCrossQK {
			c.CrossQK = append(c.CrossQK, qk)
		}
		x = mlx.Add(x, ca)
		x = mlx.Add(x, b.mlp2.apply(gelu(b.mlp1.apply(b.mlpLn.apply(x)))))
	}
	x = m.ln.apply(x)
	logits := mlx.AsType(mlx.Matmul(x, m.tokEmbT), mlx.Float32)
	mlx.Detach(kept...)
	for _, a := range old {
		a.Free()
	}
	c.offset += n
	return logits
}
