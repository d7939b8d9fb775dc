package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/internal/testenv"
	"github.com/mlxgo/mlxgo/mlx"
)

const gemma3 = "gemma3-270m/gemma-3-270m-q4_k_m.gguf"

// mlxDequantize is MLX's own dequantize of a converted tensor, in float32.
func mlxDequantize(t *testing.T, a *Affine) []float32 {
	t.Helper()
	var out []float32
	mlxtest.Do(t, func() error {
		sdt, err := mlx.ParseDtype(string(a.ScaleDType))
		if err != nil {
			return err
		}
		w := mlx.FromBytes(a.Weight, mlx.Uint32, a.WeightShape...)
		s := mlx.FromBytes(a.Scales, sdt, a.ScaleShape...)
		b := mlx.FromBytes(a.Biases, sdt, a.ScaleShape...)
		q := mlx.Quant{GroupSize: a.GroupSize, Bits: a.Bits, Mode: "affine"}
		out, err = mlx.DequantizeAs(w, s, b, q, mlx.Float32).Float32s()
		return err
	})
	return out
}

func decodeF32(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// checkKAffine converts a Q4_K/Q5_K tensor and requires MLX's float32
// dequantize of it to equal ggml's reference dequantization (dequantizeK)
// bit for bit, the sign of zeros included. It returns how many of the
// tensor's scales and biases float16 could not have held.
func checkKAffine(t *testing.T, ti TensorInfo, raw []byte) (inexact16, groups int) {
	t.Helper()
	a := convertKAffine(ti, raw)
	if a.ScaleDType != Float32 {
		t.Fatalf("%s: scales are %s, want float32", ti.Name, a.ScaleDType)
	}
	want := decodeF32(dequantizeK(ti.Type, raw))
	got := mlxDequantize(t, a)
	if i, ok := compareBits(got, want, false); !ok {
		t.Fatalf("%s (%s): MLX's dequantize differs from ggml's at %d: %v, want %v", ti.Name, ti.Type, i, got[i], want[i])
	}
	for _, v := range append(decodeF32(a.Scales), decodeF32(a.Biases)...) {
		if _, ok := halfFromFloat32(v); !ok {
			inexact16++
		}
	}
	return inexact16, len(a.Scales) / 4
}

// TestKQuantAffineExactGemma3 proves the K-quant → affine conversion exact
// on every Q4_K tensor of the real Gemma 3 270M Q4_K_M file, through MLX.
func TestKQuantAffineExactGemma3(t *testing.T) {
	f := openT(t, testenv.DataFile(t, gemma3))
	n, inexact, groups := 0, 0, 0
	for _, ti := range f.Tensors {
		if ti.Type != Q4_K && ti.Type != Q5_K {
			continue
		}
		i, g := checkKAffine(t, ti, f.Raw(ti))
		n, inexact, groups = n+1, inexact+i, groups+g
	}
	if n == 0 {
		t.Fatal("no Q4_K/Q5_K tensor in the file")
	}
	t.Logf("%d K-quant tensors exact through MLX's float32 dequantize; %d of %d scales+biases are not exact in float16", n, inexact, 2*groups)
	if inexact == 0 {
		t.Errorf("every scale fits float16: the case for float32 scales is not made by this file")
	}
}

// TestKQuantAffineExactRandom covers Q4_K and Q5_K (the Gemma file has no
// Q5_K) on random blocks with ordinary, negative, zero, subnormal and large
// float16 d and dmin.
func TestKQuantAffineExactRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 3))
	pool := []float32{0.0125, -0.0031, 0, float32(math.Copysign(0, -1)), 6e-8, -3e-6, 1, 2.5e-4, 0.5, -7, 60000}
	for _, typ := range []GGMLType{Q4_K, Q5_K} {
		t.Run(typ.String(), func(t *testing.T) {
			size := int(types[typ].size)
			rows, cols := 5, 512
			raw := make([]byte, rows*cols/qk*size)
			for i := range raw {
				raw[i] = byte(r.Uint32())
			}
			for b := 0; b < len(raw); b += size {
				for _, off := range []int{0, 2} {
					h, _ := halfFromFloat32(pool[r.IntN(len(pool))])
					binary.LittleEndian.PutUint16(raw[b+off:], h)
				}
			}
			ti := TensorInfo{Name: fmt.Sprintf("random_%s", typ), Type: typ, Dims: []uint64{uint64(cols), uint64(rows)}}
			checkKAffine(t, ti, raw)
		})
	}
}
