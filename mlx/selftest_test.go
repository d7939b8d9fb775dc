package mlx_test

import (
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/mlx"
)

func TestSelfTest(t *testing.T) {
	mlxtest.Need(t)
	checks := mlx.SelfTest()
	want := []string{"matmul", "softmax", "rms_norm", "rope", "scaled_dot_product_attention",
		"quantize+quantized_matmul", "argmax"}
	if len(checks) != len(want) {
		t.Fatalf("SelfTest ran %d checks, want %d", len(checks), len(want))
	}
	for i, c := range checks {
		if c.Name != want[i] {
			t.Errorf("check %d is %q, want %q", i, c.Name, want[i])
		}
		if !c.OK {
			t.Errorf("%s failed: %s (max abs err %g, tolerance %g)", c.Name, c.Detail, c.MaxAbsErr, c.Tolerance)
		}
		t.Logf("%-28s ok=%v max_abs_err=%.3g tol=%g", c.Name, c.OK, c.MaxAbsErr, c.Tolerance)
	}
}

func TestInfo(t *testing.T) {
	mlxtest.Need(t)
	ri, err := mlx.Info()
	if err != nil {
		t.Fatal(err)
	}
	if ri.Version != "0.32.4" {
		t.Errorf("version %q", ri.Version)
	}
	if len(ri.Devices) != 2 || ri.Devices[0].Type != "cpu" || !ri.Devices[0].Available {
		t.Errorf("devices %+v: want cpu available first", ri.Devices)
	}
	if ri.DefaultDevice == "" {
		t.Error("no default device")
	}
	t.Logf("%+v", ri)
}
