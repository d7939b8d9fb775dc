package mlx_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/mlx"
)

func TestErrors(t *testing.T) {
	mlxtest.Need(t)
	tests := []struct {
		name    string
		make    func() *mlx.Array
		status  mlx.Status
		msgPart string // from MLX's or the shim's message
	}{
		{"matmul shapes", func() *mlx.Array { return mlx.Matmul(arr(m23, 2, 3), arr(n23, 2, 3)) }, mlx.StatusMLX, "[matmul]"},
		{"reshape size", func() *mlx.Array { return mlx.Reshape(arr(m23, 2, 3), 4, 2) }, mlx.StatusMLX, "[reshape]"},
		{"broadcast", func() *mlx.Array { return mlx.Add(arr(m23, 2, 3), arr(sv)) }, mlx.StatusMLX, "broadcast"},
		{"quantize group", func() *mlx.Array {
			w, _, _ := mlx.Quantize(arr(m23, 2, 3), mlx.Quant{GroupSize: 32, Bits: 4})
			return w
		}, mlx.StatusMLX, "quantize"},
		{"host data size", func() *mlx.Array { return mlx.FromSlice(m23, 4, 2) }, mlx.StatusArg, "host data is 24 bytes"},
		{"bad dtype", func() *mlx.Array { return mlx.AsType(arr(sv), mlx.Dtype(99)) }, mlx.StatusArg, "unknown dtype"},
		{"nil input", func() *mlx.Array { return mlx.Exp(nil) }, mlx.StatusArg, "nil array"},
		{"too few split outputs", func() *mlx.Array { return mlx.Split(arr(sv), 3, 0)[0] }, mlx.StatusMLX, "split"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mlxtest.Do(t, func() error {
				a := tc.make()
				err := a.Err()
				var me *mlx.Error
				if !errors.As(err, &me) {
					t.Fatalf("err = %v (%T), want *mlx.Error", err, err)
				}
				if me.Status != tc.status || !strings.Contains(me.Msg, tc.msgPart) {
					t.Errorf("got status %d %q, want status %d containing %q", me.Status, me.Msg, tc.status, tc.msgPart)
				}
				// The error flows through later ops and out of Eval and reads.
				if got := mlx.Exp(mlx.Add(a, a)).Err(); got != err {
					t.Errorf("downstream op error %v, want the original", got)
				}
				if got := mlx.Eval(a); got != err {
					t.Errorf("Eval error %v, want the original", got)
				}
				if _, got := a.Float32s(); got != err {
					t.Errorf("Float32s error %v, want the original", got)
				}
				if a.Shape() != nil {
					t.Errorf("errored array has shape %v", a.Shape())
				}
				// MLX keeps working after the failure.
				v, err := f32(mlx.Multiply(arr(pv), arr(pv)))
				if err != nil {
					return err
				}
				return closeTo(v, []float32{0.25, 1, 4, 16}, 0, 0)
			})
		})
	}
}

func TestUseAfterFree(t *testing.T) {
	mlxtest.Do(t, func() error {
		a := arr(sv)
		a.Free()
		a.Free() // twice is fine
		if err := mlx.Exp(a).Err(); !errors.Is(err, mlx.ErrFreed) {
			t.Errorf("op on a freed array: %v, want ErrFreed", err)
		}
		if err := a.Err(); !errors.Is(err, mlx.ErrFreed) {
			t.Errorf("Err of a freed array: %v", err)
		}
		return nil
	})
}

func TestReadErrors(t *testing.T) {
	mlxtest.Do(t, func() error {
		if _, err := mlx.ToSlice[int32](arr(sv)); err == nil || !strings.Contains(err.Error(), "cannot read float32") {
			t.Errorf("ToSlice[int32] of float32: %v", err)
		}
		if _, err := arr(sv).Item(); err == nil {
			t.Error("Item of a 4-element array did not fail")
		}
		if v, err := mlx.Sum(arr(pv), nil, false).Item(); err != nil || v != 7.5 {
			t.Errorf("Item of sum = %v, %v; want 7.5", v, err)
		}
		return nil
	})
}

// TestWrongThread calls ops outside Do: the shim refuses them instead of
// letting MLX create a second set of per-thread state, and nothing leaks.
func TestWrongThread(t *testing.T) {
	mlxtest.Need(t)
	before := mlx.LiveArrays()
	a := mlx.FromSlice(sv)
	if !errors.Is(a.Err(), mlx.ErrWrongThread) {
		t.Fatalf("FromSlice off the executor: %v, want ErrWrongThread", a.Err())
	}
	if err := mlx.Eval(a); !errors.Is(err, mlx.ErrWrongThread) {
		t.Errorf("Eval: %v", err)
	}
	if _, err := mlx.Memory(); !errors.Is(err, mlx.ErrWrongThread) {
		t.Errorf("Memory off the executor: %v", err)
	}
	var made *mlx.Array
	if err := mlx.Do(func() error { made = arr(sv); return made.Err() }); err != nil {
		t.Fatal(err)
	}
	// Made on the executor, used off it.
	if err := mlx.Exp(made).Err(); !errors.Is(err, mlx.ErrWrongThread) {
		t.Errorf("Exp off the executor: %v", err)
	}
	made.Free() // Free works from any goroutine
	if got := mlx.LiveArrays(); got != before {
		t.Errorf("live arrays %d, want %d", got, before)
	}
	s := mlx.NewScope() // detached off the executor: tracks nothing, closes quietly
	s.Close()
}
