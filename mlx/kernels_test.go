package mlx_test

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/mlx"
)

// The CPU kernels' contract is bit-identity with MLX's own CPU kernels: every
// case below is computed with both and compared byte for byte on every
// instruction set this CPU can run. The one thing not compared is which NaN
// an element holds when both sides hold a NaN: when two NaN operands meet,
// x86 keeps the first operand's, and which operand comes first is the
// compiler's choice per instruction — MLX's own binary picks differently at
// different positions of one unrolled loop (README, "CPU kernels"). Which
// elements are NaN is compared exactly, as is every other bit.

var isas = []string{"avx512", "avx2", "base"}

// runnableISAs are the kernel sets this CPU can run (the best first).
func runnableISAs(t *testing.T) []string {
	var out []string
	for _, isa := range isas {
		err := mlx.Do(func() error { return mlx.SetCPUKernels(mlx.KernelsMLXGO, 2, isa) })
		if err == nil {
			out = append(out, isa)
		}
	}
	if len(out) == 0 {
		t.Fatal("no kernel set runs on this CPU")
	}
	restoreKernels()
	return out
}

// restoreKernels puts back the kernels the other tests run with.
func restoreKernels() {
	mlx.Do(func() error { return mlx.SetCPUKernels(mlxtest.Kernels(), mlxtest.Threads(), "") })
}

// compareKernels builds and evaluates the graph of build with MLX's kernels
// and then with each instruction set of mlxgo's, and fails on any byte that
// differs.
func compareKernels(t *testing.T, isaList []string, build func() (*mlx.Array, error)) {
	t.Helper()
	run := func(kernels, isa string) (b []byte, shape []int, dt mlx.Dtype) {
		t.Helper()
		mlxtest.Do(t, func() error {
			if err := mlx.SetCPUKernels(kernels, 2, isa); err != nil {
				return err
			}
			defer restoreKernels()
			y, err := build()
			if err != nil {
				return err
			}
			shape, dt = y.Shape(), y.Dtype()
			b, err = y.Bytes()
			return err
		})
		return b, shape, dt
	}
	want, shape, dt := run(mlx.KernelsMLX, "")
	for _, isa := range isaList {
		got, _, _ := run(mlx.KernelsMLXGO, isa)
		if !sameBits(got, want, dt) {
			t.Errorf("%s: %s", isa, firstDiff(got, want, dt, shape))
		}
	}
}

// sameBits is byte equality, except that two NaNs match (see the top).
func sameBits(got, want []byte, dt mlx.Dtype) bool {
	if len(got) != len(want) {
		return false
	}
	if bytes.Equal(got, want) {
		return true
	}
	es := dt.Size()
	for i := 0; i < len(got); i += es {
		if !bytes.Equal(got[i:i+es], want[i:i+es]) && !(nanBits(got[i:i+es], dt) && nanBits(want[i:i+es], dt)) {
			return false
		}
	}
	return true
}

func nanBits(b []byte, dt mlx.Dtype) bool { return math.IsNaN(float64(value(b, dt))) }

func firstDiff(got, want []byte, dt mlx.Dtype, shape []int) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d bytes, want %d", len(got), len(want))
	}
	es := dt.Size()
	n := 0
	first := -1
	for i := 0; i < len(got); i += es {
		if !bytes.Equal(got[i:i+es], want[i:i+es]) && !(nanBits(got[i:i+es], dt) && nanBits(want[i:i+es], dt)) {
			if first < 0 {
				first = i / es
			}
			n++
		}
	}
	i := first * es
	return fmt.Sprintf("%d of %d elements differ (shape %v %s); first at %d: got %x (%v), want %x (%v)",
		n, len(got)/es, shape, dt, first, got[i:i+es], value(got[i:i+es], dt), want[i:i+es], value(want[i:i+es], dt))
}

func value(b []byte, dt mlx.Dtype) float32 {
	switch dt {
	case mlx.Float32:
		return math.Float32frombits(uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24)
	case mlx.Float16:
		return mlx.Float16ToFloat32(uint16(b[0]) | uint16(b[1])<<8)
	case mlx.BFloat16:
		return mlx.BFloat16ToFloat32(uint16(b[0]) | uint16(b[1])<<8)
	}
	return float32(math.NaN())
}

// specials are the values every kernel must treat exactly as MLX does.
var specials = []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)),
	1e-40, -3e-39, 6e-8, -5.9e-5, 65504, 70000, 3e38}

// randomFloats makes n values ~ U(-scale, scale), with a fraction of
// specials mixed in when special > 0.
func randomFloats(r *rand.Rand, n int, scale float32, special float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		if special > 0 && r.Float64() < special {
			v[i] = specials[r.IntN(len(specials))]
		} else {
			v[i] = (2*r.Float32() - 1) * scale
		}
	}
	return v
}

func floatsAs(v []float32, dt mlx.Dtype, shape ...int) *mlx.Array {
	return mlx.AsType(mlx.FromSlice(v, shape...), dt)
}

func randomWords(r *rand.Rand, n int) []uint32 {
	w := make([]uint32, n)
	for i := range w {
		w[i] = r.Uint32()
	}
	return w
}

var floatDtypes = []mlx.Dtype{mlx.Float32, mlx.Float16, mlx.BFloat16}

func TestCPUKernelsQuantizedMatmul(t *testing.T) {
	mlxtest.Need(t)
	isaList := runnableISAs(t)
	r := rand.New(rand.NewPCG(1, 2))
	type shape struct{ m, n, groups int }
	shapes := []shape{{1, 17, 1}, {2, 33, 3}, {3, 64, 2}, {7, 100, 1}, {16, 5, 2}, {64, 40, 1}, {513, 3, 1}}
	for _, dt := range floatDtypes {
		for _, bits := range []int{2, 3, 4, 5, 6, 8} {
			for _, gs := range []int{32, 64, 128} {
				for _, transpose := range []bool{true, false} {
					for si, sh := range shapes {
						special := 0.0
						if si%2 == 1 {
							special = 0.02
						}
						// Keep the slow stock float16 path and M=513 to small shapes.
						if sh.m == 513 && (gs != 32 || bits%2 == 1) {
							continue
						}
						name := fmt.Sprintf("%s/%dbit/g%d/t%v/m%d_n%d_g%d", dt, bits, gs, transpose, sh.m, sh.n, sh.groups)
						var n, k int
						if transpose {
							n, k = sh.n, sh.groups*gs
						} else {
							// x @ W with W [K][N]: groups run along N.
							n, k = sh.groups*gs, sh.n
						}
						x := randomFloats(r, sh.m*k, 1, special)
						var wshape, sshape []int
						if transpose {
							wshape, sshape = []int{n, k * bits / 32}, []int{n, k / gs}
						} else {
							wshape, sshape = []int{k, n * bits / 32}, []int{k, n / gs}
						}
						words := randomWords(r, wshape[0]*wshape[1])
						scales := randomFloats(r, sshape[0]*sshape[1], 0.1, special/4)
						biases := randomFloats(r, sshape[0]*sshape[1], 0.05, 0)
						t.Run(name, func(t *testing.T) {
							compareKernels(t, isaList, func() (*mlx.Array, error) {
								q := mlx.Quant{GroupSize: gs, Bits: bits, Mode: "affine"}
								y := mlx.QuantizedMatmul(floatsAs(x, dt, sh.m, k), mlx.FromSlice(words, wshape...),
									floatsAs(scales, dt, sshape...), floatsAs(biases, dt, sshape...), transpose, q)
								return y, y.Err()
							})
						})
					}
				}
			}
		}
	}
}
