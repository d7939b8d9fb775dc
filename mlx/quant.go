package mlx

// Quant is a quantization scheme: MLX's group size, bits and mode
// ("affine", "mxfp4", "mxfp8", "nvfp4"). All three are always passed to MLX,
// so a model's numeric scheme never depends on a library default; an empty
// Mode means "affine", the mode of every mlx-lm checkpoint without one.
type Quant struct {
	GroupSize int
	Bits      int
	Mode      string
}

func (q Quant) mode() string {
	if q.Mode == "" {
		return "affine"
	}
	return q.Mode
}

// Quantize packs w (last axis divisible by GroupSize) into quantized words
// with per-group scales and, for affine mode, biases (nil otherwise).
func Quantize(w *Array, q Quant) (wq, scales, biases *Array) {
	c := begin("quantize")
	h := c.in(w)
	if c.err != nil {
		return errArray(c.err), errArray(c.err), errArray(c.err)
	}
	var ow, os, ob uintptr
	if err := check(c.op, fn.quantize(h, int32(q.GroupSize), int32(q.Bits), q.mode(), 0, &ow, &os, &ob)); err != nil {
		return errArray(err), errArray(err), errArray(err)
	}
	wq, scales = newArray(ow), newArray(os)
	if ob != 0 {
		biases = newArray(ob)
	}
	return wq, scales, biases
}

// Dequantize unpacks w with its scales and biases (nil for modes without)
// into the scales' dtype.
func Dequantize(w, scales, biases *Array, q Quant) *Array {
	return dequantize(w, scales, biases, q, false, 0)
}

// DequantizeAs is Dequantize into dtype dt.
func DequantizeAs(w, scales, biases *Array, q Quant, dt Dtype) *Array {
	return dequantize(w, scales, biases, q, true, dt)
}

func dequantize(w, scales, biases *Array, q Quant, hasDtype bool, dt Dtype) *Array {
	c := begin("dequantize")
	hw, hs, hb := c.in(w), c.in(scales), c.opt(biases)
	return c.do(func(out *uintptr) int32 {
		return fn.dequantize(hw, hs, hb, int32(q.GroupSize), int32(q.Bits), q.mode(), 0, flag(hasDtype), int32(dt), out)
	})
}

// QuantizedMatmul is x @ dequantize(w).T when transpose (the nn.QuantizedLinear
// layout), x @ dequantize(w) otherwise, without materializing w.
func QuantizedMatmul(x, w, scales, biases *Array, transpose bool, q Quant) *Array {
	c := begin("quantized_matmul")
	hx, hw, hs, hb := c.in(x), c.in(w), c.in(scales), c.opt(biases)
	return c.do(func(out *uintptr) int32 {
		return fn.quantizedMatmul(hx, hw, hs, hb, flag(transpose), int32(q.GroupSize), int32(q.Bits), q.mode(), out)
	})
}

// GatherQMM is QuantizedMatmul with the batches of x and w picked by
// lhsIndices and rhsIndices (either may be nil): mixture-of-experts layers.
func GatherQMM(x, w, scales, biases, lhsIndices, rhsIndices *Array, transpose bool, q Quant, sortedIndices bool) *Array {
	c := begin("gather_qmm")
	hx, hw, hs, hb := c.in(x), c.in(w), c.in(scales), c.opt(biases)
	hl, hr := c.opt(lhsIndices), c.opt(rhsIndices)
	return c.do(func(out *uintptr) int32 {
		return fn.gatherQMM(hx, hw, hs, hb, hl, hr, flag(transpose), int32(q.GroupSize), int32(q.Bits), q.mode(),
			flag(sortedIndices), out)
	})
}

// GatherMM is Matmul with batches picked by lhsIndices and rhsIndices (either
// may be nil).
func GatherMM(a, b, lhsIndices, rhsIndices *Array, sortedIndices bool) *Array {
	c := begin("gather_mm")
	ha, hb, hl, hr := c.in(a), c.in(b), c.opt(lhsIndices), c.opt(rhsIndices)
	return c.do(func(out *uintptr) int32 { return fn.gatherMM(ha, hb, hl, hr, flag(sortedIndices), out) })
}
