package kv_test

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

// positions makes keys [1, 1, n, d] whose every element is its position
// (start, start+1, ...), so a fetched cache shows which tokens it holds.
func positions(start, n, d int) *mlx.Array {
	v := make([]float32, n*d)
	for i := range v {
		v[i] = float32(start + i/d)
	}
	return mlx.FromSlice(v, 1, 1, n, d)
}

// heldPositions reads back the position held in each slot of [1,1,L,d].
func heldPositions(a *mlx.Array) ([]int, error) {
	v, err := a.Float32s()
	if err != nil {
		return nil, err
	}
	d := a.Dim(3)
	out := make([]int, a.Dim(2))
	for i := range out {
		out[i] = int(v[i*d])
	}
	return out, nil
}
