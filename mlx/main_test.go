package mlx_test

import (
	"errors"
	"math"

	"github.com/mlxgo/mlxgo/mlx"
)

// f32 evaluates a as float32 values.
func f32(a *mlx.Array) ([]float32, error) { return a.Float32s() }

// closeTo compares with an absolute plus relative tolerance.
func closeTo(got, want []float32, atol, rtol float64) error {
	if len(got) != len(want) {
		return errors.New("length mismatch")
	}
	for i := range got {
		g, w := float64(got[i]), float64(want[i])
		if math.IsNaN(g) != math.IsNaN(w) || math.Abs(g-w) > atol+rtol*math.Abs(w) {
			return &mismatch{i, got[i], want[i]}
		}
	}
	return nil
}

type mismatch struct {
	i         int
	got, want float32
}

func (m *mismatch) Error() string {
	return "element " + itoa(m.i) + ": got " + ftoa(m.got) + ", want " + ftoa(m.want)
}
