package mlx

import "unsafe"

// FromSlice copies data into a new array of T's dtype. With no shape the
// array is 1-D of len(data); otherwise the shape's product must be len(data).
func FromSlice[T Element](data []T, shape ...int) *Array {
	return FromSliceAs(data, DtypeOf[T](), shape...)
}

// FromSliceAs copies data into a new array of dtype dt, reinterpreting the
// bits: T must have dt's element size. It is how float16 and bfloat16 bit
// patterns ([]uint16) become arrays.
func FromSliceAs[T Element](data []T, dt Dtype, shape ...int) *Array {
	var z T
	if int(unsafe.Sizeof(z)) != dt.Size() {
		return errArray(argError("from_slice", "cannot make %s from %T elements", dt, z))
	}
	if shape == nil {
		shape = []int{len(data)}
	}
	return fromBytes("from_slice", fn.fromData, sliceBytes(data), dt, shape)
}

// FromBytes copies weights — raw little-endian element bytes, a safetensors
// tensor for instance — into a new array of dtype dt and the given shape. On
// a CUDA GPU they go to plain device memory, as mx.load puts mlx-lm's
// weights, and are copied before it returns (one synchronisation per call:
// use FromSlice for per-step inputs); elsewhere the array holds a copy in
// host memory.
func FromBytes(b []byte, dt Dtype, shape ...int) *Array {
	return fromBytes("from_bytes", fn.loadBytes, b, dt, shape)
}

type fromDataFunc = func(data unsafe.Pointer, nbytes uintptr, shape *int32, ndim int32, dtype int32, out *uintptr) int32

func fromBytes(op string, f fromDataFunc, b []byte, dt Dtype, shape []int) *Array {
	if !loaded.Load() {
		return errArray(ErrNotLoaded)
	}
	if !dt.valid() {
		return errArray(argError(op, "unknown dtype %d", int32(dt)))
	}
	sh := i32s(shape)
	var p unsafe.Pointer
	if len(b) > 0 {
		p = unsafe.Pointer(&b[0])
	}
	var out uintptr
	if err := check(op, f(p, uintptr(len(b)), ptr32(sh), int32(len(sh)), int32(dt), &out)); err != nil {
		return errArray(err)
	}
	return newArray(out)
}

// Scalar makes a 0-d array of dtype dt holding v, converted the way MLX
// converts a float (so Scalar(0.1, BFloat16) is MLX's bfloat16 of 0.1f).
func Scalar(v float32, dt Dtype) *Array {
	if !loaded.Load() {
		return errArray(ErrNotLoaded)
	}
	var out uintptr
	if err := check("scalar", fn.fromFloat(&v, int32(dt), &out)); err != nil {
		return errArray(err)
	}
	return newArray(out)
}

// ScalarInt makes a 0-d array of dtype dt holding v.
func ScalarInt(v int64, dt Dtype) *Array {
	if !loaded.Load() {
		return errArray(ErrNotLoaded)
	}
	var out uintptr
	if err := check("scalar", fn.fromInt(v, int32(dt), &out)); err != nil {
		return errArray(err)
	}
	return newArray(out)
}

// ScalarLike makes a scalar that combines with a the way a Python float does
// in mlx (a "weak" scalar): it takes a's dtype when a is floating point, and
// float32 otherwise. mlx-lm's `x * scale` needs exactly this to keep dtypes.
func ScalarLike(v float32, a *Array) *Array {
	if err := a.Err(); err != nil {
		return errArray(err)
	}
	dt := a.Dtype()
	if !dt.IsFloat() {
		dt = Float32
	}
	return Scalar(v, dt)
}

// Bytes evaluates a and copies its elements out, row-major.
func (a *Array) Bytes() ([]byte, error) {
	if err := a.loadInfo(); err != nil {
		return nil, err
	}
	b := make([]byte, a.Nbytes())
	if err := a.copyOut(b); err != nil {
		return nil, err
	}
	return b, nil
}

func (a *Array) copyOut(b []byte) error {
	var p unsafe.Pointer
	if len(b) > 0 {
		p = unsafe.Pointer(&b[0])
	}
	return check("to_host", fn.arrayToHost(a.h, p, uintptr(len(b))))
}

// ToSlice evaluates a and copies its elements into a new []T. T must have
// a's element size and kind: []uint16 reads float16 and bfloat16 bit
// patterns as well as uint16.
func ToSlice[T Element](a *Array) ([]T, error) {
	if err := a.loadInfo(); err != nil {
		return nil, err
	}
	want := DtypeOf[T]()
	if a.dtype != want && !(want == Uint16 && (a.dtype == Float16 || a.dtype == BFloat16)) {
		var z T
		return nil, argError("to_slice", "cannot read %s array as []%T", a.dtype, z)
	}
	out := make([]T, a.Size())
	if err := a.copyOut(sliceBytes(out)); err != nil {
		return nil, err
	}
	return out, nil
}

// Float32s evaluates a and returns its elements as float32, converting with
// MLX's astype when a is not float32 (bfloat16 logits, int ids).
func (a *Array) Float32s() ([]float32, error) { return convertedSlice[float32](a, Float32) }

// Int32s evaluates a and returns its elements as int32, converting with MLX's
// astype when a is not int32 (argmax's uint32, for instance).
func (a *Array) Int32s() ([]int32, error) { return convertedSlice[int32](a, Int32) }

func convertedSlice[T Element](a *Array, dt Dtype) ([]T, error) {
	if err := a.loadInfo(); err != nil {
		return nil, err
	}
	if a.dtype == dt {
		return ToSlice[T](a)
	}
	c := AsType(a, dt)
	defer c.Free()
	return ToSlice[T](c)
}

// Item evaluates a one-element array and returns its value as float64. It
// reads the element in its own dtype and converts on the host: an astype op
// would be queued behind whatever else the stream holds (a decode step
// scheduled one ahead), so the value would arrive only after that ran too.
func (a *Array) Item() (float64, error) {
	if err := a.loadInfo(); err != nil {
		return 0, err
	}
	if a.Size() != 1 {
		return 0, argError("item", "array of shape %v has %d elements, not 1", a.shape, a.Size())
	}
	switch a.dtype {
	case Bool:
		return item(a, func(v bool) float64 {
			if v {
				return 1
			}
			return 0
		})
	case Uint8:
		return item(a, func(v uint8) float64 { return float64(v) })
	case Uint32:
		return item(a, func(v uint32) float64 { return float64(v) })
	case Uint64:
		return item(a, func(v uint64) float64 { return float64(v) })
	case Int8:
		return item(a, func(v int8) float64 { return float64(v) })
	case Int16:
		return item(a, func(v int16) float64 { return float64(v) })
	case Int32:
		return item(a, func(v int32) float64 { return float64(v) })
	case Int64:
		return item(a, func(v int64) float64 { return float64(v) })
	case Float32:
		return item(a, func(v float32) float64 { return float64(v) })
	case Float64:
		return item(a, func(v float64) float64 { return v })
	case Uint16:
		return item(a, func(v uint16) float64 { return float64(v) })
	case Float16:
		return item(a, func(v uint16) float64 { return float64(Float16ToFloat32(v)) })
	case BFloat16:
		return item(a, func(v uint16) float64 { return float64(BFloat16ToFloat32(v)) })
	}
	c := AsType(a, Float64) // complex64: MLX's cast keeps the real part
	defer c.Free()
	return item(c, func(v float64) float64 { return v })
}

func item[T Element](a *Array, conv func(T) float64) (float64, error) {
	v, err := ToSlice[T](a)
	if err != nil {
		return 0, err
	}
	return conv(v[0]), nil
}
