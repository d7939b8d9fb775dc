package mlx

// Elementwise ops, matmul, reductions, sorting and indexing.

func unary(name string, a *Array) *Array {
	c := begin(name)
	h := c.in(a)
	return c.do(func(out *uintptr) int32 { return (*fn.unary[name])(h, out) })
}

func binary(name string, a, b *Array) *Array {
	c := begin(name)
	ha, hb := c.in(a), c.in(b)
	return c.do(func(out *uintptr) int32 { return (*fn.binary[name])(ha, hb, out) })
}

// Elementwise unary ops, with MLX's semantics and type rules.
func Negative(a *Array) *Array     { return unary("negative", a) }
func Exp(a *Array) *Array          { return unary("exp", a) }
func Log(a *Array) *Array          { return unary("log", a) }
func Log1p(a *Array) *Array        { return unary("log1p", a) }
func Sqrt(a *Array) *Array         { return unary("sqrt", a) }
func Rsqrt(a *Array) *Array        { return unary("rsqrt", a) }
func Square(a *Array) *Array       { return unary("square", a) }
func Abs(a *Array) *Array          { return unary("abs", a) }
func Sin(a *Array) *Array          { return unary("sin", a) }
func Cos(a *Array) *Array          { return unary("cos", a) }
func Tanh(a *Array) *Array         { return unary("tanh", a) }
func Sigmoid(a *Array) *Array      { return unary("sigmoid", a) }
func Erf(a *Array) *Array          { return unary("erf", a) }
func Floor(a *Array) *Array        { return unary("floor", a) }
func Ceil(a *Array) *Array         { return unary("ceil", a) }
func Reciprocal(a *Array) *Array   { return unary("reciprocal", a) }
func LogicalNot(a *Array) *Array   { return unary("logical_not", a) }
func Real(a *Array) *Array         { return unary("real", a) }
func Imag(a *Array) *Array         { return unary("imag", a) }
func StopGradient(a *Array) *Array { return unary("stop_gradient", a) }

// Elementwise binary ops; shapes broadcast and dtypes promote as in MLX.
func Add(a, b *Array) *Array          { return binary("add", a, b) }
func Subtract(a, b *Array) *Array     { return binary("subtract", a, b) }
func Multiply(a, b *Array) *Array     { return binary("multiply", a, b) }
func Divide(a, b *Array) *Array       { return binary("divide", a, b) }
func Maximum(a, b *Array) *Array      { return binary("maximum", a, b) }
func Minimum(a, b *Array) *Array      { return binary("minimum", a, b) }
func Power(a, b *Array) *Array        { return binary("power", a, b) }
func Remainder(a, b *Array) *Array    { return binary("remainder", a, b) }
func FloorDivide(a, b *Array) *Array  { return binary("floor_divide", a, b) }
func Equal(a, b *Array) *Array        { return binary("equal", a, b) }
func NotEqual(a, b *Array) *Array     { return binary("not_equal", a, b) }
func Less(a, b *Array) *Array         { return binary("less", a, b) }
func LessEqual(a, b *Array) *Array    { return binary("less_equal", a, b) }
func Greater(a, b *Array) *Array      { return binary("greater", a, b) }
func GreaterEqual(a, b *Array) *Array { return binary("greater_equal", a, b) }
func LogicalAnd(a, b *Array) *Array   { return binary("logical_and", a, b) }
func LogicalOr(a, b *Array) *Array    { return binary("logical_or", a, b) }

// Matmul is the matrix product over the last two axes, broadcasting the rest.
func Matmul(a, b *Array) *Array { return binary("matmul", a, b) }

// Clip limits a to [lo, hi]; either bound may be nil.
func Clip(a, lo, hi *Array) *Array {
	c := begin("clip")
	h, hl, hh := c.in(a), c.opt(lo), c.opt(hi)
	return c.do(func(out *uintptr) int32 { return fn.clip(h, hl, hh, out) })
}

// Addmm is alpha*(a@b) + beta*c in one op (nn.Linear with a bias in mlx).
func Addmm(cm, a, b *Array, alpha, beta float32) *Array {
	c := begin("addmm")
	hc, ha, hb := c.in(cm), c.in(a), c.in(b)
	return c.do(func(out *uintptr) int32 { return fn.addmm(hc, ha, hb, &alpha, &beta, out) })
}

func reduce(name string, a *Array, axes []int, keepdims bool) *Array {
	c := begin(name)
	h := c.in(a)
	if axes == nil && c.err == nil {
		axes = allAxes(a)
	}
	ax := i32s(axes)
	return c.do(func(out *uintptr) int32 { return (*fn.reduce[name])(h, ptr32(ax), int32(len(ax)), flag(keepdims), out) })
}

// Reductions over axes; nil axes means every axis.
func Sum(a *Array, axes []int, keepdims bool) *Array  { return reduce("sum", a, axes, keepdims) }
func Mean(a *Array, axes []int, keepdims bool) *Array { return reduce("mean", a, axes, keepdims) }
func Max(a *Array, axes []int, keepdims bool) *Array  { return reduce("max", a, axes, keepdims) }
func Min(a *Array, axes []int, keepdims bool) *Array  { return reduce("min", a, axes, keepdims) }
func Prod(a *Array, axes []int, keepdims bool) *Array { return reduce("prod", a, axes, keepdims) }
func LogSumExp(a *Array, axes []int, keepdims bool) *Array {
	return reduce("logsumexp", a, axes, keepdims)
}
func All(a *Array, axes []int, keepdims bool) *Array { return reduce("all", a, axes, keepdims) }
func Any(a *Array, axes []int, keepdims bool) *Array { return reduce("any", a, axes, keepdims) }

