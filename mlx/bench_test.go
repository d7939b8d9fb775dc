package mlx_test

import (
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/mlx"
)

// BenchmarkOpCall is the cost of recording one lazy op through the binding
// (purego call, thread check, handle wrap, Free): the per-op overhead a
// model's forward pass pays on top of MLX's own graph building.
func BenchmarkOpCall(b *testing.B) {
	mlxtest.Need(b)
	err := mlx.Do(func() error {
		x := arr(sv)
		defer x.Free()
		b.ResetTimer()
		for range b.N {
			mlx.Add(x, x).Free()
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkOpCallFloatArgs is BenchmarkOpCall for an op with float
// arguments (purego's slower path).
func BenchmarkOpCallFloatArgs(b *testing.B) {
	mlxtest.Need(b)
	err := mlx.Do(func() error {
		x := arr(sv, 1, 4)
		defer x.Free()
		b.ResetTimer()
		for range b.N {
			mlx.RMSNorm(x, nil, 1e-5).Free()
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkDo is the round trip of an empty job through the executor.
func BenchmarkDo(b *testing.B) {
	mlxtest.Need(b)
	for range b.N {
		if err := mlx.Do(func() error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkShimCallFloor is the cheapest shim call (a counter read): the
// purego floor under every op.
func BenchmarkShimCallFloor(b *testing.B) {
	mlxtest.Need(b)
	for range b.N {
		mlx.LiveArrays()
	}
}
