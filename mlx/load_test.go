package mlx_test

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/mlx"
)

func itoa(i int) string     { return strconv.Itoa(i) }
func ftoa(f float32) string { return strconv.FormatFloat(float64(f), 'g', -1, 32) }

func TestLoadIsIdempotent(t *testing.T) {
	mlxtest.Need(t)
	if !mlx.Loaded() {
		t.Fatal("Loaded() is false after Load")
	}
	if v := mlx.Version(); v != "0.32.4" {
		t.Errorf("Version() = %q, want 0.32.4 (the pinned wheel)", v)
	}
	// A second Load with another path must refuse rather than mix two MLXs.
	err := mlx.Load(filepath.Join(t.TempDir(), "libmlxgo.so"))
	if err == nil || !strings.Contains(err.Error(), "already loaded") {
		t.Errorf("Load of a second path: err = %v, want 'already loaded'", err)
	}
}
