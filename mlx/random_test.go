package mlx_test

import (
	"math"
	"slices"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/mlx"
)

func TestRandom(t *testing.T) {
	mlxtest.Need(t)
	tests := []struct {
		name  string
		check func(t *testing.T) error
	}{
		{"same key same numbers", func(t *testing.T) error {
			a, err := f32(mlx.Uniform(mlx.Scalar(0, mlx.Float32), mlx.Scalar(1, mlx.Float32), []int{16}, mlx.Float32, mlx.Key(7)))
			if err != nil {
				return err
			}
			b, err := f32(mlx.Uniform(mlx.Scalar(0, mlx.Float32), mlx.Scalar(1, mlx.Float32), []int{16}, mlx.Float32, mlx.Key(7)))
			if err != nil {
				return err
			}
			c, err := f32(mlx.Uniform(mlx.Scalar(0, mlx.Float32), mlx.Scalar(1, mlx.Float32), []int{16}, mlx.Float32, mlx.Key(8)))
			if err != nil {
				return err
			}
			if !slices.Equal(a, b) {
				t.Error("one key gave two sequences")
			}
			if slices.Equal(a, c) {
				t.Error("two keys gave one sequence")
			}
			for _, v := range a {
				if v < 0 || v >= 1 {
					t.Errorf("uniform value %v outside [0, 1)", v)
				}
			}
			return nil
		}},
		{"seeded global sequence repeats", func(t *testing.T) error {
			draw := func() ([]float32, error) {
				if err := mlx.Seed(3); err != nil {
					return nil, err
				}
				return f32(mlx.Normal([]int{8}, mlx.Float32, 0, 1, nil))
			}
			a, err := draw()
			if err != nil {
				return err
			}
			b, err := draw()
			if err != nil {
				return err
			}
			if !slices.Equal(a, b) {
				t.Errorf("Seed(3) twice gave %v and %v", a, b)
			}
			return nil
		}},
		{"split", func(t *testing.T) error {
			k := mlx.SplitKey(mlx.Key(1), 3)
			if got := k.Shape(); !slices.Equal(got, []int{3, 2}) || k.Dtype() != mlx.Uint32 {
				t.Errorf("split keys %v %v, want uint32 [3 2]", k.Dtype(), got)
			}
			return k.Err()
		}},
		{"normal moments", func(t *testing.T) error {
			v, err := f32(mlx.Normal([]int{20000}, mlx.Float32, 2, 3, mlx.Key(5)))
			if err != nil {
				return err
			}
			var mean, sq float64
			for _, x := range v {
				mean += float64(x) / float64(len(v))
			}
			for _, x := range v {
				sq += (float64(x) - mean) * (float64(x) - mean) / float64(len(v))
			}
			// 20000 samples: the mean's standard error is 3/141 ≈ 0.02.
			if math.Abs(mean-2) > 0.1 || math.Abs(math.Sqrt(sq)-3) > 0.1 {
				t.Errorf("normal(2, 3): mean %.3f, std %.3f", mean, math.Sqrt(sq))
			}
			return nil
		}},
		{"bernoulli extremes", func(t *testing.T) error {
			p := arr([]float32{0, 1})
			v, err := f32(mlx.Bernoulli(mlx.BroadcastTo(p, 50, 2), []int{50, 2}, mlx.Key(9)))
			if err != nil {
				return err
			}
			for i, x := range v {
				if x != float32(i%2) {
					t.Fatalf("bernoulli with p=%d gave %v", i%2, x)
				}
			}
			return nil
		}},
		{"categorical picks the dominant logit", func(t *testing.T) error {
			logits := arr([]float32{0, 0, 50, 0, 40, 0, 0, 0}, 2, 4)
			idx, err := mlx.Categorical(logits, -1, mlx.Key(2)).Int32s()
			if err != nil {
				return err
			}
			if !slices.Equal(idx, []int32{2, 0}) {
				t.Errorf("categorical = %v, want [2 0]", idx)
			}
			many := mlx.CategoricalN(logits, -1, 5, mlx.Key(2))
			if got := many.Shape(); !slices.Equal(got, []int{2, 5}) {
				t.Errorf("categorical with 5 samples has shape %v", got)
			}
			return many.Err()
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { mlxtest.Do(t, func() error { return tc.check(t) }) })
	}
}
