package gguf

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"
)

// TestHalfRoundTrip checks every binary16 pattern widens and narrows back
// to itself (NaNs aside), which the affine converter's exactness test needs.
func TestHalfRoundTrip(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := halfToFloat32(uint16(h))
		if f != f {
			continue
		}
		back, exact := halfFromFloat32(f)
		if !exact || back != uint16(h) {
			t.Fatalf("half %#04x → %v → %#04x (exact %v)", h, f, back, exact)
		}
	}
	cases := []struct {
		name  string
		f     float32
		exact bool
	}{
		{"overflow", 65536, false},
		{"max", 65504, true},
		{"not representable", 1.0 + 1.0/4096, false},
		{"below smallest subnormal", 1e-9, false},
		{"smallest subnormal", 1.0 / (1 << 24), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, exact := halfFromFloat32(tc.f); exact != tc.exact {
				t.Errorf("halfFromFloat32(%v) exact = %v, want %v", tc.f, exact, tc.exact)
			}
		})
	}
}

// TestPackNibbles pins the ggml → MLX 4-bit reordering on a known block.
func TestPackNibbles(t *testing.T) {
	var qs [16]byte
	for i := range qs {
		qs[i] = byte(i) | byte(15-i)<<4 // element i = i, element i+16 = 15-i
	}
	var dst [16]byte
	packNibbles(dst[:], qs[:])
	words := []uint32{
		binary.LittleEndian.Uint32(dst[0:]), binary.LittleEndian.Uint32(dst[4:]),
		binary.LittleEndian.Uint32(dst[8:]), binary.LittleEndian.Uint32(dst[12:]),
	}
	for e := 0; e < 32; e++ {
		want := uint32(e)
		if e >= 16 {
			want = uint32(31 - e)
		}
		if got := words[e/8] >> (4 * (e % 8)) & 0xf; got != want {
			t.Errorf("element %d = %d, want %d", e, got, want)
		}
	}
}

// TestQ8K checks Q8_K (which gguf-py cannot dequantize) against its
// definition d * int8(q).
func TestQ8K(t *testing.T) {
	blk := make([]byte, 292)
	binary.LittleEndian.PutUint32(blk, math.Float32bits(0.1))
	for i := 0; i < 256; i++ {
		blk[4+i] = byte(int8(i - 128))
	}
	out := dequantizeK(Q8_K, blk)
	for i := 0; i < 256; i++ {
		got := math.Float32frombits(binary.LittleEndian.Uint32(out[4*i:]))
		if want := float32(0.1) * float32(i-128); got != want {
			t.Fatalf("element %d = %v, want %v", i, got, want)
		}
	}
}

// TestLoadErrors covers what Load refuses.
func TestLoadErrors(t *testing.T) {
	var b builder
	b.header(3, 2, 0)
	b.tensorInfo("nan", Q4_0, 0, 32)
	b.tensorInfo("iq4", IQ4_NL, 32, 32)
	b.pad(32)
	blk := make([]byte, 64)
	binary.LittleEndian.PutUint16(blk, 0x7e00) // NaN scale
	b.buf = append(b.buf, blk...)
	f, err := Parse(b.buf)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ name, want string }{
		{"nan", "non-finite scale"},
		{"iq4", "unsupported tensor type IQ4_NL in tensor iq4"},
		{"absent", `no tensor "absent"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.Load(tc.name)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Load(%q) = %v, want %q", tc.name, err, tc.want)
			}
		})
	}
}
