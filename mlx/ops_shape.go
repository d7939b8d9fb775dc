package mlx

// AsType converts a's elements to dt.
func AsType(a *Array, dt Dtype) *Array {
	c := begin("astype")
	h := c.in(a)
	return c.do(func(out *uintptr) int32 { return fn.astype(h, int32(dt), out) })
}

// View reinterprets a's bytes as dt (the last axis scales by the size ratio).
func View(a *Array, dt Dtype) *Array {
	c := begin("view")
	h := c.in(a)
	return c.do(func(out *uintptr) int32 { return fn.view(h, int32(dt), out) })
}

// Arange is [start, stop) in steps of step.
func Arange(start, stop, step float64, dt Dtype) *Array {
	c := begin("arange")
	return c.do(func(out *uintptr) int32 { return fn.arange(&start, &stop, &step, int32(dt), out) })
}

// Zeros is an array of zeros.
func Zeros(dt Dtype, shape ...int) *Array {
	c := begin("zeros")
	sh := i32s(shape)
	return c.do(func(out *uintptr) int32 { return fn.zeros(ptr32(sh), int32(len(sh)), int32(dt), out) })
}

// Ones is an array of ones.
func Ones(dt Dtype, shape ...int) *Array {
	c := begin("ones")
	sh := i32s(shape)
	return c.do(func(out *uintptr) int32 { return fn.ones(ptr32(sh), int32(len(sh)), int32(dt), out) })
}

// Full broadcasts vals to shape with dtype dt.
func Full(shape []int, vals *Array, dt Dtype) *Array {
	c := begin("full")
	h := c.in(vals)
	sh := i32s(shape)
	return c.do(func(out *uintptr) int32 { return fn.full(ptr32(sh), int32(len(sh)), h, int32(dt), out) })
}

// Reshape gives a a new shape; one dimension may be -1.
func Reshape(a *Array, shape ...int) *Array {
	c := begin("reshape")
	h := c.in(a)
	sh := i32s(shape)
	return c.do(func(out *uintptr) int32 { return fn.reshape(h, ptr32(sh), int32(len(sh)), out) })
}

// Transpose permutes a's axes; with no axes it reverses them.
func Transpose(a *Array, axes ...int) *Array {
	c := begin("transpose")
	h := c.in(a)
	if axes == nil && c.err == nil {
		n := a.Ndim()
		axes = make([]int, n)
		for i := range axes {
			axes[i] = n - 1 - i
		}
	}
	ax := i32s(axes)
	return c.do(func(out *uintptr) int32 { return fn.transpose(h, ptr32(ax), int32(len(ax)), out) })
}

// SwapAxes exchanges two axes.
func SwapAxes(a *Array, axis1, axis2 int) *Array {
	c := begin("swapaxes")
	h := c.in(a)
	return c.do(func(out *uintptr) int32 { return fn.swapaxes(h, int32(axis1), int32(axis2), out) })
}

// ExpandDims inserts size-1 axes at the given positions.
func ExpandDims(a *Array, axes ...int) *Array {
	c := begin("expand_dims")
	h := c.in(a)
	ax := i32s(axes)
	return c.do(func(out *uintptr) int32 { return fn.expandDims(h, ptr32(ax), int32(len(ax)), out) })
}

// Squeeze removes the given size-1 axes; with none it removes all of them.
func Squeeze(a *Array, axes ...int) *Array {
	c := begin("squeeze")
	h := c.in(a)
	if axes == nil && c.err == nil {
		for i, d := range a.Shape() {
			if d == 1 {
				axes = append(axes, i)
			}
		}
	}
	ax := i32s(axes)
	return c.do(func(out *uintptr) int32 { return fn.squeeze(h, ptr32(ax), int32(len(ax)), out) })
}

// Flatten merges axes start..end (inclusive; negative counts from the end).
func Flatten(a *Array, start, end int) *Array {
	c := begin("flatten")
	h := c.in(a)
	return c.do(func(out *uintptr) int32 { return fn.flatten(h, int32(start), int32(end), out) })
}

