package mlx_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/mlx"
)

// stockKernels reports whether the kernels in use are MLX's own.
func stockKernels() bool {
	cur, _ := mlx.CPUKernelsInUse()
	return cur.Kernels == mlx.KernelsMLX
}

// TestCPUKernelsNormPackedMatmul: rms_norm then a packed quantized matmul as
// one node is MLX's fast.rms_norm and quantized_matmul, bit for bit, for
// rows 1 to 17, 4 and 8 bits, x and its norm weight in every float dtype
// (the scales in the dtype the norm's output already has).
func TestCPUKernelsNormPackedMatmul(t *testing.T) {
	mlxtest.Need(t)
	isaList := runnableISAs(t)
	r := rand.New(rand.NewPCG(11, 12))
	for _, dt := range floatDtypes {
		for _, c := range []struct{ m, n, k, bits, gs int }{{1, 96, 64, 4, 32}, {3, 40, 128, 8, 64}, {17, 33, 64, 4, 64}} {
			w := randomWords(r, c.n*c.k*c.bits/32)
			s := randomFloats(r, c.n*c.k/c.gs, 0.1, 0)
			b := randomFloats(r, c.n*c.k/c.gs, 0.1, 0)
			x := randomFloats(r, c.m*c.k, 3, 0.01)
			nw := randomFloats(r, c.k, 1, 0)
			t.Run(fmt.Sprintf("%s/m%d_n%d_k%d_%dbit_g%d", dt, c.m, c.n, c.k, c.bits, c.gs), func(t *testing.T) {
				compareKernels(t, isaList, func() (*mlx.Array, error) {
					q := mlx.Quant{GroupSize: c.gs, Bits: c.bits, Mode: "affine"}
					xa, na := floatsAs(x, dt, 1, c.m, c.k), floatsAs(nw, dt, c.k)
					wa := mlx.FromSlice(w, c.n, c.k*c.bits/32)
					sa, ba := floatsAs(s, dt, c.n, c.k/c.gs), floatsAs(b, dt, c.n, c.k/c.gs)
					if stockKernels() {
						y := mlx.QuantizedMatmul(mlx.RMSNorm(xa, na, 1e-5), wa, sa, ba, true, q)
						return y, y.Err()
					}
					p, err := mlx.PackQuantized(wa, sa, ba, q)
					if err != nil {
						return nil, err
					}
					y := mlx.NormPackedMatmul(xa, na, 1e-5, p)
					return y, y.Err()
				})
			})
		}
	}
}

// TestCPUKernelsPackedMLP: the SwiGLU MLP over packed gate/up and down
// weights as one node is MLX's ops for it — fast.rms_norm (or none),
// quantized_matmul, the halves, silu(g) * u, quantized_matmul, the residual
// add (or none) — bit for bit, with float16, bfloat16 and float32 scales.
func TestCPUKernelsPackedMLP(t *testing.T) {
	mlxtest.Need(t)
	isaList := runnableISAs(t)
	r := rand.New(rand.NewPCG(13, 14))
	for _, sdt := range floatDtypes {
		for _, c := range []struct {
			m, hidden, width, bits, gs int
			norm, res                  bool
		}{{1, 64, 96, 4, 32, true, true}, {3, 128, 64, 8, 64, true, false}, {9, 64, 192, 4, 64, false, true}, {2, 64, 64, 4, 32, false, false}} {
			gw := randomWords(r, 2*c.width*c.hidden*c.bits/32)
			gs, gb := randomFloats(r, 2*c.width*c.hidden/c.gs, 0.1, 0), randomFloats(r, 2*c.width*c.hidden/c.gs, 0.1, 0)
			dw := randomWords(r, c.hidden*c.width*c.bits/32)
			ds, db := randomFloats(r, c.hidden*c.width/c.gs, 0.1, 0), randomFloats(r, c.hidden*c.width/c.gs, 0.1, 0)
			x := randomFloats(r, c.m*c.hidden, 3, 0.01)
			nw := randomFloats(r, c.hidden, 1, 0)
			name := fmt.Sprintf("%s/m%d_h%d_w%d_%dbit_g%d_norm%v_res%v", sdt, c.m, c.hidden, c.width, c.bits, c.gs, c.norm, c.res)
			t.Run(name, func(t *testing.T) {
				compareKernels(t, isaList, func() (*mlx.Array, error) {
					q := mlx.Quant{GroupSize: c.gs, Bits: c.bits, Mode: "affine"}
					xa := mlx.FromSlice(x, 1, c.m, c.hidden)
					var na, res *mlx.Array
					if c.norm {
						na = floatsAs(nw, sdt, c.hidden)
					}
					if c.res {
						res = xa
					}
					gwa, dwa := mlx.FromSlice(gw, 2*c.width, c.hidden*c.bits/32), mlx.FromSlice(dw, c.hidden, c.width*c.bits/32)
					gsa, gba := floatsAs(gs, sdt, 2*c.width, c.hidden/c.gs), floatsAs(gb, sdt, 2*c.width, c.hidden/c.gs)
					dsa, dba := floatsAs(ds, sdt, c.hidden, c.width/c.gs), floatsAs(db, sdt, c.hidden, c.width/c.gs)
					if stockKernels() {
						h := xa
						if na != nil {
							h = mlx.RMSNorm(xa, na, 1e-6)
						}
						gu := mlx.Split(mlx.QuantizedMatmul(h, gwa, gsa, gba, true, q), 2, -1)
						y := mlx.QuantizedMatmul(mlx.SwiGLU(gu[0], gu[1]), dwa, dsa, dba, true, q)
						if res != nil {
							y = mlx.Add(res, y)
						}
						return y, y.Err()
					}
					gp, err := mlx.PackQuantized(gwa, gsa, gba, q)
					if err != nil {
						return nil, err
					}
					dp, err := mlx.PackQuantized(dwa, dsa, dba, q)
					if err != nil {
						return nil, err
					}
					y := mlx.PackedMLP(xa, na, 1e-6, gp, dp, res)
					return y, y.Err()
				})
			})
		}
	}
}