// Var is the variance over axes (nil: all) with ddof delta degrees of freedom.
func Var(a *Array, axes []int, keepdims bool, ddof int) *Array {
	c := begin("var")
	h := c.in(a)
	if axes == nil && c.err == nil {
		axes = allAxes(a)
	}
	ax := i32s(axes)
	return c.do(func(out *uintptr) int32 {
		return fn.variance(h, ptr32(ax), int32(len(ax)), flag(keepdims), int32(ddof), out)
	})
}

// Argmax is the index of the largest element along axis (uint32).
func Argmax(a *Array, axis int, keepdims bool) *Array {
	c := begin("argmax")
	h := c.in(a)
	return c.do(func(out *uintptr) int32 { return fn.argmax(h, int32(axis), flag(keepdims), out) })
}

// Argmin is the index of the smallest element along axis (uint32).
func Argmin(a *Array, axis int, keepdims bool) *Array {
	c := begin("argmin")
	h := c.in(a)
	return c.do(func(out *uintptr) int32 { return fn.argmin(h, int32(axis), flag(keepdims), out) })
}

// Cumsum is the running sum along axis.
func Cumsum(a *Array, axis int, reverse, inclusive bool) *Array {
	c := begin("cumsum")
	h := c.in(a)
	return c.do(func(out *uintptr) int32 { return fn.cumsum(h, int32(axis), flag(reverse), flag(inclusive), out) })
}

// Softmax over axes (nil: all). precise computes in float32 for half inputs,
// as mlx-lm asks for attention scores.
func Softmax(a *Array, axes []int, precise bool) *Array {
	c := begin("softmax")
	h := c.in(a)
	if axes == nil && c.err == nil {
		axes = allAxes(a)
	}
	ax := i32s(axes)
	return c.do(func(out *uintptr) int32 { return fn.softmax(h, ptr32(ax), int32(len(ax)), flag(precise), out) })
}

func axisOp(name string, f func(uintptr, int32, *uintptr) int32, a *Array, axis int) *Array {
	c := begin(name)
	h := c.in(a)
	return c.do(func(out *uintptr) int32 { return f(h, int32(axis), out) })
}

// Sort sorts along axis.
func Sort(a *Array, axis int) *Array { return axisOp("sort", fn.sort, a, axis) }

// Argsort is the indices that sort a along axis (uint32).
func Argsort(a *Array, axis int) *Array { return axisOp("argsort", fn.argsort, a, axis) }

// Partition moves the kth smallest element along axis into place, smaller
// ones before it and larger after, in no particular order.
func Partition(a *Array, kth, axis int) *Array {
	c := begin("partition")
	h := c.in(a)
	return c.do(func(out *uintptr) int32 { return fn.partition(h, int32(kth), int32(axis), out) })
}

// Argpartition is the indices Partition would move (uint32).
func Argpartition(a *Array, kth, axis int) *Array {
	c := begin("argpartition")
	h := c.in(a)
	return c.do(func(out *uintptr) int32 { return fn.argpartition(h, int32(kth), int32(axis), out) })
}

// TopK is the k largest elements along axis, in no particular order.
func TopK(a *Array, k, axis int) *Array {
	c := begin("topk")
	h := c.in(a)
	return c.do(func(out *uintptr) int32 { return fn.topk(h, int32(k), int32(axis), out) })
}

// Take picks the slices of a at indices along axis (embedding lookup).
func Take(a, indices *Array, axis int) *Array {
	c := begin("take")
	h, hi := c.in(a), c.in(indices)
	return c.do(func(out *uintptr) int32 { return fn.take(h, hi, int32(axis), out) })
}

// TakeAlongAxis picks, for each position, the element at indices along axis.
func TakeAlongAxis(a, indices *Array, axis int) *Array {
	c := begin("take_along_axis")
	h, hi := c.in(a), c.in(indices)
	return c.do(func(out *uintptr) int32 { return fn.takeAlongAxis(h, hi, int32(axis), out) })
}

// PutAlongAxis is a with values written at indices along axis.
func PutAlongAxis(a, indices, values *Array, axis int) *Array {
	c := begin("put_along_axis")
	h, hi, hv := c.in(a), c.in(indices), c.in(values)
	return c.do(func(out *uintptr) int32 { return fn.putAlongAxis(h, hi, hv, int32(axis), out) })
}

// Gather takes slices of sliceSizes from a at the positions given by one
// index array per axis in axes.
func Gather(a *Array, indices []*Array, axes, sliceSizes []int) *Array {
	c := begin("gather")
	h := c.in(a)
	hs := c.ins(indices)
	ax, sz := i32s(axes), i32s(sliceSizes)
	return c.do(func(out *uintptr) int32 {
		return fn.gather(h, hptr(hs), int32(len(hs)), ptr32(ax), int32(len(ax)), ptr32(sz), int32(len(sz)), out)
	})
}