// BroadcastTo broadcasts a to shape.
func BroadcastTo(a *Array, shape ...int) *Array {
	c := begin("broadcast_to")
	h := c.in(a)
	sh := i32s(shape)
	return c.do(func(out *uintptr) int32 { return fn.broadcastTo(h, ptr32(sh), int32(len(sh)), out) })
}

// Concatenate joins arrays along axis.
func Concatenate(arrs []*Array, axis int) *Array {
	c := begin("concatenate")
	hs := c.ins(arrs)
	return c.do(func(out *uintptr) int32 { return fn.concatenate(hptr(hs), int32(len(hs)), int32(axis), out) })
}

// Stack joins arrays along a new axis.
func Stack(arrs []*Array, axis int) *Array {
	c := begin("stack")
	hs := c.ins(arrs)
	return c.do(func(out *uintptr) int32 { return fn.stack(hptr(hs), int32(len(hs)), int32(axis), out) })
}

// Split cuts a into num equal parts along axis. On error every part carries it.
func Split(a *Array, num, axis int) []*Array {
	c := begin("split")
	h := c.in(a)
	if num <= 0 {
		c.fail("cannot split into %d parts", num)
		num = 1
	}
	return c.many(num, func(out *uintptr) int32 { return fn.splitEqual(h, int32(num), int32(axis), out, int32(num)) })
}

// SplitAt cuts a before each of indices along axis: len(indices)+1 parts.
func SplitAt(a *Array, indices []int, axis int) []*Array {
	c := begin("split")
	h := c.in(a)
	idx := i32s(indices)
	n := len(idx) + 1
	return c.many(n, func(out *uintptr) int32 {
		return fn.splitAt(h, ptr32(idx), int32(len(idx)), int32(axis), out, int32(n))
	})
}

// Strided is one result of Views: its Shape, and Strides and Offset in
// elements of the input taken in row-major order.
type Strided struct {
	Shape, Strides []int
	Offset         int
}

// Views returns strided views of a, sharing its data, as one graph node on
// the CPU: element idx of view i is a's element Offset + sum(idx[d] *
// Strides[d]) in row-major order. Every view has as many dims and must stay
// inside a. Each MLX view op (slice, reshape, transpose) is a node that
// MLX's CPU schedules for a few microseconds; a layer cutting its fused
// projections into heads made nine.
func Views(a *Array, views ...Strided) []*Array {
	c := begin("views")
	h := c.in(a)
	n := max(len(views), 1)
	var nd int
	if len(views) == 0 {
		c.fail("no views")
	} else {
		nd = len(views[0].Shape)
	}
	shapes := make([]int32, 0, n*nd)
	strides := make([]int64, 0, n*nd)
	offsets := make([]int64, 0, n)
	for i, v := range views {
		if len(v.Shape) != nd || len(v.Strides) != nd {
			c.fail("view %d has %d dims and %d strides, view 0 %d dims", i, len(v.Shape), len(v.Strides), nd)
			break
		}
		shapes = append(shapes, i32s(v.Shape)...)
		for _, s := range v.Strides {
			strides = append(strides, int64(s))
		}
		offsets = append(offsets, int64(v.Offset))
	}
	var sp, op *int64
	if len(strides) > 0 {
		sp = &strides[0]
	}
	if len(offsets) > 0 {
		op = &offsets[0]
	}
	return c.many(n, func(out *uintptr) int32 {
		return fn.views(h, int32(len(views)), int32(nd), ptr32(shapes), sp, op, out)
	})
}

// Slice is a[start:stop] on every axis, stride 1.
func Slice(a *Array, start, stop []int) *Array {
	strides := make([]int, len(start))
	for i := range strides {
		strides[i] = 1
	}
	return SliceStrided(a, start, stop, strides)
}

// SliceStrided is a[start:stop:strides] on every axis.
func SliceStrided(a *Array, start, stop, strides []int) *Array {
	c := begin("slice")
	h := c.in(a)
	if len(stop) != len(start) || len(strides) != len(start) {
		c.fail("start, stop and strides have lengths %d, %d, %d", len(start), len(stop), len(strides))
	}
	s0, s1, s2 := i32s(start), i32s(stop), i32s(strides)
	return c.do(func(out *uintptr) int32 {
		return fn.slice(h, ptr32(s0), ptr32(s1), ptr32(s2), int32(len(s0)), out)
	})
}

