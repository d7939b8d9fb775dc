package nn

import (
	"slices"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/mlx"
)

// Split's parts are the same numbers either way; what differs is the layout
// MLX is handed, which on a GPU picks the kernel (a view of gate_up_proj
// reaches MLX's sorted gather_mm with the wrong expert stride). So a part
// asked for contiguous must be a Contiguous copy, and one asked for as a
// view must stay the Slice itself.
func TestSplitPartLayout(t *testing.T) {
	mlxtest.Do(t, func() error {
		const e, rows, cols = 3, 4, 5
		v := make([]float32, e*rows*cols)
		for i := range v {
			v[i] = float32(i)
		}
		a := mlx.FromSlice(v, e, rows, cols)
		for _, contiguous := range []bool{false, true} {
			for i := range 2 {
				part := splitPart(a, 1, i, rows/2, contiguous)
				op, err := part.OpName()
				if err != nil {
					return err
				}
				if want := map[bool]string{false: "Slice", true: "Contiguous"}[contiguous]; op != want {
					t.Errorf("contiguous=%v part %d: op %q, want %q", contiguous, i, op, want)
				}
				if got := part.Shape(); !slices.Equal(got, []int{e, rows / 2, cols}) {
					t.Errorf("contiguous=%v part %d: shape %v", contiguous, i, got)
				}
				got, err := part.Float32s()
				if err != nil {
					return err
				}
				var want []float32
				for x := range e {
					for r := i * rows / 2; r < (i+1)*rows/2; r++ {
						want = append(want, v[(x*rows+r)*cols:(x*rows+r+1)*cols]...)
					}
				}
				if !slices.Equal(got, want) {
					t.Errorf("contiguous=%v part %d: %v, want %v", contiguous, i, got, want)
				}
			}
		}
		return nil
	})
}
