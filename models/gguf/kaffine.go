package gguf

import "encoding/binary"

// convertKAffine repacks Q4_K and Q5_K super-blocks into MLX affine
// quantization with group size 32 and float32 scales and biases, without
// changing any value. A super-block of 256 holds 8 groups of 32, each with
// 6-bit integers sc and m, and ggml's dequantize_row_q4_K / q5_K compute
//
//	w = (d*sc)*q - dmin*m   (d, dmin float16; q 4 or 5 bits)
//
// which is affine with scale d*sc and bias -(dmin*m). Both products are
// exact in float32 (an 11-bit significand times a 6-bit integer needs 17
// bits) but not in float16 (11 bits, and d*sc can leave its range), so the
// scales and biases are float32. MLX's dequantize then computes scale*q +
// bias: scale*q is exact (17 + 5 bits ≤ 24) and adding -(dmin*m) is the
// same single rounding as ggml's subtraction, so every value is identical,
// the sign of zeros included (a non-finite d or dmin gives NaN where ggml
// does, possibly with another NaN payload).
func convertKAffine(ti TensorInfo, raw []byte) *Affine {
	size := int(types[ti.Type].size)
	blocks := len(raw) / size
	shape := ti.Shape()
	last := len(shape) - 1
	a := &Affine{GroupSize: 32, Bits: affineBits[ti.Type], ScaleDType: Float32}
	a.WeightShape = append(append([]int(nil), shape[:last]...), shape[last]*a.Bits/32)
	a.ScaleShape = append(append([]int(nil), shape[:last]...), shape[last]/32)
	a.Weight = make([]byte, blocks*qk*a.Bits/8)
	scales := make([]float32, 8*blocks)
	biases := make([]float32, 8*blocks)
	var v [32]uint8
	for b := 0; b < blocks; b++ {
		blk := raw[b*size : (b+1)*size]
		d := halfToFloat32(binary.LittleEndian.Uint16(blk))
		dmin := halfToFloat32(binary.LittleEndian.Uint16(blk[2:]))
		sc := blk[4:16]
		for g := 0; g < 8; g++ {
			s, m := scaleMinK4(g, sc)
			scales[8*b+g] = d * float32(s)
			biases[8*b+g] = -(dmin * float32(m))
			// Groups 2c and 2c+1 share 32 bytes of qs: low and high nibbles.
			c, hi := g/2, g%2
			for l := 0; l < 32; l++ {
				if ti.Type == Q4_K {
					v[l] = blk[16+32*c+l] >> (4 * hi) & 0xf
					continue
				}
				qh, ql := blk[16:48], blk[48+32*c:]
				v[l] = ql[l]>>(4*hi)&0xf | (qh[l]>>g&1)<<4
			}
			packBits(a.Weight[(8*b+g)*4*a.Bits:], &v, a.Bits)
		}
	}
	a.Scales, a.Biases = float32Bytes(scales), float32Bytes(biases)
	return a
}