// SliceDynamic takes sizes elements along axes starting at the offsets held
// in the array start, so the offsets can change without a new graph.
func SliceDynamic(a, start *Array, axes, sizes []int) *Array {
	c := begin("slice_dynamic")
	h, hs := c.in(a), c.in(start)
	ax, sz := i32s(axes), i32s(sizes)
	return c.do(func(out *uintptr) int32 {
		return fn.sliceDyn(h, hs, ptr32(ax), int32(len(ax)), ptr32(sz), int32(len(sz)), out)
	})
}

// SliceUpdate is src with src[start:stop] replaced by update (stride 1).
func SliceUpdate(src, update *Array, start, stop []int) *Array {
	strides := make([]int, len(start))
	for i := range strides {
		strides[i] = 1
	}
	return SliceUpdateStrided(src, update, start, stop, strides)
}

// SliceUpdateStrided is src with src[start:stop:strides] replaced by update.
func SliceUpdateStrided(src, update *Array, start, stop, strides []int) *Array {
	c := begin("slice_update")
	hs, hu := c.in(src), c.in(update)
	if len(stop) != len(start) || len(strides) != len(start) {
		c.fail("start, stop and strides have lengths %d, %d, %d", len(start), len(stop), len(strides))
	}
	s0, s1, s2 := i32s(start), i32s(stop), i32s(strides)
	return c.do(func(out *uintptr) int32 {
		return fn.sliceUpdate(hs, hu, ptr32(s0), ptr32(s1), ptr32(s2), int32(len(s0)), out)
	})
}

// SliceUpdateDynamic writes update into src along axes at the offsets held in
// the array start.
func SliceUpdateDynamic(src, update, start *Array, axes []int) *Array {
	c := begin("slice_update_dynamic")
	hs, hu, ho := c.in(src), c.in(update), c.in(start)
	ax := i32s(axes)
	return c.do(func(out *uintptr) int32 { return fn.sliceUpdDyn(hs, hu, ho, ptr32(ax), int32(len(ax)), out) })
}

// Pad pads axes by low and high elements; mode is "constant" (with value)
// or "edge".
func Pad(a *Array, axes, low, high []int, value *Array, mode string) *Array {
	c := begin("pad")
	h, hv := c.in(a), c.in(value)
	if len(low) != len(axes) || len(high) != len(axes) {
		c.fail("axes, low and high have lengths %d, %d, %d", len(axes), len(low), len(high))
	}
	ax, lo, hi := i32s(axes), i32s(low), i32s(high)
	return c.do(func(out *uintptr) int32 {
		return fn.pad(h, ptr32(ax), int32(len(ax)), ptr32(lo), ptr32(hi), hv, mode, out)
	})
}

// Repeat repeats each element repeats times along axis.
func Repeat(a *Array, repeats, axis int) *Array {
	c := begin("repeat")
	h := c.in(a)
	return c.do(func(out *uintptr) int32 { return fn.repeat(h, int32(repeats), int32(axis), out) })
}

// Tril zeroes the elements above diagonal k of the last two axes.
func Tril(a *Array, k int) *Array {
	c := begin("tril")
	h := c.in(a)
	return c.do(func(out *uintptr) int32 { return fn.tril(h, int32(k), out) })
}

// Triu zeroes the elements below diagonal k of the last two axes.
func Triu(a *Array, k int) *Array {
	c := begin("triu")
	h := c.in(a)
	return c.do(func(out *uintptr) int32 { return fn.triu(h, int32(k), out) })
}

// Contiguous is a with row-major memory.
func Contiguous(a *Array) *Array {
	c := begin("contiguous")
	h := c.in(a)
	return c.do(func(out *uintptr) int32 { return fn.contiguous(h, out) })
}

// Where picks x where cond is true and y elsewhere.
func Where(cond, x, y *Array) *Array {
	c := begin("where")
	hc, hx, hy := c.in(cond), c.in(x), c.in(y)
	return c.do(func(out *uintptr) int32 { return fn.where(hc, hx, hy, out) })
}
