package models_test

import (
	"context"
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

// needMLX loads the shim from the pack native.Resolve finds (as mlx's own
// tests do); a missing pack skips on a developer machine and fails in CI.
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

// do runs f on the executor inside a scope closed afterwards.
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
