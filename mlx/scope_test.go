package mlx_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/mlx"
)

// TestScopes counts the shim's live handles around scopes: whatever a
// scope does not keep is gone when it closes.
func TestScopes(t *testing.T) {
	mlxtest.Need(t)
	tests := []struct {
		name string
		run  func(t *testing.T) (kept []*mlx.Array)
	}{
		{"frees all but kept", func(t *testing.T) []*mlx.Array {
			s := mlx.NewScope()
			defer s.Close()
			x := arr(sv)
			y := mlx.Exp(mlx.Add(x, x))
			parts := mlx.Split(y, 2, 0)
			s.Keep(parts[1])
			return []*mlx.Array{parts[1]}
		}},
		{"nested keep moves to the parent", func(t *testing.T) []*mlx.Array {
			outer := mlx.NewScope()
			var inner *mlx.Array
			func() {
				s := mlx.NewScope()
				defer s.Close()
				inner = mlx.Square(arr(pv))
				s.Keep(inner)
			}()
			if err := inner.Err(); err != nil {
				t.Errorf("kept array freed by the inner scope: %v", err)
			}
			outer.Close() // owns inner now
			if inner.Err() == nil {
				t.Error("the outer scope did not free what the inner one kept")
			}
			return nil
		}},
		{"closing the outer closes an open inner", func(t *testing.T) []*mlx.Array {
			outer := mlx.NewScope()
			_ = arr(sv)
			inner := mlx.NewScope()
			_ = arr(pv)
			_ = inner // never closed by hand
			outer.Close()
			inner.Close() // a no-op now
			return nil
		}},
		{"errors and explicit frees", func(t *testing.T) []*mlx.Array {
			s := mlx.NewScope()
			defer s.Close()
			a := arr(sv)
			a.Free() // freed early: Close must skip it
			_ = mlx.Matmul(arr(sv), arr(m23, 2, 3))
			return nil
		}},
		{"quantize results", func(t *testing.T) []*mlx.Array {
			s := mlx.NewScope()
			defer s.Close()
			w, sc, b := mlx.Quantize(mlx.Ones(mlx.Float32, 4, 64), mlx.Quant{GroupSize: 64, Bits: 8})
			s.Keep(w, sc, b)
			return []*mlx.Array{w, sc, b}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var before, during, after int64
			err := mlx.Do(func() error {
				before = mlx.LiveArrays()
				kept := tc.run(t)
				during = mlx.LiveArrays()
				for _, k := range kept {
					if err := k.Err(); err != nil {
						t.Errorf("a kept array was freed: %v", err)
					}
					if err := mlx.Eval(k); err != nil {
						return err
					}
					k.Free()
				}
				if during-before != int64(len(kept)) {
					t.Errorf("%d live handles after the scope, want the %d kept", during-before, len(kept))
				}
				after = mlx.LiveArrays()
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if after != before {
				t.Errorf("leak: %d live handles before, %d after", before, after)
			}
		})
	}
}

// TestDetach: a detached array survives its scope and every enclosing one,
// and Free releases it.
func TestDetach(t *testing.T) {
	mlxtest.Need(t)
	err := mlx.Do(func() error {
		before := mlx.LiveArrays()
		var kept, dropped *mlx.Array
		outer := mlx.NewScope()
		func() {
			s := mlx.NewScope()
			defer s.Close()
			kept = mlx.Square(arr(pv))
			dropped = mlx.Square(arr(pv))
			mlx.Detach(kept)
			s.Keep(kept) // a no-op now: s no longer owns it
		}()
		outer.Close()
		if err := kept.Err(); err != nil {
			t.Errorf("detached array freed by a scope: %v", err)
		}
		if dropped.Err() == nil {
			t.Error("the scope did not free the array that was not detached")
		}
		if got := mlx.LiveArrays(); got != before+1 {
			t.Errorf("%d live arrays, want %d (the detached one)", got, before+1)
		}
		kept.Free()
		if got := mlx.LiveArrays(); got != before {
			t.Errorf("%d live arrays after Free, want %d", got, before)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestErrorArray: an error made outside MLX travels through ops.
func TestErrorArray(t *testing.T) {
	mlxtest.Need(t)
	err := mlx.Do(func() error {
		bad := mlx.ErrorArray(errors.New("wrong cache count"))
		y := mlx.Add(bad, arr(sv))
		if err := mlx.Eval(y); err == nil || !strings.Contains(err.Error(), "wrong cache count") {
			t.Errorf("eval of an op on an error array: %v", err)
		}
		if mlx.ErrorArray(nil).Err() == nil {
			t.Error("ErrorArray(nil) carries no error")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
