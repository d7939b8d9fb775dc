package mlx

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
