// Package mlxtest loads MLX for tests the way every command does: from the
// pack native.Resolve finds (never downloading). A missing pack skips on a
// developer machine and fails in CI (internal/testenv). It lives apart from
// testenv because native's own tests use testenv and native cannot be
// imported back into them.
package mlxtest

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/mlxgo/mlxgo/internal/testenv"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/native"
)

var (
	loadOnce sync.Once
	noPack   error
	loadErr  error
)

// Need loads the shim once per test binary.
func Need(t testing.TB) {
	t.Helper()
	loadOnce.Do(func() {
		p, err := native.Resolve(context.Background(), native.Options{NoDownload: true})
		if err != nil {
			noPack = err
			return
		}
		if _, loadErr = mlx.LoadPack(p); loadErr != nil {
			return
		}
		loadErr = mlx.Do(func() error { return mlx.SetCPUKernels(Kernels(), Threads(), "") })
	})
	if noPack != nil {
		testenv.Missing(t, "native pack ("+noPack.Error()+")", "make native-install (or set MLXGO_NATIVE_DIR)")
	}
	if loadErr != nil {
		t.Fatalf("cannot load the shim: %v", loadErr)
	}
}

// Kernels is the CPU kernel set tests run with: $MLXGO_KERNELS, else
// mlxgo's, as the commands default to. make test runs the suite with both.
func Kernels() string {
	if k := os.Getenv("MLXGO_KERNELS"); k != "" {
		return k
	}
	return mlx.KernelsMLXGO
}

// Threads is the kernels' thread count in tests: the physical cores.
func Threads() int { return max(1, native.CPUFeatures().PhysicalCores) }

// Do runs f on the executor inside a scope that is closed afterwards, and
// fails t on an error.
func Do(t testing.TB, f func() error) {
	t.Helper()
	Need(t)
	err := mlx.Do(func() error {
		s := mlx.NewScope()
		defer s.Close()
		return f()
	})
	if err != nil {
		t.Fatal(err)
	}
}
