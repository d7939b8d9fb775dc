package mlx

import (
	"fmt"
	"math"
)

// Dtype is an MLX element type; the values are the shim's dtype codes.
type Dtype int32

const (
	Bool Dtype = iota
	Uint8
	Uint16
	Uint32
	Uint64
	Int8
	Int16
	Int32
	Int64
	Float16
	Float32
	Float64
	BFloat16
	Complex64
)

var dtypeInfo = [...]struct {
	name string
	size int
}{
	{"bool", 1}, {"uint8", 1}, {"uint16", 2}, {"uint32", 4}, {"uint64", 8},
	{"int8", 1}, {"int16", 2}, {"int32", 4}, {"int64", 8},
	{"float16", 2}, {"float32", 4}, {"float64", 8}, {"bfloat16", 2}, {"complex64", 8},
}

func (d Dtype) valid() bool { return d >= 0 && int(d) < len(dtypeInfo) }

// String is MLX's name for the dtype ("bfloat16").
func (d Dtype) String() string {
	if !d.valid() {
		return fmt.Sprintf("dtype(%d)", int32(d))
	}
	return dtypeInfo[d].name
}

// Size is the size of one element in bytes.
func (d Dtype) Size() int {
	if !d.valid() {
		return 0
	}
	return dtypeInfo[d].size
}

// IsFloat reports whether d is a real floating-point type.
func (d Dtype) IsFloat() bool {
	return d == Float16 || d == Float32 || d == Float64 || d == BFloat16
}

// ParseDtype maps MLX's and safetensors' names ("bfloat16", "BF16", "F32")
// to a Dtype.
func ParseDtype(s string) (Dtype, error) {
	switch s {
	case "BOOL":
		return Bool, nil
	case "U8":
		return Uint8, nil
	case "U16":
		return Uint16, nil
	case "U32":
		return Uint32, nil
	case "U64":
		return Uint64, nil
	case "I8":
		return Int8, nil
	case "I16":
		return Int16, nil
	case "I32":
		return Int32, nil
	case "I64":
		return Int64, nil
	case "F16":
		return Float16, nil
	case "F32":
		return Float32, nil
	case "F64":
		return Float64, nil
	case "BF16":
		return BFloat16, nil
	case "C64":
		return Complex64, nil
	}
	for i, d := range dtypeInfo {
		if d.name == s {
			return Dtype(i), nil
		}
	}
	return 0, fmt.Errorf("unknown dtype %q", s)
}

// Element is a Go type whose memory layout matches an MLX dtype.
type Element interface {
	bool | uint8 | uint16 | uint32 | uint64 | int8 | int16 | int32 | int64 |
		float32 | float64 | complex64
}

// DtypeOf is the dtype whose elements have T's layout. uint16 maps to
// Uint16; use FromSliceAs for float16 and bfloat16 bit patterns.
func DtypeOf[T Element]() Dtype {
	var z T
	switch any(z).(type) {
	case bool:
		return Bool
	case uint8:
		return Uint8
	case uint16:
		return Uint16
	case uint32:
		return Uint32
	case uint64:
		return Uint64
	case int8:
		return Int8
	case int16:
		return Int16
	case int32:
		return Int32
	case int64:
		return Int64
	case float32:
		return Float32
	case float64:
		return Float64
	case complex64:
		return Complex64
	}
	panic("unreachable: Element has no other types")
}

// Float32ToBFloat16 rounds f to the nearest bfloat16, ties to even, the way
// MLX's bfloat16 conversion does; every NaN becomes MLX's canonical 0x7fc0.
func Float32ToBFloat16(f float32) uint16 {
	b := math.Float32bits(f)
	if f != f {
		return 0x7fc0
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// BFloat16ToFloat32 widens a bfloat16 exactly.
func BFloat16ToFloat32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// Float32ToFloat16 rounds f to the nearest IEEE half, ties to even, with
// overflow to infinity and gradual underflow to subnormals.
func Float32ToFloat16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	switch {
	case exp == 0xff: // inf or NaN
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	case exp-127 > 15: // too large: infinity
		return sign | 0x7c00
	case exp-127 >= -14: // normal half
		e := uint32(exp-127+15) << 10
		m := mant >> 13
		v := e | m
		rest := mant & 0x1fff
		if rest > 0x1000 || (rest == 0x1000 && v&1 == 1) {
			v++ // may carry into the exponent, up to infinity: correct
		}
		return sign | uint16(v)
	case exp-127 >= -25: // subnormal half (or rounds up to the smallest)
		m := mant | 0x800000 // implicit bit
		shift := uint32(-14-(exp-127)) + 13
		v := m >> shift
		rest := m & (1<<shift - 1)
		halfway := uint32(1) << (shift - 1)
		if rest > halfway || (rest == halfway && v&1 == 1) {
			v++
		}
		return sign | uint16(v)
	default: // underflow to signed zero
		return sign
	}
}

// Float16ToFloat32 widens an IEEE half exactly.
func Float16ToFloat32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp == 0:
		if mant == 0 {
			return math.Float32frombits(sign)
		}
		// Subnormal: value is mant * 2^-24.
		f := float32(mant) * (1.0 / (1 << 24))
		if sign != 0 {
			f = -f
		}
		return f
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}
