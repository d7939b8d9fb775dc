package mlx_test

import (
	"math"
	"slices"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/mlx"
)

// roundTrip copies data into MLX and back out unchanged.
func roundTrip[T mlx.Element](t *testing.T, data []T, dt mlx.Dtype) {
	t.Helper()
	mlxtest.Do(t, func() error {
		a := mlx.FromSliceAs(data, dt, 2, len(data)/2)
		if a.Dtype() != dt {
			t.Errorf("dtype %v, want %v", a.Dtype(), dt)
		}
		got, err := mlx.ToSlice[T](a)
		if err != nil {
			return err
		}
		if !slices.Equal(got, data) {
			t.Errorf("round trip changed the data:\n got %v\nwant %v", got, data)
		}
		// A transposed view reads back row-major, transposed.
		tr, err := mlx.ToSlice[T](mlx.Transpose(a))
		if err != nil {
			return err
		}
		half := len(data) / 2
		for i := 0; i < half; i++ {
			if tr[2*i] != data[i] || tr[2*i+1] != data[half+i] {
				t.Fatalf("transposed read %v of %v", tr, data)
			}
		}
		b, err := a.Bytes()
		if err != nil {
			return err
		}
		if len(b) != len(data)*dt.Size() {
			t.Errorf("Bytes gave %d bytes, want %d", len(b), len(data)*dt.Size())
		}
		return nil
	})
}

func TestDtypeRoundTrips(t *testing.T) {
	mlxtest.Need(t)
	t.Run("float32", func(t *testing.T) {
		roundTrip(t, []float32{0, -0.5, 3.25, float32(math.Inf(1)), math.MaxFloat32, math.SmallestNonzeroFloat32}, mlx.Float32)
	})
	t.Run("float16 bits", func(t *testing.T) { roundTrip(t, []uint16{0, 0x3c00, 0xc000, 0x7bff, 0x0001, 0x8400}, mlx.Float16) })
	t.Run("bfloat16 bits", func(t *testing.T) { roundTrip(t, []uint16{0, 0x3f80, 0xc000, 0x7f7f, 0x0001, 0x8080}, mlx.BFloat16) })
	t.Run("int32", func(t *testing.T) { roundTrip(t, []int32{0, -1, math.MaxInt32, math.MinInt32}, mlx.Int32) })
	t.Run("uint32", func(t *testing.T) { roundTrip(t, []uint32{0, 1, math.MaxUint32, 1 << 31}, mlx.Uint32) })
	t.Run("uint8", func(t *testing.T) { roundTrip(t, []uint8{0, 1, 127, 255}, mlx.Uint8) })
	t.Run("bool", func(t *testing.T) { roundTrip(t, []bool{true, false, false, true}, mlx.Bool) })
	t.Run("int64", func(t *testing.T) { roundTrip(t, []int64{0, -1, math.MaxInt64, math.MinInt64}, mlx.Int64) })
	t.Run("complex64", func(t *testing.T) { roundTrip(t, []complex64{1 + 2i, -3i, 0, 4}, mlx.Complex64) })
}

// allHalfBits is every 16-bit pattern, for exhaustive half-precision checks.
func allHalfBits() []uint16 {
	v := make([]uint16, 1<<16)
	for i := range v {
		v[i] = uint16(i)
	}
	return v
}

// TestHalfWidening compares Go's float16 and bfloat16 → float32 with MLX's
// astype over all 65536 bit patterns.
func TestHalfWidening(t *testing.T) {
	for _, tc := range []struct {
		dt  mlx.Dtype
		ref func(uint16) float32
	}{{mlx.Float16, mlx.Float16ToFloat32}, {mlx.BFloat16, mlx.BFloat16ToFloat32}} {
		t.Run(tc.dt.String(), func(t *testing.T) {
			bits := allHalfBits()
			mlxtest.Do(t, func() error {
				got, err := mlx.AsType(mlx.FromSliceAs(bits, tc.dt), mlx.Float32).Float32s()
				if err != nil {
					return err
				}
				bad := 0
				for i, h := range bits {
					want := tc.ref(h)
					if math.Float32bits(got[i]) != math.Float32bits(want) && !(isNaN(got[i]) && isNaN(want)) {
						if bad++; bad < 5 {
							t.Errorf("%s 0x%04x: mlx %v, go %v", tc.dt, h, got[i], want)
						}
					}
				}
				if bad > 0 {
					t.Errorf("%d of 65536 patterns differ", bad)
				}
				return nil
			})
		})
	}
}

func isNaN(f float32) bool { return f != f }

// narrowingInputs are float32 values that exercise rounding: ties, the
// largest finite halves, overflow, subnormals and underflow.
func narrowingInputs() []float32 {
	v := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 0.1, 65504, 65519.99, 65520, 1e6, -1e6,
		6.1e-5, 5.96e-8, 2.98e-8, 2.99e-8, 1e-10, float32(math.Inf(1)), float32(math.Inf(-1)),
		1.00048828125, 1.00146484375, 3.3895314e38, math.MaxFloat32}
	for _, seed := range []uint64{1, 2, 3} {
		for _, x := range lcg(seed, 2000, 1) {
			v = append(v, x, x*1e4, x*1e-6, x*1e38)
		}
	}
	// Exact ties of bfloat16 and float16 at several exponents.
	for e := -20; e < 20; e++ {
		base := math.Ldexp(1, e)
		v = append(v, float32(base*(1+1.0/256)), float32(base*(1+3.0/256)), float32(base*(1+1.0/2048)), float32(base*(1+3.0/2048)))
	}
	return v
}

// TestHalfNarrowing compares Go's float32 → float16/bfloat16 rounding with
// MLX's astype, bit for bit.
func TestHalfNarrowing(t *testing.T) {
	in := narrowingInputs()
	for _, tc := range []struct {
		dt  mlx.Dtype
		ref func(float32) uint16
	}{{mlx.Float16, mlx.Float32ToFloat16}, {mlx.BFloat16, mlx.Float32ToBFloat16}} {
		t.Run(tc.dt.String(), func(t *testing.T) {
			mlxtest.Do(t, func() error {
				got, err := mlx.ToSlice[uint16](mlx.AsType(mlx.FromSlice(in), tc.dt))
				if err != nil {
					return err
				}
				bad := 0
				for i, x := range in {
					if want := tc.ref(x); got[i] != want {
						if bad++; bad < 5 {
							t.Errorf("%v → %s: mlx 0x%04x, go 0x%04x", x, tc.dt, got[i], want)
						}
					}
				}
				if bad > 0 {
					t.Errorf("%d of %d values differ", bad, len(in))
				}
				return nil
			})
		})
	}
}

func TestParseDtype(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want mlx.Dtype
	}{{"BF16", mlx.BFloat16}, {"bfloat16", mlx.BFloat16}, {"F32", mlx.Float32}, {"I64", mlx.Int64}, {"bool", mlx.Bool}, {"U8", mlx.Uint8}} {
		if got, err := mlx.ParseDtype(tc.in); err != nil || got != tc.want {
			t.Errorf("ParseDtype(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	if _, err := mlx.ParseDtype("F8_E4M3"); err == nil {
		t.Error("ParseDtype of an unknown name did not fail")
	}
	if mlx.Dtype(99).Size() != 0 || mlx.Dtype(99).String() != "dtype(99)" {
		t.Error("an invalid dtype has a size or a name")
	}
}
