package mlx_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"

	"github.com/mlxgo/mlxgo/internal/testenv"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/native"
)

var (
	loadOnce sync.Once
	loadErr  error
	noPack   error
)

// needMLX loads the shim from the native pack that native.Resolve finds
// (MLXGO_NATIVE_DIR, or the user cache after `make native-install`); a
// missing pack skips on a developer machine and fails in CI.
func needMLX(t testing.TB) {
	t.Helper()
	loadOnce.Do(func() {
		p, err := native.Resolve(context.Background(), native.Options{NoDownload: true})
		if err != nil {
			noPack = err
			return
		}
		loadErr = mlx.Load(p.ShimPath())
	})
	if noPack != nil {
		testenv.Missing(t, "native pack ("+noPack.Error()+")", "make native-install (or set MLXGO_NATIVE_DIR)")
	}
	if loadErr != nil {
		t.Fatalf("cannot load the shim: %v", loadErr)
	}
}

// do runs f on the executor inside a scope that is closed afterwards, and
// fails t on an error.
func do(t testing.TB, f func() error) {
	t.Helper()
	needMLX(t)
	err := mlx.Do(func() error {
		s := mlx.NewScope()
		defer s.Close()
		return f()
	})
	if err != nil {
		t.Fatal(err)
	}
}

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
