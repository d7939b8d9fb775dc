package server

import (
	"strings"
	"testing"

	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models"
)

// stubModel is a models.Model that is never run: WithBatch only looks at
// what it can do.
type stubModel struct{}

func (stubModel) Forward(*mlx.Array, []kv.Cache) *mlx.Array { return nil }
func (stubModel) NewCaches(kv.Options) []kv.Cache           { return nil }
func (stubModel) Info() models.Info                         { return models.Info{} }
func (stubModel) Close() error                              { return nil }

// stubRowModel can also decode rows together.
type stubRowModel struct{ stubModel }

func (stubRowModel) ForwardRows(*mlx.Array, [][]kv.Cache) *mlx.Array { return nil }

// TestWithBatch: which models can be batched, and the scheduling mechanism
// the engine picks for each.
func TestWithBatch(t *testing.T) {
	cache := NewPromptCache(1 << 20)
	for _, tc := range []struct {
		name       string
		runner     Runner
		rows       int
		err        string // "" : no error
		scheduling string
		maxRows    int
	}{
		{"row model, 8 rows", &MLXRunner{Model: stubRowModel{}, Cache: cache}, 8, "", SchedulingContinuous, 8},
		{"row model, 1 row", &MLXRunner{Model: stubRowModel{}}, 1, "", SchedulingSerial, 1},
		{"model without rows, 1 row", &MLXRunner{Model: stubModel{}}, 1, "", SchedulingSerial, 1},
		{"model without rows, 4 rows", &MLXRunner{Model: stubModel{}}, 4, "cannot decode rows together", "", 0},
		{"not an MLX runner", serial(&scriptRunner{}), 4, "is not an MLX runner", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := Model{ID: "stub", Runner: tc.runner}
			m, err := WithBatch(in, tc.rows)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r := m.Runner.(*MLXRunner); r == tc.runner || r.Cache != tc.runner.(*MLXRunner).Cache {
				t.Errorf("WithBatch must return a new runner over the same prompt cache")
			}
			e := newEngine(m.Runner, 4, newMetrics())
			if got := e.scheduling(); got != tc.scheduling {
				t.Errorf("scheduling %q, want %q", got, tc.scheduling)
			}
			if got := e.m.maxRows.get(); got != float64(tc.maxRows) {
				t.Errorf("max rows %v, want %d", got, tc.maxRows)
			}
		})
	}
}
