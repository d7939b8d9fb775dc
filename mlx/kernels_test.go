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
	var shape []int
	want, dt := evalKernels(t, mlx.KernelsMLX, "", func() (*mlx.Array, error) {
		y, err := build()
		if err == nil {
			shape = y.Shape()
		}
		return y, err
	})
	for _, isa := range isaList {
		poisonFreed(t, len(want))
		got, _ := evalKernels(t, mlx.KernelsMLXGO, isa, build)
		if !sameBits(got, want, dt) {
			t.Errorf("%s: %s", isa, firstDiff(got, want, dt, shape))
		}
	}
}

// poisonFreed fills a buffer of n bytes with 0xff (a NaN in every float
// dtype) and frees it, just before a kernel's evaluation: malloc hands a
// freed chunk of the same size to the next output, which was the previous
// evaluation's, MLX's correct result, so that a kernel which left outputs
// unwritten passed (a mutation skipping a tile did, 2026-12-04).
func poisonFreed(t *testing.T, n int) {
	t.Helper()
	mlxtest.Do(t, func() error {
		b := make([]uint8, n)
		for i := range b {
			b[i] = 0xff
		}
		return mlx.FromSlice(b, n).Err()
	})
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

func TestCPUKernelsPacked(t *testing.T) {
	mlxtest.Need(t)
	isaList := runnableISAs(t)
	r := rand.New(rand.NewPCG(3, 4))
	for _, sdt := range floatDtypes {
		for _, xdt := range floatDtypes {
			for _, bits := range []int{2, 3, 4, 5, 6, 8} {
				for _, c := range []struct{ m, n, groups, gs int }{{1, 33, 2, 32}, {5, 47, 1, 64}, {17, 16, 1, 128}} {
					// float16 and bfloat16 scales only meet their own dtype or
					// float32 activations in the models; test those pairs.
					if sdt != mlx.Float32 && xdt != sdt && xdt != mlx.Float32 {
						continue
					}
					k := c.groups * c.gs
					q := mlx.Quant{GroupSize: c.gs, Bits: bits, Mode: "affine"}
					words := randomWords(r, c.n*k*bits/32)
					scales := randomFloats(r, c.n*c.groups, 0.1, 0.01)
					biases := randomFloats(r, c.n*c.groups, 0.05, 0)
					x := randomFloats(r, c.m*k, 1, 0.02)
					ids := make([]int32, c.m)
					for i := range ids {
						ids[i] = int32(r.IntN(c.n))
					}
					name := fmt.Sprintf("scales_%s/x_%s/%dbit/m%d_n%d_k%d", sdt, xdt, bits, c.m, c.n, k)
					inputs := func() (*mlx.Array, *mlx.Array, *mlx.Array, *mlx.Array) {
						return floatsAs(x, xdt, c.m, k), mlx.FromSlice(words, c.n, k*bits/32),
							floatsAs(scales, sdt, c.n, c.groups), floatsAs(biases, sdt, c.n, c.groups)
					}
					t.Run(name+"/matmul", func(t *testing.T) {
						compareKernels(t, isaList, func() (*mlx.Array, error) {
							xa, w, s, b := inputs()
							return stockOrPacked(xa, w, s, b, s, b, q)
						})
					})
					// the residual connection after a projection, res + x @ W.T, as
					// MLX adds it; a res of another shape broadcasts through MLX's add
					resv := randomFloats(r, c.m*c.n, 2, 0.02)
					t.Run(name+"/matmul_add", func(t *testing.T) {
						for _, shape := range [][]int{{c.m, c.n}, {c.n}} {
							compareKernels(t, isaList, func() (*mlx.Array, error) {
								xa, w, s, b := inputs()
								rt := xdt
								if sdt == mlx.Float32 {
									rt = mlx.Float32
								}
								res := floatsAs(resv[:product(shape)], rt, shape...)
								if cur, _ := mlx.CPUKernelsInUse(); cur.Kernels == mlx.KernelsMLX {
									y := mlx.Add(res, mlx.QuantizedMatmul(xa, w, s, b, true, q))
									return y, y.Err()
								}
								p, err := mlx.PackQuantized(w, s, b, q)
								if err != nil {
									return nil, err
								}
								y := mlx.PackedMatmulAdd(xa, p, res)
								return y, y.Err()
							})
						}
					})
					if xdt != sdt {
						continue
					}
					t.Run(name+"/embedding", func(t *testing.T) {
						compareKernels(t, isaList, func() (*mlx.Array, error) {
							_, w, s, b := inputs()
							idx := mlx.FromSlice(ids, 1, c.m)
							k, _ := mlx.CPUKernelsInUse()
							if k.Kernels == mlx.KernelsMLX {
								y := mlx.Dequantize(mlx.Take(w, idx, 0), mlx.Take(s, idx, 0), mlx.Take(b, idx, 0), q)
								return y, y.Err()
							}
							p, err := mlx.PackQuantized(w, s, b, q)
							if err != nil {
								return nil, err
							}
							y := mlx.PackedEmbedding(idx, p)
							return y, y.Err()
						})
					})
				}
			}
		}
	}
}

func TestCPUKernelsMatmul(t *testing.T) {
	mlxtest.Need(t)
	isaList := runnableISAs(t)
	r := rand.New(rand.NewPCG(5, 6))
	type shape struct {
		batch   []int
		m, n, k int
	}
	shapes := []shape{{nil, 1, 1, 1}, {nil, 1, 33, 17}, {nil, 3, 7, 5}, {nil, 7, 100, 64}, {nil, 16, 31, 129},
		{nil, 64, 40, 33}, {nil, 513, 9, 20}, {[]int{3}, 2, 18, 11}, {[]int{2, 3}, 5, 6, 7},
		// a few rows over B read in place, two tiles at a time (N >= 64) and
		// with a last single or partial tile; K long enough to prefetch rows
		{nil, 1, 200, 64}, {nil, 3, 130, 40}, {nil, 4, 64, 7}, {nil, 2, 97, 300}, {nil, 8, 70, 50}, {nil, 5, 96, 33}}
	for _, dt := range floatDtypes {
		for si, sh := range shapes {
			for _, ta := range []bool{false, true} {
				for _, tb := range []bool{false, true} {
					special := 0.0
					if si%3 == 1 {
						special = 0.03
					}
					nb := 1
					for _, d := range sh.batch {
						nb *= d
					}
					av := randomFloats(r, nb*sh.m*sh.k, 1, special)
					bv := randomFloats(r, sh.k*sh.n, 1, special) // b broadcast over the batch
					cv := randomFloats(r, sh.n, 1, 0)
					mk := func(v []float32, trans bool, rows, cols int, batch []int) *mlx.Array {
						shape := append(append([]int{}, batch...), rows, cols)
						if !trans {
							return floatsAs(v, dt, shape...)
						}
						tshape := append(append([]int{}, batch...), cols, rows)
						a := floatsAs(v, dt, tshape...)
						return mlx.SwapAxes(a, -1, -2)
					}
					name := fmt.Sprintf("%s/b%v_m%d_n%d_k%d/ta%v_tb%v", dt, sh.batch, sh.m, sh.n, sh.k, ta, tb)
					t.Run(name, func(t *testing.T) {
						compareKernels(t, isaList, func() (*mlx.Array, error) {
							y := mlx.Matmul(mk(av, ta, sh.m, sh.k, sh.batch), mk(bv, tb, sh.k, sh.n, nil))
							return y, y.Err()
						})
					})
					if len(sh.batch) > 0 {
						continue
					}
					for _, ab := range [][2]float32{{1, 1}, {0.5, 2}, {1, 0}, {-1.5, 1}} {
						t.Run(fmt.Sprintf("%s/addmm_alpha%g_beta%g", name, ab[0], ab[1]), func(t *testing.T) {
							compareKernels(t, isaList, func() (*mlx.Array, error) {
								y := mlx.Addmm(floatsAs(cv, dt, sh.n), mk(av, ta, sh.m, sh.k, nil), mk(bv, tb, sh.k, sh.n, nil), ab[0], ab[1])
								return y, y.Err()
							})
						})
					}
				}
			}
		}
	}
}

func TestCPUKernelsAttention(t *testing.T) {
	mlxtest.Need(t)
	isaList := runnableISAs(t)
	r := rand.New(rand.NewPCG(7, 8))
	for _, dt := range floatDtypes {
		for _, c := range []struct {
			b, h, hkv, lq, lk, d int
			mask                 string // "", "causal", "bool", "additive"
			sinks                bool
			// keysT: the keys a transposed view of a [D, 1024] buffer, as a
			// cache that stores them by columns would pass them
			keysT bool
		}{
			{1, 9, 3, 1, 37, 64, "", false, false}, {1, 4, 4, 5, 5, 16, "causal", false, false}, {2, 6, 2, 7, 19, 32, "causal", false, false},
			{1, 8, 2, 3, 11, 8, "bool", false, false}, {1, 2, 1, 4, 9, 24, "additive", false, false}, {1, 4, 2, 2, 6, 16, "", true, false},
			{1, 4, 4, 33, 33, 64, "causal", true, false},
			// query heads grouped per key head: blocks of 32 rows that span heads
			{1, 6, 2, 40, 40, 16, "causal", false, false}, {2, 8, 2, 11, 29, 16, "additive", true, false},
			// decode over a long cache: fewer tasks than twice the threads, so the
			// scores and ·V are split by tiles of keys and of value columns
			{1, 9, 3, 1, 600, 64, "", false, false}, {1, 8, 2, 1, 300, 64, "additive", true, false},
			{1, 4, 1, 1, 513, 32, "causal", false, false}, {1, 6, 1, 1, 257, 48, "bool", true, false},
			{1, 9, 3, 1, 600, 64, "", false, true}, {1, 8, 2, 3, 300, 64, "causal", false, true},
			{2, 4, 4, 1, 97, 32, "additive", true, true},
		} {
			name := fmt.Sprintf("%s/b%d_h%d_kv%d_q%d_k%d_d%d_%s_sinks%v_keysT%v", dt, c.b, c.h, c.hkv, c.lq, c.lk, c.d, c.mask, c.sinks, c.keysT)
			q := randomFloats(r, c.b*c.h*c.lq*c.d, 1, 0)
			const kcols = 1024
			k := randomFloats(r, c.b*c.hkv*c.lk*c.d, 1, 0)
			if c.keysT {
				k = randomFloats(r, c.b*c.hkv*c.d*kcols, 1, 0)
			}
			v := randomFloats(r, c.b*c.hkv*c.lk*c.d, 1, 0)
			m := randomFloats(r, c.lq*c.lk, 2, 0)
			sk := randomFloats(r, c.h, 1, 0)
			t.Run(name, func(t *testing.T) {
				compareKernels(t, isaList, func() (*mlx.Array, error) {
					var mask, sinks *mlx.Array
					mode := ""
					switch c.mask {
					case "causal":
						mode = "causal"
					case "bool":
						mask = mlx.Greater(mlx.FromSlice(m, c.lq, c.lk), mlx.Scalar(0, mlx.Float32))
					case "additive":
						mask = floatsAs(m, dt, c.lq, c.lk)
					}
					if c.sinks {
						sinks = floatsAs(sk, dt, c.h)
					}
					keys := floatsAs(k, dt, c.b, c.hkv, c.lk, c.d)
					if c.keysT {
						buf := floatsAs(k, dt, c.b, c.hkv, c.d, kcols)
						keys = mlx.Transpose(mlx.Slice(buf, []int{0, 0, 0, 0}, []int{c.b, c.hkv, c.d, c.lk}), 0, 1, 3, 2)
					}
					y := mlx.ScaledDotProductAttention(floatsAs(q, dt, c.b, c.h, c.lq, c.d), keys,
						floatsAs(v, dt, c.b, c.hkv, c.lk, c.d), 1/float32(math.Sqrt(float64(c.d))), mode, mask, sinks)
					return y, y.Err()
				})
			})
		}
	}
}

func TestCPUKernelsNormRope(t *testing.T) {
	mlxtest.Need(t)
	isaList := runnableISAs(t)
	r := rand.New(rand.NewPCG(9, 10))
	for _, xdt := range floatDtypes {
		for _, wdt := range floatDtypes {
			for _, shape := range [][]int{{1, 1, 576}, {2, 7, 64}, {3, 33}, {1, 5, 2, 100}} {
				n := 1
				for _, d := range shape {
					n *= d
				}
				x := randomFloats(r, n, 3, 0.01)
				w := randomFloats(r, shape[len(shape)-1], 1, 0)
				t.Run(fmt.Sprintf("rms_norm/x_%s/w_%s/%v", xdt, wdt, shape), func(t *testing.T) {
					compareKernels(t, isaList, func() (*mlx.Array, error) {
						y := mlx.RMSNorm(floatsAs(x, xdt, shape...), floatsAs(w, wdt, shape[len(shape)-1]), 1e-5)
						return y, y.Err()
					})
				})
			}
		}
		for _, c := range []struct {
			shape       []int
			dims        int
			traditional bool
			offset      int
			freqs       bool
		}{
			{[]int{1, 9, 1, 64}, 64, false, 37, false}, {[]int{1, 9, 7, 64}, 64, false, 0, false},
			{[]int{2, 4, 5, 32}, 32, true, 3, false}, {[]int{1, 2, 3, 48}, 32, false, 9000, false},
			{[]int{1, 3, 4, 16}, 16, true, 2, true}, {[]int{1, 6, 16}, 16, false, 5, false},
			{[]int{1, 2, 2, 9, 32}, 24, false, 11, true},
		} {
			n := 1
			for _, d := range c.shape {
				n *= d
			}
			x := randomFloats(r, n, 2, 0.01)
			f := randomFloats(r, c.dims/2, 1000, 0)
			for i := range f {
				f[i] = 1 + float32(math.Abs(float64(f[i])))
			}
			t.Run(fmt.Sprintf("rope/%s/%v_dims%d_trad%v_off%d_freqs%v", xdt, c.shape, c.dims, c.traditional, c.offset, c.freqs), func(t *testing.T) {
				compareKernels(t, isaList, func() (*mlx.Array, error) {
					var freqs *mlx.Array
					if c.freqs {
						freqs = mlx.FromSlice(f)
					}
					y := mlx.RoPE(floatsAs(x, xdt, c.shape...), c.dims, c.traditional, 10000, 1, c.offset, freqs)
					if c.shape[0] == 2 && !c.freqs {
						// a per-batch offset vector, as batched generation passes
						y = mlx.RoPEDynamic(floatsAs(x, xdt, c.shape...), c.dims, c.traditional, 10000, 0.5,
							mlx.FromSlice([]int32{int32(c.offset), int32(c.offset + 17)}), nil)
					}
					return y, y.Err()
				})
			})
		}
	}
}

// TestCPUKernelsLogSumExp compares the shim's logsumexp with MLX's LogSumExp
// bit for bit: the last axis (keepdims or not), all axes of a [1, N] array as
// generation's log-softmax takes it, a strided view MLX copies first, rows
// of NaN, ±Inf and ±0 (an all -Inf row, an all-zero row), and N = 1, 15, 17
// and a vocabulary's 49152, large enough for the pool.
func TestCPUKernelsLogSumExp(t *testing.T) {
	mlxtest.Need(t)
	isaList := runnableISAs(t)
	r := rand.New(rand.NewPCG(13, 14))
	for _, dt := range floatDtypes {
		for _, shape := range [][]int{{1, 49152}, {3, 17}, {2, 5, 15}, {7, 1}, {64, 1536}} {
			n := 1
			for _, d := range shape {
				n *= d
			}
			x := randomFloats(r, n, 30, 0.01)
			t.Run(fmt.Sprintf("%s/%v", dt, shape), func(t *testing.T) {
				compareKernels(t, isaList, func() (*mlx.Array, error) {
					y := mlx.LogSumExp(floatsAs(x, dt, shape...), []int{-1}, false)
					return y, y.Err()
				})
				compareKernels(t, isaList, func() (*mlx.Array, error) {
					a := floatsAs(x, dt, shape...)
					y := mlx.Subtract(a, mlx.LogSumExp(a, []int{-1}, true))
					return y, y.Err()
				})
			})
		}
		t.Run(fmt.Sprintf("%s/all-axes", dt), func(t *testing.T) {
			x := randomFloats(r, 49152, 20, 0)
			compareKernels(t, isaList, func() (*mlx.Array, error) {
				y := mlx.LogSumExp(floatsAs(x, dt, 1, 49152), nil, true)
				return y, y.Err()
			})
		})
		t.Run(fmt.Sprintf("%s/specials", dt), func(t *testing.T) {
			inf, nan := float32(math.Inf(1)), float32(math.NaN())
			negz := float32(math.Copysign(0, -1))
			rowsOf := [][]float32{
				{-inf, -inf, -inf, -inf}, {inf, 1, 2, 3}, {1, nan, 2, 3}, {-inf, inf, 0, 1}, {0, negz, 0, negz},
				{negz, negz, negz, negz}, {-inf, -inf, 0, -inf}, {88, 89, 90, -200}, {1e-40, -1e-40, 3, -3},
			}
			var x []float32
			for _, row := range rowsOf {
				x = append(x, row...)
			}
			compareKernels(t, isaList, func() (*mlx.Array, error) {
				y := mlx.LogSumExp(floatsAs(x, dt, len(rowsOf), 4), []int{-1}, false)
				return y, y.Err()
			})
		})
		t.Run(fmt.Sprintf("%s/view", dt), func(t *testing.T) {
			x := randomFloats(r, 40*37, 10, 0.02)
			compareKernels(t, isaList, func() (*mlx.Array, error) {
				y := mlx.LogSumExp(mlx.Transpose(floatsAs(x, dt, 40, 37), 1, 0), []int{-1}, false)
				return y, y.Err()
			})
		})
	}
}

// TestCPUKernelHelpers checks the vector exp and the dtype conversions the
// kernels use against MLX's scalar ones on 2^32/257 float bit patterns
// spread over the whole range (make bench-selftest sweeps all 2^32).
func TestCPUKernelHelpers(t *testing.T) {
	mlxtest.Need(t)
	for _, what := range []string{"exp", "round_f16", "round_bf16", "store_f16", "store_bf16"} {
		t.Run(what, func(t *testing.T) {
			checked, bad, err := mlx.CPUKernelSelfTest(what, 257)
			if err != nil {
				t.Fatal(err)
			}
			if checked < 1<<24 || bad != 0 {
				t.Errorf("%d of %d values differ from MLX's", bad, checked)
			}
		})
	}
}

// TestCPUKernelsSwiGLU compares the one-node silu(g)·u with MLX's
// multiply(multiply(g, sigmoid(g)), u), bit for bit, on contiguous inputs
// and on views (a transposed and a broadcast operand), large enough to
// spread over the pool, with NaN, Inf, ±0 and denormals among them; other
// dtypes keep MLX's ops and are compared too.
func TestCPUKernelsSwiGLU(t *testing.T) {
	mlxtest.Need(t)
	isaList := runnableISAs(t)
	r := rand.New(rand.NewPCG(11, 12))
	for _, dt := range floatDtypes {
		for _, shape := range [][]int{{1, 1, 1536}, {1, 7, 33}, {3, 5000}, {64, 1536}, {1}} {
			n := 1
			for _, d := range shape {
				n *= d
			}
			g := randomFloats(r, n, 12, 0.02)
			u := randomFloats(r, n, 3, 0.02)
			t.Run(fmt.Sprintf("%s/%v", dt, shape), func(t *testing.T) {
				compareKernels(t, isaList, func() (*mlx.Array, error) {
					y := mlx.SwiGLU(floatsAs(g, dt, shape...), floatsAs(u, dt, shape...))
					return y, y.Err()
				})
			})
		}
	}
	t.Run("halves", func(t *testing.T) { // a fused gate/up matmul's output, split
		y := randomFloats(r, 5*3*2*1000, 12, 0.02)
		compareKernels(t, isaList, func() (*mlx.Array, error) {
			a := mlx.FromSlice(y, 5, 3, 2000)
			g := mlx.Slice(a, []int{0, 0, 0}, []int{5, 3, 1000})
			u := mlx.Slice(a, []int{0, 0, 1000}, []int{5, 3, 2000})
			z := mlx.SwiGLU(g, u)
			return z, z.Err()
		})
		// SwiGLUHalves reads them in place; MLX's reference (kernels off) is
		// the split and the op, and so is a transposed input's.
		compareKernels(t, isaList, func() (*mlx.Array, error) {
			z := mlx.SwiGLUHalves(mlx.FromSlice(y, 5, 3, 2000))
			return z, z.Err()
		})
		compareKernels(t, isaList, func() (*mlx.Array, error) {
			z := mlx.SwiGLUHalves(mlx.Transpose(mlx.FromSlice(y, 2000, 15), 1, 0))
			return z, z.Err()
		})
		for _, dt := range floatDtypes[1:] {
			compareKernels(t, isaList, func() (*mlx.Array, error) {
				z := mlx.SwiGLUHalves(floatsAs(y[:64], dt, 2, 32))
				return z, z.Err()
			})
		}
		mlxtest.Do(t, func() error {
			if mlx.SwiGLUHalves(mlx.FromSlice(y[:15], 3, 5)).Err() == nil {
				return fmt.Errorf("odd last axis: no error")
			}
			return nil
		})
	})
	t.Run("views", func(t *testing.T) {
		g := randomFloats(r, 40*37, 12, 0.02)
		u := randomFloats(r, 37, 3, 0.02)
		compareKernels(t, isaList, func() (*mlx.Array, error) {
			gt := mlx.Transpose(mlx.FromSlice(g, 40, 37), 1, 0)                     // [37, 40], strided
			ub := mlx.BroadcastTo(mlx.Reshape(mlx.FromSlice(u, 37), 37, 1), 37, 40) // stride 0
			y := mlx.SwiGLU(gt, ub)
			return y, y.Err()
		})
	})
}

// TestCPUKernelsPoolBackToBack runs many small pool jobs one right after the
// other — a decode step's shape: M = 1 matmuls a few microseconds each — so a
// worker that wakes late for one job meets the next one already running. The
// pool must never run a call of one job with another's function or bound, nor
// return before every call has: each output is compared with MLX's bit for bit.
func TestCPUKernelsPoolBackToBack(t *testing.T) {
	mlxtest.Need(t)
	isaList := runnableISAs(t)
	r := rand.New(rand.NewPCG(9, 10))
	const jobs, n, k, gs, bits = 160, 576, 576, 64, 4
	x := randomFloats(r, jobs*k, 1, 0)
	words := randomWords(r, n*k*bits/32)
	scales := randomFloats(r, n*k/gs, 0.1, 0)
	biases := randomFloats(r, n*k/gs, 0.05, 0)
	for _, dt := range []mlx.Dtype{mlx.Float32, mlx.BFloat16} {
		t.Run(dt.String(), func(t *testing.T) {
			compareKernels(t, isaList, func() (*mlx.Array, error) {
				q := mlx.Quant{GroupSize: gs, Bits: bits, Mode: "affine"}
				xa := floatsAs(x, dt, jobs, k)
				w, s, b := mlx.FromSlice(words, n, k*bits/32), floatsAs(scales, dt, n, k/gs), floatsAs(biases, dt, n, k/gs)
				ys := make([]*mlx.Array, jobs)
				for i := range ys {
					ys[i] = mlx.QuantizedMatmul(mlx.Slice(xa, []int{i, 0}, []int{i + 1, k}), w, s, b, true, q)
				}
				y := mlx.Concatenate(ys, 0)
				return y, y.Err()
			})
		})
	}
}

// TestCPUKernelsQuantizedRows: the quantized matmul's several-row blocks
// (batched decode rows, small prefill chunks: each tile dequantized once and
// applied to every row of a block of up to 8) against MLX's stock kernel, at
// row counts that make full blocks, a remainder block, and both, packed and
// not, on every ISA.
func TestCPUKernelsQuantizedRows(t *testing.T) {
	mlxtest.Need(t)
	isaList := runnableISAs(t)
	r := rand.New(rand.NewPCG(11, 12))
	type pair struct{ x, s mlx.Dtype }
	pairs := []pair{{mlx.Float32, mlx.Float32}, {mlx.Float32, mlx.Float16}, {mlx.Float32, mlx.BFloat16},
		{mlx.BFloat16, mlx.BFloat16}, {mlx.Float16, mlx.Float16}}
	for _, bits := range []int{2, 3, 4, 5, 6, 8} {
		for _, m := range []int{2, 3, 8, 9, 17} {
			for pi, pr := range pairs {
				// float16 activations take MLX's slow stock path: 4 and 8 bits only.
				if pr.x == mlx.Float16 && bits != 4 && bits != 8 {
					continue
				}
				gs := []int{32, 64}[(m+pi)%2]
				n, k := 33+16*(pi%2), 2*gs
				q := mlx.Quant{GroupSize: gs, Bits: bits, Mode: "affine"}
				words := randomWords(r, n*k*bits/32)
				scales := randomFloats(r, n*k/gs, 0.1, 0.01)
				biases := randomFloats(r, n*k/gs, 0.05, 0)
				x := randomFloats(r, m*k, 1, 0.02)
				for _, packed := range []bool{false, true} {
					if packed && pr.x != pr.s && pr.x != mlx.Float32 {
						continue
					}
					name := fmt.Sprintf("%dbit/m%d/x_%s/scales_%s/packed%v", bits, m, pr.x, pr.s, packed)
					t.Run(name, func(t *testing.T) {
						compareKernels(t, isaList, func() (*mlx.Array, error) {
							xa := floatsAs(x, pr.x, m, k)
							w, s, b := mlx.FromSlice(words, n, k*bits/32), floatsAs(scales, pr.s, n, k/gs), floatsAs(biases, pr.s, n, k/gs)
							cur, _ := mlx.CPUKernelsInUse()
							if !packed || cur.Kernels == mlx.KernelsMLX {
								if !packed {
									s, b = mlx.AsType(s, pr.x), mlx.AsType(b, pr.x)
								}
								y := mlx.QuantizedMatmul(xa, w, s, b, true, q)
								return y, y.Err()
							}
							p, err := mlx.PackQuantized(w, s, b, q)
							if err != nil {
								return nil, err
							}
							y := mlx.PackedMatmul(xa, p)
							return y, y.Err()
						})
					})
				}
			}
		}
	}
}

// BenchmarkPackedMatmulRows times the packed 4-bit quantized matmul of
// SmolLM2's MLP (1536 x 576, groups of 32, float16 scales, float32
// activations) at the row counts of single-stream decode, batched decode and
// small prefill chunks, on the physical cores: `go test ./mlx -run -
// -bench PackedMatmulRows` (ns/op is one matmul).
func BenchmarkPackedMatmulRows(b *testing.B) {
	mlxtest.Need(b)
	const n, k, gs, bits, reps = 1536, 576, 32, 4, 32
	r := rand.New(rand.NewPCG(13, 14))
	words := randomWords(r, n*k*bits/32)
	scales := randomFloats(r, n*k/gs, 0.1, 0)
	biases := randomFloats(r, n*k/gs, 0.05, 0)
	for _, m := range []int{1, 2, 3, 8, 17} {
		x := randomFloats(r, reps*m*k, 1, 0)
		b.Run(fmt.Sprintf("M%d", m), func(b *testing.B) {
			err := mlx.Do(func() error {
				if err := mlx.SetCPUKernels(mlx.KernelsMLXGO, mlxtest.Threads(), ""); err != nil {
					return err
				}
				defer restoreKernels()
				q := mlx.Quant{GroupSize: gs, Bits: bits, Mode: "affine"}
				w, s, bb := mlx.FromSlice(words, n, k*bits/32), floatsAs(scales, mlx.Float16, n, k/gs), floatsAs(biases, mlx.Float16, n, k/gs)
				p, err := mlx.PackQuantized(w, s, bb, q)
				if err != nil {
					return err
				}
				xa := floatsAs(x, mlx.Float32, reps*m, k)
				if err := mlx.Eval(xa); err != nil {
					return err
				}
				b.ResetTimer()
				for i := 0; i < b.N; i += reps {
					ys := make([]*mlx.Array, reps)
					for j := range ys {
						ys[j] = mlx.PackedMatmul(mlx.Slice(xa, []int{j * m, 0}, []int{(j + 1) * m, k}), p)
					}
					if err := mlx.Eval(ys...); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		})
	}
}

// TestCPUKernelsQuantizedFusedDequant: under float32 compute with float16
// scales the kernels dequantize with one fused multiply-add (kern.inc's
// dequant: scale * q is exact in float32 there). This checks that claim where
// it could break: scales and biases at float16's extremes (largest finite,
// subnormals, signed zeros, infinities, NaN) half the time, against MLX's
// stock kernel, bitwise, one row and several, every bit width, every ISA.
func TestCPUKernelsQuantizedFusedDequant(t *testing.T) {
	mlxtest.Need(t)
	isaList := runnableISAs(t)
	r := rand.New(rand.NewPCG(21, 22))
	f16 := []float32{65504, -65504, 32768, 0x1p-24, -0x1p-24, 0x1p-14, 0, float32(math.Copysign(0, -1)),
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 1, -1, 0.5}
	pick := func(n int, scale float32) []float32 {
		v := randomFloats(r, n, scale, 0)
		for i := range v {
			if r.IntN(2) == 0 {
				v[i] = f16[r.IntN(len(f16))]
			}
		}
		return v
	}
	for _, bits := range []int{2, 3, 4, 5, 6, 8} {
		for _, m := range []int{1, 3, 8} {
			gs := 32
			n, k := 48, 4*gs
			q := mlx.Quant{GroupSize: gs, Bits: bits, Mode: "affine"}
			words := randomWords(r, n*k*bits/32)
			scales, biases := pick(n*k/gs, 0.1), pick(n*k/gs, 0.05)
			x := randomFloats(r, m*k, 1, 0)
			t.Run(fmt.Sprintf("%dbit/m%d", bits, m), func(t *testing.T) {
				compareKernels(t, isaList, func() (*mlx.Array, error) {
					xa := floatsAs(x, mlx.Float32, m, k)
					w, s, b := mlx.FromSlice(words, n, k*bits/32), floatsAs(scales, mlx.Float16, n, k/gs), floatsAs(biases, mlx.Float16, n, k/gs)
					return stockOrPacked(xa, w, s, b, mlx.AsType(s, mlx.Float32), mlx.AsType(b, mlx.Float32), q)
				})
			})
		}
	}
}

// stockOrPacked is MLX's stock quantized matmul of x by w (scales ss, biases
// sb) when MLX's kernels are in use, else mlxgo's packed kernel on w packed
// with scales s and biases b: the two sides of a quantized kernel comparison.
func product(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

func stockOrPacked(x, w, s, b, ss, sb *mlx.Array, q mlx.Quant) (*mlx.Array, error) {
	if cur, _ := mlx.CPUKernelsInUse(); cur.Kernels == mlx.KernelsMLX {
		y := mlx.QuantizedMatmul(x, w, ss, sb, true, q)
		return y, y.Err()
	}
	p, err := mlx.PackQuantized(w, s, b, q)
	if err != nil {
		return nil, err
	}
	y := mlx.PackedMatmul(x, p)
	return y, y.Err()
}

// TestCPUKernelsErf: gelu's erf (a BERT embedder's, whisper's) as one node of
// the shim's kernel, bit for bit MLX's simd::erf: random values over the
// range where its exp underflows (|x| > 9.4) and where it does not, the
// specials, and one float32 bit pattern in every 4099 (every sign, exponent
// and NaN payload class), contiguous and as a transposed view.
func TestCPUKernelsErf(t *testing.T) {
	mlxtest.Need(t)
	isaList := runnableISAs(t)
	r := rand.New(rand.NewPCG(13, 14))
	for _, n := range []int{1, 7, 33, 5000, 3 * 4097} {
		for _, scale := range []float32{3, 12} {
			v := randomFloats(r, n, scale, 0.05)
			t.Run(fmt.Sprintf("%d/%g", n, scale), func(t *testing.T) {
				compareKernels(t, isaList, func() (*mlx.Array, error) {
					y := mlx.Erf(mlx.FromSlice(v, n))
					return y, y.Err()
				})
			})
		}
	}
	var bits []float32
	for u := uint64(0); u < 1<<32; u += 4099 {
		bits = append(bits, math.Float32frombits(uint32(u)))
	}
	t.Run("bit-patterns", func(t *testing.T) {
		compareKernels(t, isaList, func() (*mlx.Array, error) {
			y := mlx.Erf(mlx.FromSlice(bits, len(bits)))
			return y, y.Err()
		})
	})
	t.Run("view", func(t *testing.T) {
		v := randomFloats(r, 40*37, 4, 0.05)
		compareKernels(t, isaList, func() (*mlx.Array, error) {
			y := mlx.Erf(mlx.Transpose(mlx.FromSlice(v, 40, 37), 1, 0))
			return y, y.Err()
		})
	})
	// The kernels' node is what ran (else the comparison above would be
	// MLX's against itself); other dtypes stay MLX's op.
	defer restoreKernels()
	for _, c := range []struct {
		dt   mlx.Dtype
		want string
	}{{mlx.Float32, "MlxgoErf"}, {mlx.Float16, "Erf"}} {
		err := mlx.Do(func() error {
			if err := mlx.SetCPUKernels(mlx.KernelsMLXGO, 2, isaList[0]); err != nil {
				return err
			}
			op, err := mlx.Erf(floatsAs([]float32{0.5, -1}, c.dt, 2)).OpName()
			if err != nil {
				return err
			}
			if op != c.want {
				t.Errorf("%s: erf's node is %q, want %q", c.dt, op, c.want)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
