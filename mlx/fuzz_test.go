package mlx_test

import (
	"bytes"
	"math"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/mlx"
)

// FuzzFromBytes feeds arbitrary bytes, dtype codes and shapes across the
// ABI: the shim must either make exactly that array or refuse with an error,
// never read past the buffer or crash.
func FuzzFromBytes(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4}, uint8(mlx.Float32), int16(1), int16(1))
	f.Add([]byte{1, 2, 3, 4}, uint8(mlx.BFloat16), int16(2), int16(1))
	f.Add([]byte{}, uint8(mlx.Int64), int16(0), int16(5))
	f.Add([]byte{1}, uint8(200), int16(1), int16(1))
	f.Add([]byte{1, 2}, uint8(mlx.Uint8), int16(-1), int16(-2))
	f.Fuzz(func(t *testing.T, data []byte, code uint8, d0, d1 int16) {
		dt := mlx.Dtype(code)
		mlxtest.Do(t, func() error {
			a := mlx.FromBytes(data, dt, int(d0), int(d1))
			n := int(d0) * int(d1) * dt.Size()
			valid := dt.Size() > 0 && d0 >= 0 && d1 >= 0 && n == len(data)
			if err := a.Err(); err != nil {
				if valid {
					t.Fatalf("FromBytes(%d bytes, %v, [%d %d]) failed: %v", len(data), dt, d0, d1, err)
				}
				return nil
			}
			if !valid {
				t.Fatalf("FromBytes(%d bytes, %v, [%d %d]) succeeded", len(data), dt, d0, d1)
			}
			got, err := a.Bytes()
			if err != nil {
				return err
			}
			if !bytes.Equal(got, data) && !(len(got) == 0 && len(data) == 0) {
				t.Fatalf("bytes changed: %x → %x", data, got)
			}
			return nil
		})
	})
}

// FuzzParseDtype: any text either parses to a dtype whose name parses back
// to it, or is refused.
func FuzzParseDtype(f *testing.F) {
	for _, s := range []string{"BF16", "float32", "", "F8_E5M2", "complex64", "C64"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := mlx.ParseDtype(s)
		if err != nil {
			return
		}
		if again, err := mlx.ParseDtype(d.String()); err != nil || again != d {
			t.Fatalf("%q → %v → %v, %v", s, d, again, err)
		}
	})
}

// FuzzHalfRounding checks the Go conversions' rounding on any float32:
// narrowing is idempotent and lands within half a unit of the last place.
func FuzzHalfRounding(f *testing.F) {
	for _, v := range []float32{0, 1, 65504, 65520, 5.96e-8, 2.98e-8, 1e-10, 3.4e38} {
		f.Add(math.Float32bits(v))
	}
	f.Fuzz(func(t *testing.T, bits uint32) {
		x := math.Float32frombits(bits)
		if x != x {
			if h := mlx.Float32ToFloat16(x); mlx.Float16ToFloat32(h) == mlx.Float16ToFloat32(h) {
				t.Fatalf("NaN narrowed to non-NaN half 0x%04x", h)
			}
			return
		}
		for _, c := range []struct {
			name     string
			narrow   func(float32) uint16
			widen    func(uint16) float32
			mantissa int     // explicit mantissa bits
			minExp   int     // smallest normal exponent
			maxVal   float64 // largest finite value
		}{
			{"float16", mlx.Float32ToFloat16, mlx.Float16ToFloat32, 10, -14, 65504},
			{"bfloat16", mlx.Float32ToBFloat16, mlx.BFloat16ToFloat32, 7, -126, 3.3895313892515355e38},
		} {
			h := c.narrow(x)
			back := c.widen(h)
			if c.narrow(back) != h {
				t.Fatalf("%s: %v → 0x%04x → %v → 0x%04x: not idempotent", c.name, x, h, back, c.narrow(back))
			}
			ax := math.Abs(float64(x))
			if math.IsInf(float64(back), 0) {
				// Overflow only past the largest finite value plus half a unit.
				_, e := math.Frexp(c.maxVal)
				if ax < c.maxVal+math.Ldexp(0.5, e-1-c.mantissa) && !math.IsInf(float64(x), 0) {
					t.Fatalf("%s: %v overflowed to %v", c.name, x, back)
				}
				continue
			}
			_, e := math.Frexp(ax)
			e = max(e-1, c.minExp)
			ulp := math.Ldexp(1, e-c.mantissa)
			if d := math.Abs(float64(back) - float64(x)); d > ulp/2 {
				t.Fatalf("%s: %v → %v is %g away, more than half an ulp (%g)", c.name, x, back, d, ulp/2)
			}
		}
	})
}
