package nn

import (
	"fmt"
	"slices"

	"github.com/mlxgo/mlxgo/mlx"
)

// Linear is nn.Linear or nn.QuantizedLinear.
type Linear struct {
	weight, bias   *mlx.Array
	scales, biases *mlx.Array // affine quantization companions
	q              *mlx.Quant
	// packed replaces weight, scales and biases when mlxgo's CPU kernels run:
	// the same quantized weight, laid out for them (mlx.Packed).
	packed *mlx.Packed
	// lora is the layer's unfused LoRA adapters (lora.go); nil: none.
	lora *adapted
}

// Linear takes module path's weights: out x in, quantized when the
// checkpoint says so (see moduleQuant), with an optional bias.
func (ws *Weights) Linear(path string, in, out int, bias bool) *Linear {
	return ws.linear(path, in, out, bias, true)
}

// linear is Linear; adaptable is false for a table that is not a linear
// layer in mlx-lm (an embedding), which adapters must not touch.
func (ws *Weights) linear(path string, in, out int, bias, adaptable bool) *Linear {
	if ws.err != nil {
		return nil
	}
	q, err := moduleQuant(ws.quant, path, in, ws)
	if err != nil {
		ws.Fail(err)
		return nil
	}
	l := &Linear{q: q}
	if q != nil {
		l.weight = ws.Get(path+".weight", out, in*q.Bits/32)
		l.scales = ws.Get(path+".scales", out, in/q.GroupSize)
		if q.Mode == "affine" || q.Mode == "" { // mxfp4 has no biases
			l.biases = ws.Get(path+".biases", out, in/q.GroupSize)
		}
	} else {
		l.weight = ws.Get(path+".weight", out, in)
	}
	if bias {
		l.bias = ws.Get(path+".bias", out)
	}
	if ws.adapters != nil && adaptable && ws.err == nil {
		ws.adaptLinear(l, path, in, out)
	}
	// DoRA reads the quantized weight in MLX's layout: it stays unpacked.
	if q != nil && ws.pack && !l.lora.dora() {
		ws.packLinear(l)
	}
	return l
}

// Apply is Linear.__call__, or with unfused adapters LoRALinear.__call__
// for the rows the adapters select.
func (l *Linear) Apply(x *mlx.Array) *mlx.Array {
	if l.lora != nil {
		return l.lora.apply(l, x)
	}
	return l.apply(x)
}

// ApplyAdd is res + Apply(x), a residual connection after the linear:
// packed, without a bias or adapters, one node (the quantized matmul adds
// res as it stores its outputs) where the matmul and MLX's add were two.
func (l *Linear) ApplyAdd(x, res *mlx.Array) *mlx.Array {
	if p := l.plainPacked(); p != nil {
		return mlx.PackedMatmulAdd(x, p, res)
	}
	return mlx.Add(res, l.Apply(x))
}

// adder is a layer that adds a residual to its output itself.
type adder interface {
	ApplyAdd(x, res *mlx.Array) *mlx.Array
}

// plainPacked is the packed weight when the linear is that alone (no bias,
// no adapters), else nil.
func (l *Linear) plainPacked() *mlx.Packed {
	if l.lora != nil || l.bias != nil {
		return nil
	}
	return l.packed
}

// AddNormApply is res + l.Apply(RMSNorm(res, norm, eps)), a pre-norm
// block's residual branch, as one node when l can do the norm and add res
// itself (MLP when packed).
func AddNormApply(res *mlx.Array, l Layer, norm *mlx.Array, eps float32) *mlx.Array {
	if m, ok := l.(interface {
		NormApplyAdd(res, norm *mlx.Array, eps float32) *mlx.Array
	}); ok {
		return m.NormApplyAdd(res, norm, eps)
	}
	return AddApply(res, l, mlx.RMSNorm(res, norm, eps))
}

// AddApply is res + l.Apply(x), the residual connection after l, as one
// node when l can add res itself (Linear and MLP when packed).
func AddApply(res *mlx.Array, l Layer, x *mlx.Array) *mlx.Array {
	if r, ok := l.(adder); ok {
		return r.ApplyAdd(x, res)
	}
	return mlx.Add(res, l.Apply(x))
}

