package gguf

import "math"

// halfToFloat32 widens an IEEE 754 binary16 value exactly (every half,
// subnormals included, is a float32).
func halfToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // inf or NaN; keep the payload's top bits
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
	case mant == 0:
		return math.Float32frombits(sign)
	}
	// Subnormal half: value = mant * 2^-24, which float32 holds exactly.
	v := float32(mant) * (1.0 / (1 << 24))
	if sign != 0 {
		v = -v
	}
	return v
}

// halfFromFloat32 narrows to binary16 and reports whether it was exact; the
// affine converters use it only for values they must store without loss.
func halfFromFloat32(f float32) (uint16, bool) {
	if f != f {
		return 0x7e00, false
	}
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	a := math.Abs(float64(f))
	switch {
	case math.IsInf(float64(f), 0):
		return sign | 0x7c00, true
	case a > 65504:
		return sign | 0x7c00, false
	case a >= 1.0/(1<<14): // normal half
		exp := int(b>>23&0xff) - 127 + 15
		mant := b & 0x7fffff
		h := sign | uint16(exp)<<10 | uint16(mant>>13)
		return h, mant&0x1fff == 0
	}
	// Subnormal or zero half: units of 2^-24.
	units := a * (1 << 24)
	r := math.RoundToEven(units)
	return sign | uint16(r), r == units
}

func bf16ToFloat32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }
