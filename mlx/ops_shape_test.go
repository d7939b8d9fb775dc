package mlx_test

import (
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/mlx"
)

func TestShapeOps(t *testing.T) {
	mlxtest.Need(t)
	a := func() *mlx.Array { return arr(m23, 2, 3) }
	runOpCases(t, []opCase{
		{"astype f32→i32 truncates", func() *mlx.Array { return mlx.AsType(arr(sv), mlx.Int32) },
			[]int{4}, []float32{-1, 0, 0, 2}, 0},
		{"view f32 as u32", func() *mlx.Array { return mlx.View(arr([]float32{1, -2}), mlx.Uint32) },
			[]int{2}, []float32{0x3f800000, 0xc0000000}, 0},
		{"arange", func() *mlx.Array { return mlx.Arange(1, 3, 0.5, mlx.Float32) },
			[]int{4}, []float32{1, 1.5, 2, 2.5}, 0},
		{"zeros", func() *mlx.Array { return mlx.Zeros(mlx.Int32, 2, 2) }, []int{2, 2}, []float32{0, 0, 0, 0}, 0},
		{"ones", func() *mlx.Array { return mlx.Ones(mlx.BFloat16, 3) }, []int{3}, []float32{1, 1, 1}, 0},
		{"full", func() *mlx.Array { return mlx.Full([]int{2, 2}, mlx.Scalar(7, mlx.Float32), mlx.Float16) },
			[]int{2, 2}, []float32{7, 7, 7, 7}, 0},
		{"reshape", func() *mlx.Array { return mlx.Reshape(a(), 3, -1) }, []int{3, 2}, m23, 0},
		{"transpose reverse", func() *mlx.Array { return mlx.Transpose(a()) },
			[]int{3, 2}, []float32{1, 4, 2, 5, 3, 6}, 0},
		{"transpose axes", func() *mlx.Array { return mlx.Transpose(mlx.Reshape(a(), 1, 2, 3), 2, 0, 1) },
			[]int{3, 1, 2}, []float32{1, 4, 2, 5, 3, 6}, 0},
		{"swapaxes", func() *mlx.Array { return mlx.SwapAxes(a(), 0, 1) }, []int{3, 2}, []float32{1, 4, 2, 5, 3, 6}, 0},
		{"expand_dims", func() *mlx.Array { return mlx.ExpandDims(a(), 0, -1) }, []int{1, 2, 3, 1}, m23, 0},
		{"squeeze all", func() *mlx.Array { return mlx.Squeeze(mlx.Reshape(a(), 1, 2, 1, 3)) }, []int{2, 3}, m23, 0},
		{"squeeze one", func() *mlx.Array { return mlx.Squeeze(mlx.Reshape(a(), 1, 2, 1, 3), 2) }, []int{1, 2, 3}, m23, 0},
		{"flatten", func() *mlx.Array { return mlx.Flatten(mlx.Reshape(a(), 1, 2, 3), 1, 2) }, []int{1, 6}, m23, 0},
		{"broadcast_to", func() *mlx.Array { return mlx.BroadcastTo(arr([]float32{1, 2}, 2, 1), 2, 3) },
			[]int{2, 3}, []float32{1, 1, 1, 2, 2, 2}, 0},
		{"concatenate", func() *mlx.Array { return mlx.Concatenate([]*mlx.Array{a(), arr(n23, 2, 3)}, 1) },
			[]int{2, 6}, []float32{1, 2, 3, 6, 5, 4, 4, 5, 6, 3, 2, 1}, 0},
		{"stack", func() *mlx.Array { return mlx.Stack([]*mlx.Array{arr(sv), arr(pv)}, 1) },
			[]int{4, 2}, []float32{-1.5, 0.5, -0.5, 1, 0.5, 2, 2, 4}, 0},
		{"split", func() *mlx.Array { return mlx.Split(a(), 3, 1)[2] }, []int{2, 1}, []float32{3, 6}, 0},
		{"split_at", func() *mlx.Array { return mlx.SplitAt(a(), []int{1}, 1)[1] }, []int{2, 2}, []float32{2, 3, 5, 6}, 0},
		{"slice", func() *mlx.Array { return mlx.Slice(a(), []int{0, 1}, []int{2, 3}) },
			[]int{2, 2}, []float32{2, 3, 5, 6}, 0},
		{"slice strided", func() *mlx.Array { return mlx.SliceStrided(a(), []int{1, 0}, []int{2, 3}, []int{1, 2}) },
			[]int{1, 2}, []float32{4, 6}, 0},
		{"slice_dynamic", func() *mlx.Array {
			return mlx.SliceDynamic(a(), mlx.FromSlice([]int32{1}), []int{1}, []int{2, 2})
		}, []int{2, 2}, []float32{2, 3, 5, 6}, 0},
		{"slice_update", func() *mlx.Array {
			return mlx.SliceUpdate(a(), arr([]float32{9, 9}, 2, 1), []int{0, 1}, []int{2, 2})
		}, []int{2, 3}, []float32{1, 9, 3, 4, 9, 6}, 0},
		{"slice_update strided", func() *mlx.Array {
			return mlx.SliceUpdateStrided(a(), arr([]float32{8, 9}, 1, 2), []int{1, 0}, []int{2, 3}, []int{1, 2})
		}, []int{2, 3}, []float32{1, 2, 3, 8, 5, 9}, 0},
		{"slice_update_dynamic", func() *mlx.Array {
			return mlx.SliceUpdateDynamic(a(), arr([]float32{7, 7}, 2, 1), mlx.FromSlice([]int32{2}), []int{1})
		}, []int{2, 3}, []float32{1, 2, 7, 4, 5, 7}, 0},
		{"pad constant", func() *mlx.Array {
			return mlx.Pad(arr(pv), []int{0}, []int{1}, []int{2}, mlx.Scalar(-1, mlx.Float32), "constant")
		}, []int{7}, []float32{-1, 0.5, 1, 2, 4, -1, -1}, 0},
		{"pad edge", func() *mlx.Array {
			return mlx.Pad(arr(pv), []int{0}, []int{2}, []int{1}, mlx.Scalar(0, mlx.Float32), "edge")
		}, []int{7}, []float32{0.5, 0.5, 0.5, 1, 2, 4, 4}, 0},
		{"repeat", func() *mlx.Array { return mlx.Repeat(arr([]float32{1, 2}), 2, 0) }, []int{4}, []float32{1, 1, 2, 2}, 0},
		{"tril", func() *mlx.Array { return mlx.Tril(mlx.Ones(mlx.Float32, 3, 3), 0) },
			[]int{3, 3}, []float32{1, 0, 0, 1, 1, 0, 1, 1, 1}, 0},
		{"triu", func() *mlx.Array { return mlx.Triu(mlx.Ones(mlx.Float32, 3, 3), 1) },
			[]int{3, 3}, []float32{0, 1, 1, 0, 0, 1, 0, 0, 0}, 0},
		{"contiguous of transpose", func() *mlx.Array { return mlx.Contiguous(mlx.Transpose(a())) },
			[]int{3, 2}, []float32{1, 4, 2, 5, 3, 6}, 0},
		{"where", func() *mlx.Array {
			return mlx.Where(mlx.Greater(arr(sv), mlx.Scalar(0, mlx.Float32)), arr(sv), arr(pv))
		}, []int{4}, []float32{0.5, 1, 0.5, 2}, 0},
	})
}

// TestSplitCount checks that every part of a split comes back, with the
// right sizes.
func TestSplitCount(t *testing.T) {
	mlxtest.Do(t, func() error {
		parts := mlx.SplitAt(mlx.Arange(0, 10, 1, mlx.Int32), []int{2, 5, 9}, 0)
		want := []int{2, 3, 4, 1}
		if len(parts) != len(want) {
			t.Fatalf("%d parts, want %d", len(parts), len(want))
		}
		for i, p := range parts {
			if p.Size() != want[i] {
				t.Errorf("part %d has %d elements, want %d", i, p.Size(), want[i])
			}
		}
		return nil
	})
}
