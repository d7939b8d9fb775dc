package models

import (
	"fmt"
	"math"
	"slices"

	"github.com/mlxgo/mlxgo/mlx"
)

// linear is nn.Linear or nn.QuantizedLinear.
type linear struct {
	weight, bias   *mlx.Array
	scales, biases *mlx.Array // affine quantization companions
	q              *mlx.Quant
	// packed replaces weight, scales and biases when mlxgo's CPU kernels run:
	// the same quantized weight, laid out for them (mlx.Packed).
	packed *mlx.Packed
}

// linear takes module path's weights: out x in, quantized when the
// checkpoint says so (see moduleQuant), with an optional bias.
func (ws *weightSet) linear(path string, in, out int, bias bool) *linear {
	if ws.err != nil {
		return nil
	}
	q, err := moduleQuant(ws.quant, path, in, ws)
	if err != nil {
		ws.fail(err)
		return nil
	}
	l := &linear{q: q}
	if q != nil {
		l.weight = ws.get(path+".weight", out, in*q.Bits/32)
		l.scales = ws.get(path+".scales", out, in/q.GroupSize)
		l.biases = ws.get(path+".biases", out, in/q.GroupSize)
	} else {
		l.weight = ws.get(path+".weight", out, in)
	}
	if bias {
		l.bias = ws.get(path+".bias", out)
	}
	if q != nil && ws.pack {
		ws.packLinear(l)
	}
	return l
}

// linears takes modules that read the same input (q/k/v, gate/up) as one
// linear over their outputs side by side, when mlxgo's CPU kernels run them
// packed: one quantized matmul node a step instead of len(paths). A packed
// matmul computes every output as its own sum over the input, wherever its
// row sits, so no bit changes. It returns nil, having loaded nothing, unless
// every module is affine-quantized alike (bits, group size, scale dtype)
// without a bias; the caller then takes them one by one. Outputs are in
// paths' order, outs[i] wide.
func (ws *weightSet) linears(paths []string, in int, outs []int) *linear {
	if ws.err != nil || !ws.pack || len(paths) < 2 {
		return nil
	}
	var q *mlx.Quant
	var sdt string
	for _, p := range paths {
		m, err := moduleQuant(ws.quant, p, in, ws)
		if err != nil || m == nil || m.Mode != "affine" && m.Mode != "" || ws.has(p+".bias") || !ws.has(p+".scales") {
			return nil
		}
		if q != nil && (*m != *q || ws.src[p+".scales"].dtype != sdt) {
			return nil
		}
		q, sdt = m, ws.src[p+".scales"].dtype
	}
	var w, s, b []*mlx.Array
	for i, p := range paths {
		w = append(w, ws.get(p+".weight", outs[i], in*q.Bits/32))
		s = append(s, ws.get(p+".scales", outs[i], in/q.GroupSize))
		b = append(b, ws.get(p+".biases", outs[i], in/q.GroupSize))
	}
	if ws.err != nil {
		return nil
	}
	l := &linear{q: q, weight: mlx.Concatenate(w, 0), scales: mlx.Concatenate(s, 0), biases: mlx.Concatenate(b, 0)}
	ws.release(append(append(w, s...), b...)...)
	ws.packLinear(l)
	return l
}

// split cuts y [..., sum(widths)] into views of widths along the last axis.
func split(y *mlx.Array, widths ...int) []*mlx.Array {
	sh := y.Shape()
	start, stop := make([]int, len(sh)), slices.Clone(sh)
	parts := make([]*mlx.Array, len(widths))
	at := 0
	for i, w := range widths {
		start[len(sh)-1], stop[len(sh)-1] = at, at+w
		parts[i] = mlx.Slice(y, start, stop)
		at += w
	}
	return parts
}

// packLinear repacks a quantized weight for the CPU kernels and frees the
// MLX layout, so the model holds one copy.
func (ws *weightSet) packLinear(l *linear) {
	if ws.err != nil || l.q.Mode != "affine" && l.q.Mode != "" {
		return
	}
	p, err := mlx.PackQuantized(l.weight, l.scales, l.biases, *l.q)
	if err != nil {
		ws.fail(fmt.Errorf("cannot pack a quantized weight: %w", err))
		return
	}
	ws.release(l.weight, l.scales, l.biases)
	l.weight, l.scales, l.biases = nil, nil, nil
	l.packed = p
	ws.keepArray(p.Data)
}

// apply is Linear.__call__: addmm with a bias, x @ W.T without; the
// quantized form adds its bias after the quantized matmul.
func (l *linear) apply(x *mlx.Array) *mlx.Array {
	if l.q != nil {
		var y *mlx.Array
		if l.packed != nil {
			y = mlx.PackedMatmul(x, l.packed)
		} else {
			y = mlx.QuantizedMatmul(x, l.weight, l.scales, l.biases, true, *l.q)
		}
		if l.bias != nil {
			y = mlx.Add(y, l.bias)
		}
		return y
	}
	if l.bias != nil {
		return mlx.Addmm(l.bias, x, mlx.Transpose(l.weight), 1, 1)
	}
	return mlx.Matmul(x, mlx.Transpose(l.weight))
}

// embedding is nn.Embedding or nn.QuantizedEmbedding.
type embedding struct {
	weight, scales, biases *mlx.Array
	q                      *mlx.Quant
	packed                 *mlx.Packed // see linear.packed
}

