package nn

import (
	"slices"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/mlx"
)

// Split's parts must be Contiguous copies with the slice's numbers: a view
// would give the same numbers on the CPU, but on a GPU it reaches MLX's
// sorted gather_mm with the wrong expert stride (Weights.Split).
func TestSplitPartContiguous(t *testing.T) {
	mlxtest.Do(t, func() error {
		const e, rows, cols = 3, 4, 5
		v := make([]float32, e*rows*cols)
		for i := range v {
			v[i] = float32(i)
		}
		a := mlx.FromSlice(v, e, rows, cols)
		for i := range 2 {
			part := splitPart(a, 1, i, rows/2)
			op, err := part.OpName()
			if err != nil {
				return err
			}
			if op != "Contiguous" {
				t.Errorf("part %d: op %q, want Contiguous", i, op)
			}
			if got := part.Shape(); !slices.Equal(got, []int{e, rows / 2, cols}) {
				t.Errorf("part %d: shape %v", i, got)
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
				t.Errorf("part %d: %v, want %v", i, got, want)
			}
		}
		return nil
	})
}
