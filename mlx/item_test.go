package mlx_test

import (
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/mlx"
)

// TestItemEveryDtype: Item reads one element of each dtype exactly (on the
// host, without an astype op), including half and bfloat16 bit patterns.
func TestItemEveryDtype(t *testing.T) {
	mlxtest.Need(t)
	cases := []struct {
		name string
		make func() *mlx.Array
		want float64
	}{
		{"bool", func() *mlx.Array { return mlx.FromSlice([]bool{true}) }, 1},
		{"uint8", func() *mlx.Array { return mlx.FromSlice([]uint8{200}) }, 200},
		{"uint32", func() *mlx.Array { return mlx.FromSlice([]uint32{4000000000}) }, 4000000000},
		{"uint64", func() *mlx.Array { return mlx.FromSlice([]uint64{1 << 40}) }, 1 << 40},
		{"int8", func() *mlx.Array { return mlx.FromSlice([]int8{-7}) }, -7},
		{"int16", func() *mlx.Array { return mlx.FromSlice([]int16{-300}) }, -300},
		{"int32", func() *mlx.Array { return mlx.FromSlice([]int32{-123456}) }, -123456},
		{"int64", func() *mlx.Array { return mlx.FromSlice([]int64{-1 << 40}) }, -1 << 40},
		{"float32", func() *mlx.Array { return mlx.FromSlice([]float32{0.1}) }, float64(float32(0.1))},
		{"float64 scalar from op", func() *mlx.Array { return mlx.Sum(mlx.FromSlice([]float32{1.5, 2.25}), nil, false) }, 3.75},
		{"float16", func() *mlx.Array { return mlx.FromSliceAs([]uint16{0x3e00}, mlx.Float16) }, 1.5},
		{"bfloat16", func() *mlx.Array { return mlx.FromSliceAs([]uint16{0xc040}, mlx.BFloat16) }, -3},
		{"uint16", func() *mlx.Array { return mlx.FromSlice([]uint16{65535}) }, 65535},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mlxtest.Do(t, func() error {
				a := c.make()
				defer a.Free()
				got, err := a.Item()
				if err != nil {
					return err
				}
				if got != c.want {
					t.Errorf("Item() = %v, want %v", got, c.want)
				}
				return nil
			})
		})
	}
}
