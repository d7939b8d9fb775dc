package mlx_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/mlx"
)

// TestViews cuts a fused q/k/v projection into heads both ways, with MLX's
// slice/reshape/transpose and with one Views node, and compares the views
// and an op over each (which takes MLX's contiguous or strided path by the
// views' flags) bit for bit: decode (L = 1) and prefill shapes, and an input
// that is itself a transposed view, which Views copies first.
func TestViews(t *testing.T) {
	mlxtest.Need(t)
	r := rand.New(rand.NewPCG(21, 22))
	for _, c := range []struct {
		b, l, h, kvh, d int
		transposed      bool
	}{{1, 1, 9, 3, 64, false}, {2, 5, 4, 2, 8, false}, {1, 7, 3, 3, 16, true}, {3, 1, 2, 1, 4, true}} {
		t.Run(fmt.Sprintf("b%d_l%d_h%d_kv%d_d%d_transposed%v", c.b, c.l, c.h, c.kvh, c.d, c.transposed), func(t *testing.T) {
			widths := []int{c.h * c.d, c.kvh * c.d, c.kvh * c.d}
			w := widths[0] + widths[1] + widths[2]
			v := randomFloats(r, c.b*c.l*w, 1, 0)
			mlxtest.Do(t, func() error {
				var x *mlx.Array
				if c.transposed {
					x = mlx.Transpose(mlx.FromSlice(v, c.b, w, c.l), 0, 2, 1)
				} else {
					x = mlx.Add(mlx.FromSlice(v, c.b, c.l, w), mlx.Scalar(0, mlx.Float32)) // a lazy input
				}
				heads := []int{c.h, c.kvh, c.kvh}
				parts := mlx.SplitAt(x, []int{widths[0], widths[0] + widths[1]}, -1)
				var specs []mlx.Strided
				off := 0
				for i, n := range heads {
					specs = append(specs, mlx.Strided{Shape: []int{c.b, n, c.l, c.d}, Strides: []int{c.l * w, c.d, w, 1}, Offset: off})
					off += widths[i]
				}
				got := mlx.Views(x, specs...)
				for i, n := range heads {
					want := mlx.Transpose(mlx.Reshape(parts[i], c.b, c.l, n, -1), 0, 2, 1, 3)
					for j, pair := range [][2]*mlx.Array{{want, got[i]}, {mlx.Exp(want), mlx.Exp(got[i])},
						{mlx.Reshape(mlx.Transpose(want, 0, 2, 1, 3), c.b, c.l, -1), mlx.Reshape(mlx.Transpose(got[i], 0, 2, 1, 3), c.b, c.l, -1)}} {
						if !slices.Equal(pair[1].Shape(), pair[0].Shape()) {
							return fmt.Errorf("view %d/%d: shape %v, want %v", i, j, pair[1].Shape(), pair[0].Shape())
						}
						a, err := pair[0].Bytes()
						if err != nil {
							return err
						}
						b, err := pair[1].Bytes()
						if err != nil {
							return err
						}
						if !slices.Equal(a, b) {
							return fmt.Errorf("view %d/%d differs", i, j)
						}
					}
				}
				return nil
			})
		})
	}
	t.Run("errors", func(t *testing.T) {
		mlxtest.Do(t, func() error {
			x := mlx.FromSlice(make([]float32, 12), 3, 4)
			for _, bad := range [][]mlx.Strided{
				{{Shape: []int{3, 5}, Strides: []int{4, 1}}},                                       // past the end
				{{Shape: []int{2, 2}, Strides: []int{4, -1}, Offset: 3}},                           // negative stride
				{{Shape: []int{2}, Strides: []int{1}}, {Shape: []int{2, 2}, Strides: []int{1, 1}}}, // dims differ
				{},
			} {
				out := mlx.Views(x, bad...)
				if len(out) == 0 || out[0].Err() == nil {
					return fmt.Errorf("views %v: no error", bad)
				}
			}
			return nil
		})
	})
}
