package gguf

import (
	"encoding/binary"
	"math"
)

// qk is the k-quant super-block size (ggml's QK_K).
const qk = 256

// dequantizeK expands k-quant super-blocks to little-endian float32 with
// the operations and order of ggml's reference dequantize_row_q*_K. In every
// type the products d*sc, d*sc*q and dmin*m are exact in float32 (a float16
// times small integers), so the single rounding of the final subtraction
// (or of Q8_K's float32 d times q) is the same one ggml makes, with or
// without fused multiply-add.
func dequantizeK(t GGMLType, raw []byte) []byte {
	size := int(types[t].size)
	blocks := len(raw) / size
	out := make([]byte, 4*qk*blocks)
	y := make([]float32, qk)
	for b := 0; b < blocks; b++ {
		blk := raw[b*size : (b+1)*size]
		switch t {
		case Q4_K:
			dequantQ4K(blk, y)
		case Q5_K:
			dequantQ5K(blk, y)
		case Q6_K:
			dequantQ6K(blk, y)
		case Q8_K:
			dequantQ8K(blk, y)
		}
		for i, v := range y {
			binary.LittleEndian.PutUint32(out[4*(b*qk+i):], math.Float32bits(v))
		}
	}
	return out
}

// scaleMinK4 unpacks the j-th 6-bit scale and min of Q4_K/Q5_K's 12-byte
// scales field (ggml's get_scale_min_k4).
func scaleMinK4(j int, q []byte) (sc, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&0xf | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

// Q4_K block: d f16, dmin f16, scales[12], qs[128]: 8 groups of 32.
func dequantQ4K(blk []byte, y []float32) {
	d := halfToFloat32(binary.LittleEndian.Uint16(blk))
	dmin := halfToFloat32(binary.LittleEndian.Uint16(blk[2:]))
	scales, q := blk[4:16], blk[16:144]
	for j, is := 0, 0; j < qk; j, is = j+64, is+2 {
		sc, m := scaleMinK4(is, scales)
		d1, m1 := d*float32(sc), dmin*float32(m)
		sc, m = scaleMinK4(is+1, scales)
		d2, m2 := d*float32(sc), dmin*float32(m)
		for l := 0; l < 32; l++ {
			y[j+l] = float32(d1*float32(q[l]&0xf)) - m1
			y[j+32+l] = float32(d2*float32(q[l]>>4)) - m2
		}
		q = q[32:]
	}
}

// Q5_K block: d f16, dmin f16, scales[12], qh[32], qs[128].
func dequantQ5K(blk []byte, y []float32) {
	d := halfToFloat32(binary.LittleEndian.Uint16(blk))
	dmin := halfToFloat32(binary.LittleEndian.Uint16(blk[2:]))
	scales, qh, ql := blk[4:16], blk[16:48], blk[48:176]
	u1, u2 := uint8(1), uint8(2)
	for j, is := 0, 0; j < qk; j, is = j+64, is+2 {
		sc, m := scaleMinK4(is, scales)
		d1, m1 := d*float32(sc), dmin*float32(m)
		sc, m = scaleMinK4(is+1, scales)
		d2, m2 := d*float32(sc), dmin*float32(m)
		for l := 0; l < 32; l++ {
			q1, q2 := ql[l]&0xf, ql[l]>>4
			if qh[l]&u1 != 0 {
				q1 += 16
			}
			if qh[l]&u2 != 0 {
				q2 += 16
			}
			y[j+l] = float32(d1*float32(q1)) - m1
			y[j+32+l] = float32(d2*float32(q2)) - m2
		}
		ql = ql[32:]
		u1, u2 = u1<<2, u2<<2
	}
}

// Q6_K block: ql[128], qh[64], scales int8[16], d f16.
func dequantQ6K(blk []byte, y []float32) {
	ql, qh, sc := blk[0:128], blk[128:192], blk[192:208]
	d := halfToFloat32(binary.LittleEndian.Uint16(blk[208:]))
	for n := 0; n < qk; n += 128 {
		for l := 0; l < 32; l++ {
			is := l / 16
			q1 := int8(ql[l]&0xf|(qh[l]>>0&3)<<4) - 32
			q2 := int8(ql[l+32]&0xf|(qh[l]>>2&3)<<4) - 32
			q3 := int8(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
			q4 := int8(ql[l+32]>>4|(qh[l]>>6&3)<<4) - 32
			// ggml evaluates d * sc * q left to right.
			y[n+l] = float32(d*float32(int8(sc[is]))) * float32(q1)
			y[n+l+32] = float32(d*float32(int8(sc[is+2]))) * float32(q2)
			y[n+l+64] = float32(d*float32(int8(sc[is+4]))) * float32(q3)
			y[n+l+96] = float32(d*float32(int8(sc[is+6]))) * float32(q4)
		}
		ql, qh, sc = ql[64:], qh[32:], sc[8:]
	}
}

// Q8_K block: d float32, qs int8[256], bsums int16[16] (unused here).
func dequantQ8K(blk []byte, y []float32) {
	d := math.Float32frombits(binary.LittleEndian.Uint32(blk))
	for i := 0; i < qk; i++ {
		y[i] = d * float32(int8(blk[4+i]))
	}
}
