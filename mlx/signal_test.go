package mlx_test

import (
	"math"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/mlx"
)

// refConv1d is a channels-last 1-D convolution: x [L, Cin], w [Cout, K, Cin].
func refConv1d(x []float32, l, cin int, w []float32, cout, k, stride, pad, dil int) []float32 {
	outLen := (l+2*pad-dil*(k-1)-1)/stride + 1
	out := make([]float32, outLen*cout)
	for o := 0; o < outLen; o++ {
		for co := 0; co < cout; co++ {
			var s float64
			for t := 0; t < k; t++ {
				pos := o*stride - pad + t*dil
				if pos < 0 || pos >= l {
					continue
				}
				for ci := 0; ci < cin; ci++ {
					s += float64(x[pos*cin+ci]) * float64(w[(co*k+t)*cin+ci])
				}
			}
			out[o*cout+co] = float32(s)
		}
	}
	return out
}

func TestConv1d(t *testing.T) {
	mlxtest.Need(t)
	const l, cin, cout, k = 10, 3, 2, 3
	x, w := lcg(31, l*cin, 1), lcg(32, cout*k*cin, 1)
	cases := []struct{ stride, pad, dil int }{{1, 0, 1}, {2, 1, 1}, {1, 2, 2}}
	var oc []opCase
	for _, c := range cases {
		want := refConv1d(x, l, cin, w, cout, k, c.stride, c.pad, c.dil)
		oc = append(oc, opCase{
			name: "stride" + itoa(c.stride) + "_pad" + itoa(c.pad) + "_dil" + itoa(c.dil),
			got: func() *mlx.Array {
				return mlx.Conv1d(arr(x, 1, l, cin), arr(w, cout, k, cin), c.stride, c.pad, c.dil, 1)
			},
			// fp32 sums of 9 products ~1.
			shape: []int{1, len(want) / cout, cout}, want: want, tol: 1e-5,
		})
	}
	runOpCases(t, oc)
}

func TestFFT(t *testing.T) {
	mlxtest.Need(t)
	// A cosine at bin 2 of 8 samples: rfft has 4 at bin 2 and 0 elsewhere.
	const n = 8
	cosine := make([]float32, n)
	for i := range cosine {
		cosine[i] = float32(math.Cos(2 * math.Pi * 2 * float64(i) / n))
	}
	sig := lcg(41, n, 1)
	runOpCases(t, []opCase{
		{"rfft magnitude", func() *mlx.Array { return mlx.Abs(mlx.RFFT(arr(cosine), 0, -1)) },
			[]int{n/2 + 1}, []float32{0, 0, 4, 0, 0}, 1e-5},
		{"irfft inverts rfft", func() *mlx.Array { return mlx.IRFFT(mlx.RFFT(arr(sig), 0, -1), n, -1) },
			[]int{n}, sig, 1e-6},
		{"irfft default length", func() *mlx.Array { return mlx.IRFFT(mlx.RFFT(arr(sig), 0, -1), 0, -1) },
			[]int{n}, sig, 1e-6},
		{"ifft inverts fft", func() *mlx.Array { return mlx.Real(mlx.IFFT(mlx.FFT(arr(sig), 0, 0), 0, 0)) },
			[]int{n}, sig, 1e-6},
		{"fft of impulse is flat", func() *mlx.Array {
			return mlx.Real(mlx.FFT(arr([]float32{1, 0, 0, 0}), 0, -1))
		}, []int{4}, []float32{1, 1, 1, 1}, 0},
	})
	mlxtest.Do(t, func() error {
		// n longer than the input zero-pads: 16 samples give 9 bins.
		a := mlx.RFFT(arr(cosine), 16, -1)
		if got := a.Shape(); len(got) != 1 || got[0] != 9 || a.Dtype() != mlx.Complex64 {
			t.Errorf("rfft(n=16) is %v %v, want complex64 [9]", a.Dtype(), got)
		}
		if err := mlx.FFT(arr(cosine), -1, 0).Err(); err == nil {
			t.Error("fft with a negative length did not fail")
		}
		return nil
	})
}