func (ws *weightSet) embedding(path string, vocab, dims int) *embedding {
	l := ws.linear(path, dims, vocab, false)
	if l == nil {
		return nil
	}
	return &embedding{weight: l.weight, scales: l.scales, biases: l.biases, q: l.q, packed: l.packed}
}

// lookup is Embedding.__call__ (weight[ids]); the quantized form gathers
// packed rows and dequantizes them into the scales' dtype.
func (e *embedding) lookup(ids *mlx.Array) *mlx.Array {
	switch {
	case e.packed != nil:
		return mlx.PackedEmbedding(ids, e.packed)
	case e.q != nil:
		return mlx.Dequantize(mlx.Take(e.weight, ids, 0), mlx.Take(e.scales, ids, 0), mlx.Take(e.biases, ids, 0), *e.q)
	}
	return mlx.Take(e.weight, ids, 0)
}

// asLinear is as_linear, the tied output projection.
func (e *embedding) asLinear(x *mlx.Array) *mlx.Array {
	switch {
	case e.packed != nil:
		return mlx.PackedMatmul(x, e.packed)
	case e.q != nil:
		return mlx.QuantizedMatmul(x, e.weight, e.scales, e.biases, true, *e.q)
	}
	return mlx.Matmul(x, mlx.Transpose(e.weight))
}

// dtype is the activation dtype the embedding produces.
func (e *embedding) dtype() mlx.Dtype {
	switch {
	case e.packed != nil:
		return e.packed.Dtype
	case e.q != nil:
		return e.scales.Dtype()
	}
	return e.weight.Dtype()
}

// rope is nn.RoPE or one of rope_utils' variants with precomputed freqs.
type rope struct {
	dims        int
	traditional bool
	base, scale float32
	freqs       *mlx.Array // nil: frequencies from base
}

func (r *rope) apply(x *mlx.Array, offset int) *mlx.Array {
	return mlx.RoPE(x, r.dims, r.traditional, r.base, r.scale, offset, r.freqs)
}

// applyRows is apply on x [B, H, L, D] with row b at offsets[b] (int32 [B]):
// one node for a decode batch's rows, each computed as apply computes it
// alone (positions (t + offset) * scale in float32 either way).
func (r *rope) applyRows(x, offsets *mlx.Array) *mlx.Array {
	return mlx.RoPEDynamic(x, r.dims, r.traditional, r.base, r.scale, offsets, r.freqs)
}

// initRope is rope_utils.initialize_rope for the types whose result does not
// depend on the sequence: default, linear and llama3.
func initRope(ws *weightSet, dims int, base float64, traditional bool, scaling RopeScaling) (*rope, error) {
	switch t := scaling.Type(); t {
	case "default", "linear":
		scale := 1.0
		if t == "linear" {
			f, err := scaling.Float("factor", math.NaN())
			if err != nil || math.IsNaN(f) || f == 0 {
				return nil, fmt.Errorf("linear rope_scaling needs a non-zero factor")
			}
			scale = 1 / f
		}
		return &rope{dims: dims, traditional: traditional, base: float32(base), scale: float32(scale)}, nil
	case "llama3":
		freqs, err := llama3Freqs(dims, base, scaling)
		if err != nil {
			return nil, err
		}
		return &rope{dims: dims, traditional: traditional, scale: 1, freqs: ws.keepArray(freqs)}, nil
	default:
		return nil, fmt.Errorf("rope_scaling type %q is not supported (default, linear, llama3)", t)
	}
}

// llama3Freqs is Llama3RoPE's frequency table, computed with MLX ops in
// rope_utils' order so the float32 results are the same bits.
func llama3Freqs(dims int, base float64, sc RopeScaling) (*mlx.Array, error) {
	factor, err1 := sc.Float("factor", math.NaN())
	low, err2 := sc.Float("low_freq_factor", 1)
	high, err3 := sc.Float("high_freq_factor", 4)
	old, err4 := sc.Float("original_max_position_embeddings", 8192)
	for _, err := range []error{err1, err2, err3, err4} {
		if err != nil {
			return nil, err
		}
	}
	if math.IsNaN(factor) || factor == 0 || high == low || low == 0 || high == 0 {
		return nil, fmt.Errorf("llama3 rope_scaling needs factor != 0 and low_freq_factor != high_freq_factor")
	}
	lowWavelen := old / low
	highWavelen := old / high
	f32 := func(v float64) *mlx.Array { return mlx.Scalar(float32(v), mlx.Float32) }

	// freqs = base ** (arange(0, dims, 2) / dims)
	exps := mlx.Divide(mlx.Arange(0, float64(dims), 2, mlx.Int32), mlx.ScalarInt(int64(dims), mlx.Int32))
	freqs := mlx.Power(f32(base), exps)
	wavelens := mlx.Multiply(f32(2*math.Pi), freqs)
	freqs = mlx.Where(mlx.Greater(wavelens, f32(lowWavelen)), mlx.Multiply(freqs, f32(factor)), freqs)
	isMedium := mlx.LogicalAnd(mlx.Greater(wavelens, f32(highWavelen)), mlx.Less(wavelens, f32(lowWavelen)))
	smooth := mlx.Divide(mlx.Subtract(mlx.Divide(f32(old), wavelens), f32(low)), f32(high-low))
	smoothFreqs := mlx.Divide(freqs, mlx.Add(mlx.Divide(mlx.Subtract(f32(1), smooth), f32(factor)), smooth))
	out := mlx.Where(isMedium, smoothFreqs, freqs)
	return out, mlx.Eval(out)
}
