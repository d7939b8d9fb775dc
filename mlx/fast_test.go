package mlx_test

import (
	"math"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/mlx"
)

// lcg gives the tests deterministic inputs in [-scale, scale).
func lcg(seed uint64, n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		seed = seed*6364136223846793005 + 1442695040888963407
		v[i] = float32((float64(uint32(seed>>32))/(1<<31) - 1) * scale)
	}
	return v
}

func f64s(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

func f32s(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

// refNorm is layer norm (center) or RMS norm (no center) over rows of d,
// with optional weight and bias.
func refNorm(x []float32, d int, center bool, w, b []float32, eps float64) []float32 {
	out := make([]float32, len(x))
	for r := 0; r < len(x)/d; r++ {
		row := f64s(x[r*d : (r+1)*d])
		var mean float64
		if center {
			for _, v := range row {
				mean += v / float64(d)
			}
		}
		var ss float64
		for _, v := range row {
			ss += (v - mean) * (v - mean) / float64(d)
		}
		inv := 1 / math.Sqrt(ss+eps)
		for j, v := range row {
			y := (v - mean) * inv
			if w != nil {
				y *= float64(w[j])
			}
			if b != nil {
				y += float64(b[j])
			}
			out[r*d+j] = float32(y)
		}
	}
	return out
}

// refRoPE rotates positions offset.. of [seq, d] rows by pos/wavelength[i];
// traditional pairs adjacent features, otherwise the two halves.
func refRoPE(x []float32, seq, d, offset int, wavelengths []float64, traditional bool) []float32 {
	out := make([]float32, len(x))
	for s := 0; s < seq; s++ {
		for i := 0; i < d/2; i++ {
			theta := float64(offset+s) / wavelengths[i]
			c, sn := math.Cos(theta), math.Sin(theta)
			a, b := i, i+d/2
			if traditional {
				a, b = 2*i, 2*i+1
			}
			x1, x2 := float64(x[s*d+a]), float64(x[s*d+b])
			out[s*d+a] = float32(x1*c - x2*sn)
			out[s*d+b] = float32(x1*sn + x2*c)
		}
	}
	return out
}

func baseWavelengths(base float64, d int) []float64 {
	w := make([]float64, d/2)
	for i := range w {
		w[i] = math.Pow(base, 2*float64(i)/float64(d))
	}
	return w
}

// refSDPA is one head's softmax(q·kᵀ·scale + mask)·v; mask is additive
// [ql, kl] or nil; sink, if not NaN, is an extra logit with a zero value.
func refSDPA(q, k, v []float32, ql, kl, d int, scale float64, mask []float32, sink float64) []float32 {
	out := make([]float32, ql*d)
	for i := 0; i < ql; i++ {
		logits := make([]float64, kl)
		mx := math.Inf(-1)
		for j := range logits {
			for p := 0; p < d; p++ {
				logits[j] += float64(q[i*d+p]) * float64(k[j*d+p])
			}
			logits[j] *= scale
			if mask != nil {
				logits[j] += float64(mask[i*kl+j])
			}
			mx = math.Max(mx, logits[j])
		}
		if !math.IsNaN(sink) {
			mx = math.Max(mx, sink)
		}
		var den float64
		if !math.IsNaN(sink) {
			den = math.Exp(sink - mx)
		}
		for j := range logits {
			logits[j] = math.Exp(logits[j] - mx)
			den += logits[j]
		}
		for p := 0; p < d; p++ {
			var s float64
			for j, e := range logits {
				s += e * float64(v[j*d+p])
			}
			out[i*d+p] = float32(s / den)
		}
	}
	return out
}

func TestFastOps(t *testing.T) {
	mlxtest.Need(t)
	const d = 8
	x := lcg(11, 3*d, 2)
	w, b := lcg(12, d, 1), lcg(13, d, 1)
	q, k, v := lcg(14, 2*d, 1), lcg(15, 3*d, 1), lcg(16, 3*d, 1)
	mask := []float32{0, -1, -2, 0, 0, -0.5}
	// Wavelengths other than base's: what Llama 3's scaled RoPE passes.
	waves := baseWavelengths(500, d)
	for i := range waves {
		waves[i] *= 1 + float64(i)
	}
	const tol = 2e-5 // fp32 kernels on values ~1, 8-wide reductions: ~1e-6
	runOpCases(t, []opCase{
		{"rms_norm no weight", func() *mlx.Array { return mlx.RMSNorm(arr(x, 3, d), nil, 1e-5) },
			[]int{3, d}, refNorm(x, d, false, nil, nil, 1e-5), tol},
		{"layer_norm weight bias", func() *mlx.Array { return mlx.LayerNorm(arr(x, 3, d), arr(w), arr(b), 1e-5) },
			[]int{3, d}, refNorm(x, d, true, w, b, 1e-5), tol},
		{"layer_norm plain", func() *mlx.Array { return mlx.LayerNorm(arr(x, 3, d), nil, nil, 1e-6) },
			[]int{3, d}, refNorm(x, d, true, nil, nil, 1e-6), tol},
		{"rope traditional", func() *mlx.Array { return mlx.RoPE(arr(x, 1, 1, 3, d), d, true, 10000, 1, 5, nil) },
			[]int{1, 1, 3, d}, refRoPE(x, 3, d, 5, baseWavelengths(10000, d), true), tol},
		{"rope freqs", func() *mlx.Array {
			return mlx.RoPE(arr(x, 1, 1, 3, d), d, false, 0, 1, 2, arr(f32s(waves)))
		}, []int{1, 1, 3, d}, refRoPE(x, 3, d, 2, waves, false), tol},
		{"rope dynamic offset", func() *mlx.Array {
			return mlx.RoPEDynamic(arr(x, 1, 1, 3, d), d, false, 10000, 1, mlx.FromSlice([]int32{4}), nil)
		}, []int{1, 1, 3, d}, refRoPE(x, 3, d, 4, baseWavelengths(10000, d), false), tol},
		{"sdpa no mask", func() *mlx.Array {
			return mlx.ScaledDotProductAttention(arr(q, 1, 1, 2, d), arr(k, 1, 1, 3, d), arr(v, 1, 1, 3, d), 0.3, mlx.MaskNone, nil, nil)
		}, []int{1, 1, 2, d}, refSDPA(q, k, v, 2, 3, d, 0.3, nil, math.NaN()), tol},
		{"sdpa array mask", func() *mlx.Array {
			return mlx.ScaledDotProductAttention(arr(q, 1, 1, 2, d), arr(k, 1, 1, 3, d), arr(v, 1, 1, 3, d), 0.3, mlx.MaskNone,
				arr(mask, 2, 3), nil)
		}, []int{1, 1, 2, d}, refSDPA(q, k, v, 2, 3, d, 0.3, mask, math.NaN()), tol},
		{"sdpa causal", func() *mlx.Array {
			return mlx.ScaledDotProductAttention(arr(q, 1, 1, 2, d), arr(k, 1, 1, 3, d), arr(v, 1, 1, 3, d), 0.3, mlx.MaskCausal, nil, nil)
		}, []int{1, 1, 2, d}, refSDPA(q, k, v, 2, 3, d, 0.3, []float32{0, 0, float32(math.Inf(-1)), 0, 0, 0}, math.NaN()), tol},
		{"sdpa sinks", func() *mlx.Array {
			return mlx.ScaledDotProductAttention(arr(q, 1, 1, 2, d), arr(k, 1, 1, 3, d), arr(v, 1, 1, 3, d), 0.3, mlx.MaskNone, nil,
				arr([]float32{0.7}))
		}, []int{1, 1, 2, d}, refSDPA(q, k, v, 2, 3, d, 0.3, nil, 0.7), tol},
	})
}

// TestGeluApproxIsTheOpGraph checks the shim's gelu_approx on the CPU
// against the same ops called one by one from Go, in mlx-lm's order, bit
// for bit in every float dtype, and against float64 arithmetic loosely.
func TestGeluApproxIsTheOpGraph(t *testing.T) {
	mlxtest.Do(t, func() error {
		x := lcg(7, 1000, 6)
		for _, dt := range []mlx.Dtype{mlx.Float32, mlx.Float16, mlx.BFloat16} {
			a := mlx.AsType(mlx.FromSlice(x, 10, 100), dt)
			c := func(v float64) *mlx.Array { return mlx.Scalar(float32(v), dt) }
			inner := mlx.Add(a, mlx.Multiply(mlx.Power(a, c(3)), c(0.044715)))
			inner = mlx.Multiply(inner, c(math.Sqrt(2/math.Pi)))
			want := mlx.Multiply(mlx.Multiply(a, c(0.5)), mlx.Add(mlx.Tanh(inner), c(1)))
			got := mlx.GeluApprox(a)
			w, err := mlx.AsType(want, mlx.Float32).Float32s()
			if err != nil {
				return err
			}
			g, err := mlx.AsType(got, mlx.Float32).Float32s()
			if err != nil {
				return err
			}
			if got.Dtype() != dt {
				t.Errorf("%v: result dtype %v", dt, got.Dtype())
			}
			for i := range w {
				if math.Float32bits(w[i]) != math.Float32bits(g[i]) {
					t.Fatalf("%v: element %d: shim %v, ops %v", dt, i, g[i], w[i])
				}
				v := float64(x[i])
				ref := 0.5 * v * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+0.044715*v*v*v)))
				if dt == mlx.Float32 && math.Abs(float64(g[i])-ref) > 1e-5*(1+math.Abs(ref)) {
					t.Fatalf("element %d: gelu_approx(%v) = %v, float64 %v", i, v, g[i], ref)
				}
			}
		}
		return nil
	})
}
