package mlx_test

import (
	"math"
	"slices"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/mlx"
)

// opCase is one op computed by MLX, compared with values written down here
// or computed by a Go reference. Results are read as float32 (bools as 0/1,
// indices as their values).
type opCase struct {
	name  string
	got   func() *mlx.Array
	shape []int
	want  []float32
	tol   float64 // absolute and relative; 0 means exact
}

func runOpCases(t *testing.T, cases []opCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mlxtest.Do(t, func() error {
				a := tc.got()
				if err := a.Err(); err != nil {
					return err
				}
				if tc.shape != nil && !slices.Equal(a.Shape(), tc.shape) {
					t.Errorf("shape %v, want %v", a.Shape(), tc.shape)
				}
				got, err := f32(a)
				if err != nil {
					return err
				}
				if err := closeTo(got, tc.want, tc.tol, tc.tol); err != nil {
					t.Errorf("%v\ngot  %v\nwant %v", err, got, tc.want)
				}
				return nil
			})
		})
	}
}

// Shared inputs: small, exact in every dtype used.
var (
	m23 = []float32{1, 2, 3, 4, 5, 6}   // [[1 2 3] [4 5 6]]
	n23 = []float32{6, 5, 4, 3, 2, 1}   // [[6 5 4] [3 2 1]]
	sv  = []float32{-1.5, -0.5, 0.5, 2} // signed values
	pv  = []float32{0.5, 1, 2, 4}       // positive values
)

func arr(v []float32, shape ...int) *mlx.Array { return mlx.FromSlice(v, shape...) }

// mapf is the Go reference for a unary op, computed in float64.
func mapf(v []float32, f func(float64) float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(f(float64(x)))
	}
	return out
}

func zipf(a, b []float32, f func(x, y float64) float64) []float32 {
	out := make([]float32, len(a))
	for i := range a {
		out[i] = float32(f(float64(a[i]), float64(b[i])))
	}
	return out
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func TestUnaryOps(t *testing.T) {
	mlxtest.Need(t)
	// fp32 transcendental kernels: a few ulp, so 1e-6 relative.
	const tol = 1e-6
	u := func(name string, op func(*mlx.Array) *mlx.Array, in []float32, ref func(float64) float64) opCase {
		return opCase{name, func() *mlx.Array { return op(arr(in)) }, []int{len(in)}, mapf(in, ref), tol}
	}
	runOpCases(t, []opCase{
		u("negative", mlx.Negative, sv, func(x float64) float64 { return -x }),
		u("exp", mlx.Exp, sv, math.Exp),
		u("log", mlx.Log, pv, math.Log),
		u("log1p", mlx.Log1p, pv, math.Log1p),
		u("sqrt", mlx.Sqrt, pv, math.Sqrt),
		u("rsqrt", mlx.Rsqrt, pv, func(x float64) float64 { return 1 / math.Sqrt(x) }),
		u("square", mlx.Square, sv, func(x float64) float64 { return x * x }),
		u("abs", mlx.Abs, sv, math.Abs),
		u("sin", mlx.Sin, sv, math.Sin),
		u("cos", mlx.Cos, sv, math.Cos),
		u("tanh", mlx.Tanh, sv, math.Tanh),
		u("sigmoid", mlx.Sigmoid, sv, func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }),
		u("erf", mlx.Erf, sv, math.Erf),
		u("floor", mlx.Floor, sv, math.Floor),
		u("ceil", mlx.Ceil, sv, math.Ceil),
		u("reciprocal", mlx.Reciprocal, pv, func(x float64) float64 { return 1 / x }),
		u("stop_gradient", mlx.StopGradient, sv, func(x float64) float64 { return x }),
		{"logical_not", func() *mlx.Array { return mlx.LogicalNot(mlx.Greater(arr(sv), mlx.Scalar(0, mlx.Float32))) },
			[]int{4}, []float32{1, 1, 0, 0}, 0},
	})
}