// apply is Linear.__call__: addmm with a bias, x @ W.T without; the
// quantized form adds its bias after the quantized matmul.
func (l *Linear) apply(x *mlx.Array) *mlx.Array {
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

// Projections are linears that read the same input (q/k/v, gate/up). When
// mlxgo's CPU kernels run them packed they are one linear over their outputs
// side by side: one quantized matmul node a step instead of one each. A
// packed matmul computes every output as its own sum over the input,
// wherever its row sits, so no bit changes.
type Projections struct {
	fused  *Linear // nil: each
	widths []int
	each   []*Linear
}

// Projections takes the modules at paths, outs[i] wide, as one linear when
// every module is affine-quantized alike (bits, group size, scale dtype)
// without a bias and packing is on; otherwise one by one.
func (ws *Weights) Projections(paths []string, in int, outs []int, bias bool) *Projections {
	p := &Projections{widths: outs}
	// An adapted projection adds its own update to its own output.
	if !bias && (ws.adapters == nil || !slices.ContainsFunc(paths, ws.adapters.adapts)) {
		p.fused = ws.fuse(paths, in, outs)
	}
	if p.fused == nil {
		for i, path := range paths {
			p.each = append(p.each, ws.Linear(path, in, outs[i], bias))
		}
	}
	return p
}

// Apply returns each projection of x, in paths' order.
func (p *Projections) Apply(x *mlx.Array) []*mlx.Array {
	if p.fused != nil {
		return split(p.fused.Apply(x), p.widths...)
	}
	out := make([]*mlx.Array, len(p.each))
	for i, l := range p.each {
		out[i] = l.Apply(x)
	}
	return out
}

// joined is the fused linear's output, the projections side by side along
// the last axis, or nil when they run one by one.
func (p *Projections) joined(x *mlx.Array) *mlx.Array {
	if p.fused == nil {
		return nil
	}
	return p.fused.Apply(x)
}

// Heads is Apply with output i cut into heads[i] attention heads as the
// models write it, transpose(reshape(y, B, L, heads[i], -1), 0, 2, 1, 3):
// [B, heads[i], L, width / heads[i]] for x of [B, L, in]. Fused, the cuts
// are one Views node over the fused output, where a slice, a reshape and a
// transpose each were nine nodes a layer, each a few microseconds of MLX's
// CPU scheduling; the views address the same elements.
func (p *Projections) Heads(x *mlx.Array, heads ...int) []*mlx.Array {
	return p.heads(x, nil, 0, heads)
}

// NormHeads is Heads(RMSNorm(x, norm, eps), heads...), a pre-norm
// attention's projections: fused and packed, the norm and the matmul are
// one node (mlx.NormPackedMatmul) with the same bits.
func (p *Projections) NormHeads(x, norm *mlx.Array, eps float32, heads ...int) []*mlx.Array {
	return p.heads(x, norm, eps, heads)
}

func (p *Projections) heads(x, norm *mlx.Array, eps float32, heads []int) []*mlx.Array {
	if p.fused != nil && x.Ndim() == 3 && len(heads) == len(p.widths) {
		b, l, total := x.Dim(0), x.Dim(1), 0
		for _, w := range p.widths {
			total += w
		}
		specs := make([]mlx.Strided, len(heads))
		at, ok := 0, true
		for i, h := range heads {
			w := p.widths[i]
			ok = ok && h > 0 && w%h == 0
			if !ok {
				break
			}
			specs[i] = mlx.Strided{Shape: []int{b, h, l, w / h}, Strides: []int{l * total, w / h, total, 1}, Offset: at}
			at += w
		}
		if ok {
			return mlx.Views(p.fusedOf(x, norm, eps), specs...)
		}
	}
	if norm != nil {
		x = mlx.RMSNorm(x, norm, eps)
	}
	out := p.Apply(x)
	for i := range out {
		h := 1
		if i < len(heads) {
			h = heads[i]
		}
		out[i] = mlx.Transpose(mlx.Reshape(out[i], x.Dim(0), x.Dim(1), h, -1), 0, 2, 1, 3)
	}
	return out
}

// fusedOf is the fused linear of RMSNorm(x, norm, eps), or of x when norm
// is nil.
func (p *Projections) fusedOf(x, norm *mlx.Array, eps float32) *mlx.Array {
	if norm == nil {
		return p.fused.Apply(x)
	}
	if pk := p.fused.plainPacked(); pk != nil && normFits(x, norm, pk.Dtype) {
		return mlx.NormPackedMatmul(x, norm, eps, pk)
	}
	return p.fused.Apply(mlx.RMSNorm(x, norm, eps))
}

// normFits: rms_norm's output (x and norm promoted) is already the packed
// matmul's compute dtype (it and the scales promoted), as NormPackedMatmul
// requires.
func normFits(x, norm *mlx.Array, scales mlx.Dtype) bool {
	if !x.Dtype().IsFloat() || !norm.Dtype().IsFloat() || !scales.IsFloat() {
		return false
	}
	n := promoted(x.Dtype(), norm.Dtype())
	return promoted(n, scales) == n
}

// promoted is MLX's type promotion among floating-point dtypes: the same
// dtype, the wider of two, and float32 for float16 with bfloat16.
func promoted(a, b mlx.Dtype) mlx.Dtype {
	switch {
	case a == b:
		return a
	case a == mlx.Float64 || b == mlx.Float64:
		return mlx.Float64
	}
	return mlx.Float32
}

// fuse is the packed linear of Projections, or nil, having loaded nothing.
func (ws *Weights) fuse(paths []string, in int, outs []int) *Linear {
	if ws.err != nil || !ws.pack || len(paths) < 2 {
		return nil
	}
	var q *mlx.Quant
	var sdt string
	for _, p := range paths {
		m, err := moduleQuant(ws.quant, p, in, ws)
		if err != nil || m == nil || m.Mode != "affine" && m.Mode != "" || ws.Has(p+".bias") || !ws.Has(p+".scales") {
			return nil
		}
		if q != nil && (*m != *q || ws.src[p+".scales"].Dtype != sdt) {
			return nil
		}
		q, sdt = m, ws.src[p+".scales"].Dtype
	}
	var w, s, b []*mlx.Array
	for i, p := range paths {
		w = append(w, ws.Get(p+".weight", outs[i], in*q.Bits/32))
		s = append(s, ws.Get(p+".scales", outs[i], in/q.GroupSize))
		b = append(b, ws.Get(p+".biases", outs[i], in/q.GroupSize))
	}
	if ws.err != nil {
		return nil
	}
	l := &Linear{q: q, weight: mlx.Concatenate(w, 0), scales: mlx.Concatenate(s, 0), biases: mlx.Concatenate(b, 0)}
	ws.Release(append(append(w, s...), b...)...)
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
func (ws *Weights) packLinear(l *Linear) {
	if ws.err != nil || l.q.Mode != "affine" && l.q.Mode != "" {
		return
	}
	p, err := mlx.PackQuantized(l.weight, l.scales, l.biases, *l.q)
	if err != nil {
		ws.Fail(fmt.Errorf("cannot pack a quantized weight: %w", err))
		return
	}
	ws.Release(l.weight, l.scales, l.biases)
	l.weight, l.scales, l.biases = nil, nil, nil
	l.packed = p
	ws.Keep(p.Data)
}

// Embedding is nn.Embedding or nn.QuantizedEmbedding.
type Embedding struct {
	weight, scales, biases *mlx.Array
	q                      *mlx.Quant
	packed                 *mlx.Packed // see Linear.packed
}

// Embedding takes a vocab x dims table at path.
func (ws *Weights) Embedding(path string, vocab, dims int) *Embedding {
	ws.refuseAdapted(path, "embedding")
	l := ws.linear(path, dims, vocab, false, false)
	if l == nil {
		return nil
	}
	return &Embedding{weight: l.weight, scales: l.scales, biases: l.biases, q: l.q, packed: l.packed}
}

// Apply is Embedding.__call__ (weight[ids]); the quantized form gathers
// packed rows and dequantizes them into the scales' dtype.
func (e *Embedding) Apply(ids *mlx.Array) *mlx.Array {
	switch {
	case e.packed != nil:
		return mlx.PackedEmbedding(ids, e.packed)
	case e.q != nil:
		var biases *mlx.Array
		if e.biases != nil {
			biases = mlx.Take(e.biases, ids, 0)
		}
		return mlx.Dequantize(mlx.Take(e.weight, ids, 0), mlx.Take(e.scales, ids, 0), biases, *e.q)
	}
	return mlx.Take(e.weight, ids, 0)
}

// AsLinear is as_linear, the tied output projection.
func (e *Embedding) AsLinear(x *mlx.Array) *mlx.Array {
	switch {
	case e.packed != nil:
		return mlx.PackedMatmul(x, e.packed)
	case e.q != nil:
		return mlx.QuantizedMatmul(x, e.weight, e.scales, e.biases, true, *e.q)
	}
	return mlx.Matmul(x, mlx.Transpose(e.weight))
}

// Dtype is the activation dtype the embedding produces.
func (e *Embedding) Dtype() mlx.Dtype {
	switch {
	case e.packed != nil:
		return e.packed.Dtype
	case e.q != nil && (e.q.Mode == "affine" || e.q.Mode == ""):
		return e.scales.Dtype()
	case e.q != nil:
		return mlx.BFloat16 // MLX dequantizes the float modes to bfloat16
	}
	return e.weight.Dtype()
}
