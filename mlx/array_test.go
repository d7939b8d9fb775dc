package mlx_test

import (
	"slices"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/mlx"
)

func TestArrayBasics(t *testing.T) {
	mlxtest.Need(t)
	tests := []struct {
		name  string
		check func(t *testing.T) error
	}{
		{"queries", func(t *testing.T) error {
			a := mlx.Zeros(mlx.BFloat16, 2, 3, 4)
			if !slices.Equal(a.Shape(), []int{2, 3, 4}) || a.Ndim() != 3 || a.Size() != 24 ||
				a.Dtype() != mlx.BFloat16 || a.Itemsize() != 2 || a.Nbytes() != 48 || a.Dim(-1) != 4 || a.Dim(5) != 0 {
				t.Errorf("queries of a bf16 [2 3 4]: %v ndim %d size %d item %d nbytes %d", a, a.Ndim(), a.Size(), a.Itemsize(), a.Nbytes())
			}
			if s := a.String(); s != "array(bfloat16, [2 3 4])" {
				t.Errorf("String() = %q", s)
			}
			return nil
		}},
		{"many dims", func(t *testing.T) error {
			shape := []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2} // past the 16-dim fast path
			a := mlx.Ones(mlx.Int32, shape...)
			if !slices.Equal(a.Shape(), shape) {
				t.Errorf("shape %v, want %v", a.Shape(), shape)
			}
			return a.Err()
		}},
		{"async eval then read", func(t *testing.T) error {
			a := mlx.Multiply(arr(pv), mlx.Scalar(2, mlx.Float32))
			if err := mlx.AsyncEval(a); err != nil {
				return err
			}
			got, err := f32(a)
			if err != nil {
				return err
			}
			return closeTo(got, []float32{1, 2, 4, 8}, 0, 0)
		}},
		{"clone outlives the original", func(t *testing.T) error {
			a := arr(sv)
			c := a.Clone()
			a.Free()
			got, err := f32(c)
			if err != nil {
				return err
			}
			return closeTo(got, sv, 0, 0)
		}},
		{"scalars", func(t *testing.T) error {
			if dt := mlx.ScalarLike(0.5, mlx.Zeros(mlx.BFloat16, 2)).Dtype(); dt != mlx.BFloat16 {
				t.Errorf("ScalarLike of a bf16 array is %v", dt)
			}
			if dt := mlx.ScalarLike(0.5, mlx.Zeros(mlx.Int32, 2)).Dtype(); dt != mlx.Float32 {
				t.Errorf("ScalarLike of an int32 array is %v", dt)
			}
			v, err := mlx.ToSlice[int64](mlx.ScalarInt(1<<40, mlx.Int64))
			if err != nil {
				return err
			}
			if v[0] != 1<<40 {
				t.Errorf("ScalarInt(2^40) = %d", v[0])
			}
			// x * 0.5 keeps bf16, as a Python float does in mlx.
			if dt := mlx.Multiply(mlx.Ones(mlx.BFloat16, 2), mlx.ScalarLike(0.5, mlx.Ones(mlx.BFloat16, 1))).Dtype(); dt != mlx.BFloat16 {
				t.Errorf("bf16 * weak scalar is %v", dt)
			}
			return nil
		}},
		{"empty array", func(t *testing.T) error {
			a := mlx.FromSlice([]float32{}, 0, 3)
			got, err := f32(a)
			if err != nil {
				return err
			}
			if len(got) != 0 || !slices.Equal(a.Shape(), []int{0, 3}) {
				t.Errorf("empty array: %v %v", a.Shape(), got)
			}
			return nil
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { mlxtest.Do(t, func() error { return tc.check(t) }) })
	}
}