func TestBinaryOps(t *testing.T) {
	mlxtest.Need(t)
	const tol = 1e-6
	b := func(name string, op func(a, b *mlx.Array) *mlx.Array, x, y []float32, ref func(x, y float64) float64) opCase {
		return opCase{name, func() *mlx.Array { return op(arr(x), arr(y)) }, []int{len(x)}, zipf(x, y, ref), tol}
	}
	runOpCases(t, []opCase{
		b("add", mlx.Add, sv, pv, func(x, y float64) float64 { return x + y }),
		b("subtract", mlx.Subtract, sv, pv, func(x, y float64) float64 { return x - y }),
		b("multiply", mlx.Multiply, sv, pv, func(x, y float64) float64 { return x * y }),
		b("divide", mlx.Divide, sv, pv, func(x, y float64) float64 { return x / y }),
		b("maximum", mlx.Maximum, sv, pv, math.Max),
		b("minimum", mlx.Minimum, sv, pv, math.Min),
		b("power", mlx.Power, pv, sv, math.Pow),
		// MLX's remainder takes the divisor's sign, like Python's %.
		b("remainder", mlx.Remainder, []float32{7, -7, 7.5, 3}, []float32{3, 3, -2, 4},
			func(x, y float64) float64 { return x - y*math.Floor(x/y) }),
		b("floor_divide", mlx.FloorDivide, []float32{7, -7, 7.5, 3}, []float32{3, 3, -2, 4},
			func(x, y float64) float64 { return math.Floor(x / y) }),
		b("equal", mlx.Equal, sv, []float32{-1.5, 0, 0.5, 1}, func(x, y float64) float64 { return b2f(x == y) }),
		b("not_equal", mlx.NotEqual, sv, []float32{-1.5, 0, 0.5, 1}, func(x, y float64) float64 { return b2f(x != y) }),
		b("less", mlx.Less, sv, []float32{-1.5, 0, 0.5, 1}, func(x, y float64) float64 { return b2f(x < y) }),
		b("less_equal", mlx.LessEqual, sv, []float32{-1.5, 0, 0.5, 1}, func(x, y float64) float64 { return b2f(x <= y) }),
		b("greater", mlx.Greater, sv, []float32{-1.5, 0, 0.5, 1}, func(x, y float64) float64 { return b2f(x > y) }),
		b("greater_equal", mlx.GreaterEqual, sv, []float32{-1.5, 0, 0.5, 1}, func(x, y float64) float64 { return b2f(x >= y) }),
		{"logical_and", func() *mlx.Array {
			return mlx.LogicalAnd(mlx.FromSlice([]bool{true, true, false, false}), mlx.FromSlice([]bool{true, false, true, false}))
		}, []int{4}, []float32{1, 0, 0, 0}, 0},
		{"logical_or", func() *mlx.Array {
			return mlx.LogicalOr(mlx.FromSlice([]bool{true, true, false, false}), mlx.FromSlice([]bool{true, false, true, false}))
		}, []int{4}, []float32{1, 1, 1, 0}, 0},
		{"broadcast add", func() *mlx.Array { return mlx.Add(arr(m23, 2, 3), arr([]float32{10, 20, 30})) },
			[]int{2, 3}, []float32{11, 22, 33, 14, 25, 36}, 0},
		{"matmul", func() *mlx.Array { return mlx.Matmul(arr(m23, 2, 3), arr(n23, 3, 2)) },
			// [[1 2 3] [4 5 6]] @ [[6 5] [4 3] [2 1]]
			[]int{2, 2}, []float32{20, 14, 56, 41}, 0},
		{"addmm", func() *mlx.Array {
			return mlx.Addmm(arr([]float32{1, 1, 1, 1}, 2, 2), arr(m23, 2, 3), arr(n23, 3, 2), 2, 0.5)
		}, []int{2, 2}, []float32{40.5, 28.5, 112.5, 82.5}, 0},
		{"clip both", func() *mlx.Array {
			return mlx.Clip(arr(sv), mlx.Scalar(-1, mlx.Float32), mlx.Scalar(1, mlx.Float32))
		}, []int{4}, []float32{-1, -0.5, 0.5, 1}, 0},
		{"clip low only", func() *mlx.Array { return mlx.Clip(arr(sv), mlx.Scalar(0, mlx.Float32), nil) },
			[]int{4}, []float32{0, 0, 0.5, 2}, 0},
	})
}

func TestComplexOps(t *testing.T) {
	mlxtest.Need(t)
	z := []complex64{complex(3, 4), complex(-1, 2)}
	runOpCases(t, []opCase{
		{"real", func() *mlx.Array { return mlx.Real(mlx.FromSlice(z)) }, []int{2}, []float32{3, -1}, 0},
		{"imag", func() *mlx.Array { return mlx.Imag(mlx.FromSlice(z)) }, []int{2}, []float32{4, 2}, 0},
		{"abs", func() *mlx.Array { return mlx.Abs(mlx.FromSlice(z)) }, []int{2}, []float32{5, float32(math.Sqrt(5))}, 1e-6},
	})
}
