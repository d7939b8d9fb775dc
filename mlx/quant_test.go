package mlx_test

import (
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/mlx"
)

func TestQuantOps(t *testing.T) {
	mlxtest.Need(t)
	const n, k = 4, 64
	w := lcg(21, n*k, 1)
	x := lcg(22, 2*k, 1)
	for _, q := range []mlx.Quant{
		{GroupSize: 32, Bits: 4, Mode: "affine"},
		{GroupSize: 64, Bits: 8},
		{GroupSize: 32, Bits: 4, Mode: "mxfp4"},
	} {
		t.Run(q.Mode+"/"+itoa(q.Bits)+"bit", func(t *testing.T) {
			mlxtest.Do(t, func() error {
				wq, scales, biases := mlx.Quantize(arr(w, n, k), q)
				if err := wq.Err(); err != nil {
					return err
				}
				if (biases == nil) != (q.Mode == "mxfp4") {
					t.Errorf("biases = %v for mode %q", biases, q.Mode)
				}
				deq := mlx.Dequantize(wq, scales, biases, q)
				dw, err := f32(deq)
				if err != nil {
					return err
				}
				// The Go reference: x @ dequantized(w).T in float64.
				want := make([]float32, 2*n)
				for i := 0; i < 2; i++ {
					for j := 0; j < n; j++ {
						var s float64
						for p := 0; p < k; p++ {
							s += float64(x[i*k+p]) * float64(dw[j*k+p])
						}
						want[i*n+j] = float32(s)
					}
				}
				got, err := f32(mlx.QuantizedMatmul(arr(x, 2, k), wq, scales, biases, true, q))
				if err != nil {
					return err
				}
				// fp32 accumulation over 64 terms ~1 in magnitude.
				if err := closeTo(got, want, 1e-4, 1e-4); err != nil {
					t.Errorf("quantized_matmul: %v", err)
				}
				// gather_qmm picking expert 0 of a one-expert stack is the same product.
				w3, s3 := mlx.ExpandDims(wq, 0), mlx.ExpandDims(scales, 0)
				var b3 *mlx.Array
				if biases != nil {
					b3 = mlx.ExpandDims(biases, 0)
				}
				g, err := f32(mlx.GatherQMM(arr(x, 2, 1, k), w3, s3, b3, nil, mlx.FromSlice([]uint32{0, 0}), true, q, false))
				if err != nil {
					return err
				}
				if err := closeTo(g, want, 1e-4, 1e-4); err != nil {
					t.Errorf("gather_qmm: %v", err)
				}
				// Dequantize into another dtype.
				if dt := mlx.DequantizeAs(wq, scales, biases, q, mlx.BFloat16).Dtype(); dt != mlx.BFloat16 {
					t.Errorf("DequantizeAs dtype %v", dt)
				}
				return nil
			})
		})
	}
}

func TestGatherMM(t *testing.T) {
	mlxtest.Do(t, func() error {
		// Two "experts" [2, 3, 2]; rows pick expert 1 then 0.
		b := arr([]float32{1, 0, 0, 1, 1, 1, 2, 0, 0, 2, 2, 2}, 2, 3, 2)
		a := arr(m23, 2, 1, 3)
		got, err := f32(mlx.GatherMM(a, b, nil, mlx.FromSlice([]uint32{1, 0}), false))
		if err != nil {
			return err
		}
		// [1 2 3]·expert1 = [2+6, 4+6]; [4 5 6]·expert0 = [4+6, 5+6].
		if err := closeTo(got, []float32{8, 10, 10, 11}, 0, 0); err != nil {
			t.Errorf("gather_mm: %v (got %v)", err, got)
		}
		return nil
	})
}
