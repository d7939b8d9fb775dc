package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
)

// convertAffine repacks Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 blocks into MLX's
// affine layout without changing any value. One GGUF block of 32 becomes one
// MLX group:
//
//	Q4_1: w = d*q + m          → 4 bits, scale d, bias m
//	Q4_0: w = d*(q-8)          → 4 bits, scale d, bias -8d
//	Q5_1: w = d*q + m          → 5 bits, scale d, bias m
//	Q5_0: w = d*(q-16)         → 5 bits, scale d, bias -16d
//	Q8_0: w = d*x, x int8      → 8 bits, q = x+128, scale d, bias -128d
//
// Scales and biases are float16, the type d and m have in the file (and what
// mlx's own GGUF loader emits): d and m are copied bit for bit, and -8d,
// -16d and -128d are d times a power of two, exact in float16 unless they
// overflow. If any bias of a tensor would overflow (|d| > 8188 for Q4_0,
// > 4094 for Q5_0, > 511.75 for Q8_0), the whole tensor gets float32 scales
// and biases instead.
//
// Dequantizing with scale*q + bias in float32 gives exactly ggml's value:
// scale*q is exact (an 11-bit significand times an integer of at most 8
// bits fits in float32's 24), and for Q4_0/Q5_0/Q8_0 the sum d*q - 2^k*d =
// d*(q-2^k) is itself such a product, so the addition is exact too; for
// Q4_1/Q5_1 both sides round the same exact d*q + m once. The only bit-level
// difference is the sign of a zero: ggml gives -0 for d*(0) with d < 0, the
// affine sum +0.
func convertAffine(ti TensorInfo, raw []byte) (*Affine, error) {
	info := types[ti.Type]
	blocks := len(raw) / int(info.size)
	shape := ti.Shape()
	last := len(shape) - 1
	a := &Affine{GroupSize: 32, Bits: affineBits[ti.Type]}
	a.WeightShape = append(append([]int(nil), shape[:last]...), shape[last]*a.Bits/32)
	a.ScaleShape = append(append([]int(nil), shape[:last]...), shape[last]/32)
	a.Weight = make([]byte, blocks*32*a.Bits/8)

	// float16 scales and biases are written as the file's bits; a bias that
	// float16 cannot hold exactly sends the tensor to the float32 path.
	a.Scales, a.Biases, a.ScaleDType = make([]byte, 2*blocks), make([]byte, 2*blocks), Float16
	size := int(info.size)
	// Large tensors are split across CPUs: start-up time is spent here.
	chunks := min(runtime.GOMAXPROCS(0), max(1, blocks/(1<<15)))
	per := (blocks + chunks - 1) / chunks
	errs := make([]error, chunks)
	inexact := make([]bool, chunks)
	var wg sync.WaitGroup
	for c := 0; c < chunks; c++ {
		lo, hi := c*per, min(blocks, (c+1)*per)
		wg.Go(func() { inexact[c], errs[c] = a.convertBlocks(ti.Type, raw, size, lo, hi) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	exact := !slices.Contains(inexact, true)
	if !exact {
		a.Scales, a.Biases, a.ScaleDType = widenScales(ti.Type, raw, size, blocks)
	}
	return a, nil
}

// convertBlocks converts blocks [lo, hi) into a's float16 layout and
// reports whether some bias was not exact in float16.
func (a *Affine) convertBlocks(t GGMLType, raw []byte, size, lo, hi int) (inexact bool, err error) {
	for b := lo; b < hi; b++ {
		blk := raw[b*size : (b+1)*size]
		dBits := binary.LittleEndian.Uint16(blk)
		if t != Q4_1 && t != Q5_1 && dBits&0x7c00 == 0x7c00 {
			// An infinite or NaN d makes d*q + bias differ from d*(q-8).
			return false, fmt.Errorf("block %d has a non-finite scale %v, which affine quantization cannot represent losslessly", b, halfToFloat32(dBits))
		}
		a.Scales[2*b], a.Scales[2*b+1] = blk[0], blk[1]
		var bias uint16
		ok := true
		switch t {
		case Q4_1:
			bias = binary.LittleEndian.Uint16(blk[2:])
			packNibbles(a.Weight[b*16:], blk[4:20])
		case Q4_0:
			bias, ok = halfFromFloat32(-8 * halfToFloat32(dBits))
			packNibbles(a.Weight[b*16:], blk[2:18])
		case Q5_1:
			bias = binary.LittleEndian.Uint16(blk[2:])
			packBits(a.Weight[b*20:], q5Values(blk[4:8], blk[8:24]), 5)
		case Q5_0:
			bias, ok = halfFromFloat32(-16 * halfToFloat32(dBits))
			packBits(a.Weight[b*20:], q5Values(blk[2:6], blk[6:22]), 5)
		case Q8_0:
			bias, ok = halfFromFloat32(-128 * halfToFloat32(dBits))
			for j, x := range blk[2:34] {
				a.Weight[b*32+j] = x ^ 0x80 // int8 x → uint8 x+128
			}
		}
		inexact = inexact || !ok
		binary.LittleEndian.PutUint16(a.Biases[2*b:], bias)
	}
	return inexact, nil
}

// affineBits is the MLX bit width of each GGUF type that maps onto affine
// quantization with group size 32.
var affineBits = map[GGMLType]int{Q4_0: 4, Q4_1: 4, Q5_0: 5, Q5_1: 5, Q8_0: 8, Q4_K: 4, Q5_K: 5}

// AffineBits reports whether Load returns tensors of type t in MLX affine
// quantization (group size 32), and with how many bits.
func AffineBits(t GGMLType) (bits int, ok bool) {
	bits, ok = affineBits[t]
	return bits, ok
}

// q5Values unpacks a Q5_0/Q5_1 block's 32 unsigned 5-bit values: element j
// (j < 16) is the low nibble of qs[j], element j+16 its high nibble, and bit
// j of the little-endian qh word is element j's fifth bit (ggml's
// dequantize_row_q5_0).
func q5Values(qh4, qs []byte) *[32]uint8 {
	qh := binary.LittleEndian.Uint32(qh4)
	var v [32]uint8
	for j := 0; j < 16; j++ {
		v[j] = qs[j]&0x0f | uint8(qh>>j&1)<<4
		v[j+16] = qs[j]>>4 | uint8(qh>>(j+16)&1)<<4
	}
	return &v
}

// packBits writes 32 values of the given width into MLX's packing: a
// little-endian bit stream, element i at bits [i*bits, i*bits+bits) (for 4
// and 8 bits that is element j of a word in bits 4j or 8j).
func packBits(dst []byte, v *[32]uint8, bits int) {
	clear(dst[:4*bits])
	for i, x := range v {
		off := i * bits
		w := uint16(x) << (off % 8)
		dst[off/8] |= byte(w)
		if w > 0xff {
			dst[off/8+1] |= byte(w >> 8)
		}
	}
}

// widenScales gives float32 scales and biases for a tensor whose biases
// overflow float16 (-8d, -16d or -128d is exact in float32 for every finite d).
func widenScales(t GGMLType, raw []byte, size, blocks int) (s, b []byte, dt DType) {
	scales := make([]float32, blocks)
	biases := make([]float32, blocks)
	mult := map[GGMLType]float32{Q4_0: -8, Q5_0: -16, Q8_0: -128}[t]
	for i := range scales {
		scales[i] = halfToFloat32(binary.LittleEndian.Uint16(raw[i*size:]))
		biases[i] = mult * scales[i]
	}
	return float32Bytes(scales), float32Bytes(biases), Float32
}

// packNibbles turns a ggml 4-bit block (element i in the low nibble of
// qs[i], element i+16 in the high nibble) into MLX order (element j in bits
// 4j of a little-endian word, i.e. low nibble of byte j/2 for even j).
func packNibbles(dst, qs []byte) {
	_, _ = dst[15], qs[15]
	for k := 0; k < 8; k++ {
		dst[k] = qs[2*k]&0x0f | qs[2*k+1]<<4   // elements 2k, 2k+1 < 16: low nibbles
		dst[k+8] = qs[2*k]>>4 | qs[2*k+1]&0xf0 // elements 16+2k, 17+2k: high nibbles
	}
}

func float32Bytes(v []float32) []byte {
	out := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(x))
	}
	return out
}

// dequantize computes scale*q + bias in float32, reading q from the packed
// bit stream as MLX defines it (not from how the converters wrote it).
func (a *Affine) dequantize() []float32 {
	n := len(a.Weight) * 8 / a.Bits
	out := make([]float32, n)
	mask := uint64(1)<<a.Bits - 1
	for i := range out {
		off := i * a.Bits
		var w uint64
		for k := 0; k < 2 && off/8+k < len(a.Weight); k++ {
			w |= uint64(a.Weight[off/8+k]) << (8 * k)
		}
		q := float32(w >> (off % 8) & mask)
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

// WidenScales converts float16 scales and biases to float32, which holds
// every float16 exactly: the values are unchanged, and MLX's quantized ops
// then run in float32 (a model whose embedding is quantized takes its
// activation dtype from these scales).
func (a *Affine) WidenScales() {
	if a.ScaleDType != Float16 {
		return
	}
	widen := func(b []byte) []byte {
		v := make([]float32, len(b)/2)
		for i := range v {
			v[i] = halfToFloat32(binary.LittleEndian.Uint16(b[2*i:]))
		}
		return float32Bytes(v)
	}
	a.Scales, a.Biases, a.ScaleDType = widen(a.Scales), widen(a.Biases), Float32
}
