package mlx_test

import (
	"math"
	"slices"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/mlx"
)

func TestReductions(t *testing.T) {
	mlxtest.Need(t)
	a := func() *mlx.Array { return arr(m23, 2, 3) }
	lse := func(v ...float64) float32 {
		var s float64
		for _, x := range v {
			s += math.Exp(x)
		}
		return float32(math.Log(s))
	}
	runOpCases(t, []opCase{
		{"sum all", func() *mlx.Array { return mlx.Sum(a(), nil, false) }, []int{}, []float32{21}, 0},
		{"sum axis 1 keepdims", func() *mlx.Array { return mlx.Sum(a(), []int{1}, true) }, []int{2, 1}, []float32{6, 15}, 0},
		{"mean axis 0", func() *mlx.Array { return mlx.Mean(a(), []int{0}, false) }, []int{3}, []float32{2.5, 3.5, 4.5}, 0},
		{"max", func() *mlx.Array { return mlx.Max(a(), []int{1}, false) }, []int{2}, []float32{3, 6}, 0},
		{"min", func() *mlx.Array { return mlx.Min(a(), []int{1}, false) }, []int{2}, []float32{1, 4}, 0},
		{"prod", func() *mlx.Array { return mlx.Prod(a(), []int{1}, false) }, []int{2}, []float32{6, 120}, 0},
		{"logsumexp", func() *mlx.Array { return mlx.LogSumExp(a(), []int{1}, false) },
			[]int{2}, []float32{lse(1, 2, 3), lse(4, 5, 6)}, 1e-6},
		{"all", func() *mlx.Array { return mlx.All(mlx.Greater(a(), mlx.Scalar(1, mlx.Float32)), []int{1}, false) },
			[]int{2}, []float32{0, 1}, 0},
		{"any", func() *mlx.Array { return mlx.Any(mlx.Greater(a(), mlx.Scalar(5, mlx.Float32)), []int{1}, false) },
			[]int{2}, []float32{0, 1}, 0},
		// var of 1,2,3 is 2/3 (ddof 0) and 1 (ddof 1).
		{"var", func() *mlx.Array { return mlx.Var(a(), []int{1}, false, 0) }, []int{2}, []float32{2.0 / 3, 2.0 / 3}, 1e-6},
		{"var ddof 1", func() *mlx.Array { return mlx.Var(a(), []int{1}, false, 1) }, []int{2}, []float32{1, 1}, 1e-6},
		{"argmax", func() *mlx.Array { return mlx.Argmax(arr([]float32{3, 9, 2, 9, 1, 0}, 2, 3), 1, false) },
			[]int{2}, []float32{1, 0}, 0},
		{"argmax keepdims", func() *mlx.Array { return mlx.Argmax(arr([]float32{3, 9, 2, 9, 1, 0}, 2, 3), 0, true) },
			[]int{1, 3}, []float32{1, 0, 0}, 0},
		{"argmin", func() *mlx.Array { return mlx.Argmin(arr([]float32{3, 9, 2, 9, 1, 0}, 2, 3), 1, false) },
			[]int{2}, []float32{2, 2}, 0},
		{"cumsum", func() *mlx.Array { return mlx.Cumsum(a(), 1, false, true) }, []int{2, 3}, []float32{1, 3, 6, 4, 9, 15}, 0},
		{"cumsum reverse exclusive", func() *mlx.Array { return mlx.Cumsum(a(), 1, true, false) },
			[]int{2, 3}, []float32{5, 3, 0, 11, 6, 0}, 0},
		{"softmax precise bf16", func() *mlx.Array {
			return mlx.Softmax(mlx.AsType(arr([]float32{0, 1, 2}), mlx.BFloat16), []int{-1}, true)
		}, []int{3}, softmaxRef([]float64{0, 1, 2}), 4e-3}, // bf16 output: 8-bit mantissa
		{"softmax all axes", func() *mlx.Array { return mlx.Softmax(arr([]float32{1, 1, 1, 1}, 2, 2), nil, false) },
			[]int{2, 2}, []float32{0.25, 0.25, 0.25, 0.25}, 1e-7},
		{"sort", func() *mlx.Array { return mlx.Sort(arr([]float32{3, 1, 2, 0}), 0) }, []int{4}, []float32{0, 1, 2, 3}, 0},
		{"argsort", func() *mlx.Array { return mlx.Argsort(arr([]float32{3, 1, 2, 0}), 0) }, []int{4}, []float32{3, 1, 2, 0}, 0},
		{"take", func() *mlx.Array { return mlx.Take(a(), mlx.FromSlice([]int32{1, 1, 0}), 0) },
			[]int{3, 3}, []float32{4, 5, 6, 4, 5, 6, 1, 2, 3}, 0},
		{"take_along_axis", func() *mlx.Array {
			return mlx.TakeAlongAxis(a(), mlx.FromSlice([]int32{2, 0}, 2, 1), 1)
		}, []int{2, 1}, []float32{3, 4}, 0},
		{"put_along_axis", func() *mlx.Array {
			return mlx.PutAlongAxis(a(), mlx.FromSlice([]int32{2, 0}, 2, 1), arr([]float32{0, 0}, 2, 1), 1)
		}, []int{2, 3}, []float32{1, 2, 0, 0, 5, 6}, 0},
		{"gather rows", func() *mlx.Array {
			return mlx.Gather(a(), []*mlx.Array{mlx.FromSlice([]int32{1, 0})}, []int{0}, []int{1, 3})
		}, []int{2, 1, 3}, []float32{4, 5, 6, 1, 2, 3}, 0},
	})
}

func softmaxRef(x []float64) []float32 {
	var s float64
	for _, v := range x {
		s += math.Exp(v)
	}
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = float32(math.Exp(v) / s)
	}
	return out
}

// TestPartitionOps checks the properties partition, argpartition and topk
// promise, since the order inside each side is unspecified.
func TestPartitionOps(t *testing.T) {
	x := []float32{5, 1, 9, 3, 7, 2, 8}
	sorted := slices.Clone(x)
	slices.Sort(sorted)
	const kth = 3
	mlxtest.Do(t, func() error {
		p, err := f32(mlx.Partition(arr(x), kth, 0))
		if err != nil {
			return err
		}
		idx, err := mlx.Argpartition(arr(x), kth, 0).Int32s()
		if err != nil {
			return err
		}
		top, err := f32(mlx.TopK(arr(x), 3, 0))
		if err != nil {
			return err
		}
		if p[kth] != sorted[kth] {
			t.Errorf("partition: element %d is %v, want %v", kth, p[kth], sorted[kth])
		}
		for i := range p {
			if (i < kth && p[i] > p[kth]) || (i > kth && p[i] < p[kth]) {
				t.Errorf("partition %v: %v on the wrong side of %v", p, p[i], p[kth])
			}
		}
		if x[idx[kth]] != sorted[kth] {
			t.Errorf("argpartition %v: index %d points at %v, want %v", idx, kth, x[idx[kth]], sorted[kth])
		}
		slices.Sort(top)
		if !slices.Equal(top, sorted[len(sorted)-3:]) {
			t.Errorf("topk = %v, want the values %v", top, sorted[len(sorted)-3:])
		}
		return nil
	})
}
