package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
)

// convertAffine repacks Q4_0, Q4_1 and Q8_0 blocks into MLX's affine layout
// without changing any value. One GGUF block of 32 becomes one MLX group:
//
//	Q4_1: w = d*q + m          → scale d, bias m
//	Q4_0: w = d*(q-8)          → scale d, bias -8d
//	Q8_0: w = d*x, x int8      → q = x+128, scale d, bias -128d
//
// Scales and biases are float16, the type d and m have in the file (and what
// mlx's own GGUF loader emits): d and m are copied bit for bit, and -8d and
// -128d are d times a power of two, exact in float16 unless they overflow.
// If any bias of a tensor would overflow (|d| > 8188 for Q4_0, > 511.75 for
// Q8_0), the whole tensor gets float32 scales and biases instead.
//
// Dequantizing with scale*q + bias in float32 gives exactly ggml's value:
// scale*q is exact (an 11-bit significand times an integer of at most 8
// bits fits in float32's 24), and for Q4_0/Q8_0 the sum d*q - 8d = d*(q-8)
// is itself such a product, so the addition is exact too; for Q4_1 both
// sides round the same exact d*q + m once. The only bit-level difference is
// the sign of a zero: ggml gives -0 for d*(0) with d < 0, the affine sum +0.
func convertAffine(ti TensorInfo, raw []byte) (*Affine, error) {
	info := types[ti.Type]
	blocks := len(raw) / int(info.size)
	shape := ti.Shape()
	last := len(shape) - 1
	a := &Affine{GroupSize: 32, Bits: 4}
	if ti.Type == Q8_0 {
		a.Bits = 8
	}
	a.WeightShape = append(append([]int(nil), shape[:last]...), shape[last]*a.Bits/32)
	a.ScaleShape = append(append([]int(nil), shape[:last]...), shape[last]/32)
	a.Weight = make([]byte, blocks*32*a.Bits/8)

	// Scales and biases as float32 values first; narrowed below if exact.
	scales := make([]float32, blocks)
	biases := make([]float32, blocks)
	for b := 0; b < blocks; b++ {
		blk := raw[b*int(info.size) : (b+1)*int(info.size)]
		d := halfToFloat32(binary.LittleEndian.Uint16(blk))
		scales[b] = d
		switch ti.Type {
		case Q4_1:
			biases[b] = halfToFloat32(binary.LittleEndian.Uint16(blk[2:]))
			packNibbles(a.Weight[b*16:], blk[4:20])
		case Q4_0:
			biases[b] = -8 * d
			packNibbles(a.Weight[b*16:], blk[2:18])
		case Q8_0:
			biases[b] = -128 * d
			for j, x := range blk[2:34] {
				a.Weight[b*32+j] = x ^ 0x80 // int8 x → uint8 x+128
			}
		}
		// An infinite or NaN d makes d*q + bias differ from d*(q-8).
		if ti.Type != Q4_1 && (math.IsInf(float64(d), 0) || d != d) {
			return nil, fmt.Errorf("block %d has a non-finite scale %v, which affine quantization cannot represent losslessly", b, d)
		}
	}
	a.Scales, a.Biases, a.ScaleDType = narrowScales(scales, biases)
	return a, nil
}

// packNibbles turns a ggml 4-bit block (element i in the low nibble of
// qs[i], element i+16 in the high nibble) into MLX order (element j in bits
// 4j of a little-endian word, i.e. low nibble of byte j/2 for even j).
func packNibbles(dst, qs []byte) {
	for k := 0; k < 16; k++ {
		e0, e1 := nibble(qs, 2*k), nibble(qs, 2*k+1)
		dst[k] = e0 | e1<<4
	}
}

func nibble(qs []byte, e int) byte {
	if e < 16 {
		return qs[e] & 0x0f
	}
	return qs[e-16] >> 4
}

// narrowScales stores scales and biases as float16 when every value is
// exactly representable, else as float32.
func narrowScales(scales, biases []float32) (s, b []byte, dt DType) {
	s16 := make([]byte, 2*len(scales))
	b16 := make([]byte, 2*len(biases))
	exact := true
	for i := range scales {
		hs, ok1 := halfFromFloat32(scales[i])
		hb, ok2 := halfFromFloat32(biases[i])
		if !ok1 || !ok2 {
			exact = false
			break
		}
		binary.LittleEndian.PutUint16(s16[2*i:], hs)
		binary.LittleEndian.PutUint16(b16[2*i:], hb)
	}
	if exact {
		return s16, b16, Float16
	}
	return float32Bytes(scales), float32Bytes(biases), Float32
}

func float32Bytes(v []float32) []byte {
	out := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(x))
	}
	return out
}

// dequantize computes scale*q + bias in float32, reading q from the packed
// uint32 words as MLX defines them (not from how convertAffine wrote them).
func (a *Affine) dequantize() []float32 {
	n := len(a.Weight) * 8 / a.Bits
	out := make([]float32, n)
	perWord := 32 / a.Bits
	mask := uint32(1)<<a.Bits - 1
	for i := range out {
		w := binary.LittleEndian.Uint32(a.Weight[4*(i/perWord):])
		q := float32(w >> (a.Bits * (i % perWord)) & mask)
		g := i / a.GroupSize
		s, b := a.scaleBias(g)
		out[i] = float32(s*q) + b
	}
	return out
}

func (a *Affine) scaleBias(g int) (s, b float32) {
	if a.ScaleDType == Float16 {
		return halfToFloat32(binary.LittleEndian.Uint16(a.Scales[2*g:])),
			halfToFloat32(binary.LittleEndian.Uint16(a.Biases[2*g:]))
	}
	return math.Float32frombits(binary.LittleEndian.Uint32(a.Scales[4*g:])),
		math.Float32frombits(binary.LittleEndian.Uint32(a.Biases[4*g:]))
}
