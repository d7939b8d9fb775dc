package mlx

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
	return c.do(func(out *uintptr) int32 { return fn.addmm(hc, ha, hb, alpha, beta, out) })
}
