package mlx_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/mlx"
)

// BenchmarkPackedMatmul times one decode-shaped (M rows) quantized matmul on
// a packed weight: SmolLM2's MLP up projection, 4-bit g32, float16 scales.
func BenchmarkPackedMatmul(b *testing.B) {
	mlxtest.Need(b)
	r := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct{ m, n, k, bits, threads int }{{1, 32, 32, 4, 1}, {1, 1536, 576, 4, 1}, {1, 1536, 576, 4, 2}, {1, 49152, 576, 8, 2}, {16, 1536, 576, 4, 2}, {512, 1536, 576, 4, 2}} {
		b.Run(fmt.Sprintf("m%d_n%d_k%d_%dbit_t%d", c.m, c.n, c.k, c.bits, c.threads), func(b *testing.B) {
			mlxtest.Do(b, func() error {
				if err := mlx.SetCPUKernels(mlx.KernelsMLXGO, c.threads, ""); err != nil {
					return err
				}
				q := mlx.Quant{GroupSize: 32, Bits: c.bits, Mode: "affine"}
				w := mlx.FromSlice(randomWords(r, c.n*c.k*c.bits/32), c.n, c.k*c.bits/32)
				s := floatsAs(randomFloats(r, c.n*c.k/32, 0.1, 0), mlx.Float16, c.n, c.k/32)
				bb := floatsAs(randomFloats(r, c.n*c.k/32, 0.1, 0), mlx.Float16, c.n, c.k/32)
				p, err := mlx.PackQuantized(w, s, bb, q)
				if err != nil {
					return err
				}
				x := mlx.FromSlice(randomFloats(r, c.m*c.k, 1, 0), c.m, c.k)
				if err := mlx.Eval(x); err != nil {
					return err
				}
				// 32 matmuls per evaluation, as in a model's step: one
				// evaluation's round trip to MLX's stream thread costs tens
				// of microseconds, more than a small matmul.
				const per = 32
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					ys := make([]*mlx.Array, per)
					for j := range ys {
						ys[j] = mlx.PackedMatmul(x, p)
					}
					if err := mlx.Eval(ys...); err != nil {
						return err
					}
					for _, y := range ys {
						y.Free()
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*per), "ns/matmul")
				b.ReportMetric(float64(c.m*c.n*c.k)*float64(b.N*per)/b.Elapsed().Seconds()/1e9, "GMAC/s")
				return nil
			})
		})
	}
}
