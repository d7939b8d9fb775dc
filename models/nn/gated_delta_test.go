package nn

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/mlx"
)

// On a GPU the Gated DeltaNet's two compiled functions come from the shim
// (mlx.ComputeG, mlx.GatedDeltaStep), which builds mlx-lm's graph in C++;
// on the CPU they are built here from ops. The shim's graph, run
// uncompiled on the CPU, must give the same bits as the ops here: the two
// describe one computation, and a wrong operand or op in either shows.
func TestGatedDeltaShimGraphs(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	floats := func(n int, scale float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32((2*r.Float64() - 1) * scale)
		}
		return v
	}
	const b, h, dk, dv = 2, 3, 16, 8
	for _, dt := range []mlx.Dtype{mlx.Float32, mlx.BFloat16} {
		mlxtest.Do(t, func() error {
			as := func(v []float32, shape ...int) *mlx.Array { return mlx.AsType(mlx.FromSlice(v, shape...), dt) }
			a := floats(b*h, 30)
			a[0], a[1], a[2] = float32(math.Inf(1)), float32(math.Inf(-1)), 0
			aLog, dtBias := mlx.FromSlice(floats(h, 2), h), as(floats(h, 1), h)
			aa := as(a, b, h)
			if err := same(t, "compute_g", mlx.ComputeG(aLog, aa, dtBias), computeG(aLog, aa, dtBias)); err != nil {
				return err
			}
			q, k, v := as(floats(b*h*dk, 1), b, h, dk), as(floats(b*h*dk, 1), b, h, dk), as(floats(b*h*dv, 1), b, h, dv)
			g := mlx.Exp(mlx.FromSlice(floats(b*h, 1), b, h))
			beta := mlx.Sigmoid(as(floats(b*h, 3), b, h))
			state := mlx.FromSlice(floats(b*h*dv*dk, 1), b, h, dv, dk)
			y1, s1 := mlx.GatedDeltaStep(q, k, v, g, beta, state)
			y2, s2 := gatedDeltaStep(q, k, v, g, beta, state)
			if err := same(t, "step y", y1, y2); err != nil {
				return err
			}
			return same(t, "step state", s1, s2)
		})
	}
}

func same(t *testing.T, what string, got, want *mlx.Array) error {
	t.Helper()
	gb, err := got.Bytes()
	if err != nil {
		return err
	}
	wb, err := want.Bytes()
	if err != nil {
		return err
	}
	if got.Dtype() != want.Dtype() || len(gb) != len(wb) {
		t.Errorf("%s: %s %d bytes, want %s %d", what, got.Dtype(), len(gb), want.Dtype(), len(wb))
		return nil
	}
	for i := range gb {
		if gb[i] != wb[i] {
			t.Errorf("%s (%s): byte %d differs", what, got.Dtype(), i)
			return nil
		}
	}
	return nil
}
