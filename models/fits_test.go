package models

import (
	"errors"
	"strings"
	"testing"
)

// TestCheckFits: weights larger than the GPU's free memory are refused with
// both sizes and what to do; a model that fits passes.
func TestCheckFits(t *testing.T) {
	if err := checkFits(16<<30, 140<<30, "NVIDIA H200"); err != nil {
		t.Errorf("16 GiB on 140 GiB free: %v", err)
	}
	err := checkFits(150<<30, 139<<30, "NVIDIA H200")
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("150 GiB on 139 GiB free: %v, want ErrTooLarge", err)
	}
	for _, want := range []string{"150.0 GiB", "139.0 GiB", "NVIDIA H200", "MLXGO_DEVICE=cpu"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}
