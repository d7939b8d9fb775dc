package mlx_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/mlx"
)

// --kernels fast is not bit-identical to MLX (its 4- and 8-bit matmuls
// quantize x to int8 per block of 32: cpu/isa.h's FastQmmJob), so it is held
// to two other things. Every instruction set gives the same bits, because
// each does the same integer sums and the same float operations. And every
// output is within the error x's quantization can cause, computed per
// output from the inputs: sum over k of |scale * q[k]| * d_b(k) / 2, where
// d_b is the scale of k's block (max |x| / 127), plus the float32
// accumulation's and the output dtype's rounding. A wrong layout, a wrong
// block scale or a lost bias term is orders of magnitude outside it.
func TestCPUKernelsFast(t *testing.T) {
	mlxtest.Need(t)
	isaList := runnableISAs(t)
	r := rand.New(rand.NewPCG(31, 32))
	for _, sdt := range floatDtypes {
		for _, xdt := range floatDtypes {
			if sdt != mlx.Float32 && xdt != sdt && xdt != mlx.Float32 {
				continue // the pairs the models meet (TestCPUKernelsPacked)
			}
			for _, bits := range []int{4, 8} {
				for _, c := range []struct{ m, n, groups, gs int }{{1, 33, 2, 32}, {3, 47, 1, 64}, {8, 16, 2, 128}, {17, 40, 3, 32}} {
					k := c.groups * c.gs
					q := mlx.Quant{GroupSize: c.gs, Bits: bits, Mode: "affine"}
					words := randomWords(r, c.n*k*bits/32)
					scales := randomFloats(r, c.n*c.groups, 0.1, 0)
					biases := randomFloats(r, c.n*c.groups, 0.05, 0)
					x := randomFloats(r, c.m*k, 1, 0)
					// Blocks of very different magnitudes, as activations have.
					for i := range x {
						x[i] *= float32(math.Pow(10, float64((i/32)%3)-1))
					}
					name := fmt.Sprintf("scales_%s/x_%s/%dbit/m%d_n%d_k%d", sdt, xdt, bits, c.m, c.n, k)
					t.Run(name, func(t *testing.T) {
						build := func() (*mlx.Array, error) {
							return stockOrPacked(floatsAs(x, xdt, c.m, k), mlx.FromSlice(words, c.n, k*bits/32),
								floatsAs(scales, sdt, c.n, c.groups), floatsAs(biases, sdt, c.n, c.groups), nil, nil, q)
						}
						var first []byte
						var dt mlx.Dtype
						for _, isa := range isaList {
							got, d := evalKernels(t, mlx.KernelsFast, isa, build)
							if first == nil {
								first, dt = got, d
								continue
							}
							if !sameBits(got, first, dt) {
								t.Errorf("%s differs from %s: %s", isa, isaList[0], firstDiff(got, first, dt, []int{c.m, c.n}))
							}
						}
						xr, sr, br := rounded(t, x, xdt), rounded(t, scales, sdt), rounded(t, biases, sdt)
						checkFastBound(t, first, dt, xr, sr, br, words, c.m, c.n, k, c.gs, bits)
					})
				}
			}
		}
	}
	t.Run("nan", func(t *testing.T) {
		// A NaN in x makes its row's outputs NaN (the block's scale is NaN),
		// as MLX's would be; the other rows are untouched.
		const m, n, k = 2, 16, 64
		q := mlx.Quant{GroupSize: 32, Bits: 4, Mode: "affine"}
		x := randomFloats(r, m*k, 1, 0)
		x[5] = float32(math.NaN())
		words, scales, biases := randomWords(r, n*k*4/32), randomFloats(r, n*k/32, 0.1, 0), randomFloats(r, n*k/32, 0.05, 0)
		got, dt := evalKernels(t, mlx.KernelsFast, "", func() (*mlx.Array, error) {
			return stockOrPacked(floatsAs(x, mlx.Float32, m, k), mlx.FromSlice(words, n, k/8),
				floatsAs(scales, mlx.Float32, n, k/32), floatsAs(biases, mlx.Float32, n, k/32), nil, nil, q)
		})
		for i := 0; i < m*n; i++ {
			v := value(got[i*dt.Size():], dt)
			if isNaN := v != v; isNaN != (i < n) {
				t.Fatalf("output %d (row %d) = %v", i, i/n, v)
			}
		}
	})
}

// evalKernels evaluates build's graph under kernels on isa ("" the best).
func evalKernels(t *testing.T, kernels, isa string, build func() (*mlx.Array, error)) (b []byte, dt mlx.Dtype) {
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
		dt = y.Dtype()
		b, err = y.Bytes()
		return err
	})
	return b, dt
}

// rounded is v as dtype dt holds it, back in float64.
func rounded(t *testing.T, v []float32, dt mlx.Dtype) []float64 {
	t.Helper()
	var b []byte
	mlxtest.Do(t, func() error {
		var err error
		b, err = mlx.AsType(floatsAs(v, dt, len(v)), mlx.Float32).Bytes()
		return err
	})
	out := make([]float64, len(v))
	for i := range out {
		out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
	}
	return out
}

func checkFastBound(t *testing.T, got []byte, dt mlx.Dtype, x, s, b []float64, words []uint32, m, n, k, gs, bits int) {
	t.Helper()
	outUlp := map[mlx.Dtype]float64{mlx.Float32: 0x1p-24, mlx.Float16: 0x1p-11, mlx.BFloat16: 0x1p-8}[dt]
	mask := uint32(1)<<bits - 1
	worst := 0.0
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			want, bound, mag := 0.0, 0.0, 0.0
			for g := 0; g < k/32; g++ {
				d := 0.0
				for kk := g * 32; kk < g*32+32; kk++ {
					d = math.Max(d, math.Abs(x[i*k+kk]))
				}
				d /= 127
				for kk := g * 32; kk < g*32+32; kk++ {
					bit := (j*k + kk) * bits
					qv := float64(words[bit/32] >> (bit % 32) & mask)
					sc, bi := s[j*(k/gs)+kk/gs], b[j*(k/gs)+kk/gs]
					want += x[i*k+kk] * (sc*qv + bi)
					bound += math.Abs(sc*qv) * d / 2
					mag += math.Abs(x[i*k+kk]) * (math.Abs(sc*qv) + math.Abs(bi))
				}
			}
			// float32 products and sums over k (a few ulps of the magnitude
			// each), then one rounding to the output dtype.
			tol := bound + mag*float64(k)*0x1p-23 + (math.Abs(want)+bound)*outUlp
			v := float64(value(got[(i*n+j)*dt.Size():], dt))
			if e := math.Abs(v - want); !(e <= tol) {
				t.Fatalf("output [%d][%d] = %v, want %v within %.3g (error %.3g)", i, j, v, want, tol, e)
			} else if bound > 0 {
				worst = math.Max(worst, e/bound)
			}
		}
	}
	t.Logf("largest error / quantization bound: %.3f", worst)
}
