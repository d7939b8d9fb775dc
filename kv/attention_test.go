package kv_test

import (
	"fmt"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
)

// causalRef is create_causal_mask in plain Go.
func causalRef(n, offset, window int) []bool {
	out := make([]bool, 0, n*(offset+n))
	for i := 0; i < n; i++ {
		q := offset + i
		for k := 0; k < offset+n; k++ {
			ok := q >= k
			if window > 0 {
				ok = ok && q < k+window
			}
			out = append(out, ok)
		}
	}
	return out
}

func bools(a *mlx.Array) ([]bool, error) {
	v, err := mlx.AsType(a, mlx.Int32).Int32s()
	if err != nil {
		return nil, err
	}
	out := make([]bool, len(v))
	for i := range v {
		out[i] = v[i] != 0
	}
	return out, nil
}

func TestCausalMask(t *testing.T) {
	for _, tc := range []struct{ n, offset, window int }{
		{1, 0, 0}, {4, 0, 0}, {3, 5, 0}, {6, 0, 3}, {4, 7, 4}, {1, 9, 4},
	} {
		t.Run(fmt.Sprintf("n%d-off%d-w%d", tc.n, tc.offset, tc.window), func(t *testing.T) {
			mlxtest.Do(t, func() error {
				m := kv.CausalMask(tc.n, tc.offset, tc.window)
				if got := m.Shape(); len(got) != 2 || got[0] != tc.n || got[1] != tc.offset+tc.n {
					return fmt.Errorf("shape %v", got)
				}
				got, err := bools(m)
				if err != nil {
					return err
				}
				want := causalRef(tc.n, tc.offset, tc.window)
				for i := range want {
					if got[i] != want[i] {
						return fmt.Errorf("element %d: got %v, want %v", i, got[i], want[i])
					}
				}
				return nil
			})
		})
	}
}

// TestMaskForms checks which of mlx-lm's three mask forms each cache asks
// for: the form decides which SDPA kernel runs, so it matters for L1.
func TestMaskForms(t *testing.T) {
	mlxtest.Do(t, func() error {
		kvc := kv.NewKVCache()
		kvc.Update(positions(0, 5, 4), positions(0, 5, 4))
		rot := kv.NewRotating(8, 0)
		rot.Update(positions(0, 5, 4), positions(0, 5, 4))
		defer kvc.Free()
		defer rot.Free()
		for _, tc := range []struct {
			name      string
			mask      kv.Mask
			wantForm  string
			wantShape []int
		}{
			{"no cache, one token", kv.AttentionMask(1, nil, 0), "none", nil},
			{"no cache, prefill", kv.AttentionMask(4, nil, 0), "causal", nil},
			{"no cache, prefill wider than window", kv.AttentionMask(6, nil, 4), "array", []int{6, 6}},
			{"kv cache, decode", kv.AttentionMask(1, kvc, 0), "none", nil},
			{"kv cache, prefill", kv.AttentionMask(3, kvc, 0), "causal", nil},
			{"kv cache, window always an array", kv.AttentionMask(1, kvc, 4), "array", []int{1, 6}},
			{"rotating, fits the window", kv.AttentionMask(2, rot, 0), "causal", nil},
			{"rotating, past the window", kv.AttentionMask(4, rot, 0), "array", []int{4, 9}},
			{"rotating, decode", kv.AttentionMask(1, rot, 8), "none", nil},
		} {
			form := "none"
			switch {
			case tc.mask.Array != nil:
				form = "array"
			case tc.mask.Causal:
				form = "causal"
			}
			if form != tc.wantForm {
				return fmt.Errorf("%s: mask form %s, want %s", tc.name, form, tc.wantForm)
			}
			if tc.wantShape != nil && fmt.Sprint(tc.mask.Array.Shape()) != fmt.Sprint(tc.wantShape) {
				return fmt.Errorf("%s: mask shape %v, want %v", tc.name, tc.mask.Array.Shape(), tc.wantShape)
			}
		}
		return nil
	})
}

// TestRotatingWindowNarrowerThanRing covers make_mask's rolled one-token
// mask (window < max_size): only the newest window positions are visible.
func TestRotatingWindowNarrowerThanRing(t *testing.T) {
	mlxtest.Do(t, func() error {
		c := kv.NewRotating(6, 0)
		defer c.Free()
		for i := 0; i < 8; i++ {
			c.Update(positions(i, 1, 4), positions(i, 1, 4))
		}
		m := c.MakeMask(1, 3, false)
		if m.Array == nil {
			return fmt.Errorf("no mask for a window narrower than the ring")
		}
		vis, err := bools(m.Array)
		if err != nil {
			return err
		}
		k, _ := c.Update(positions(8, 1, 4), positions(8, 1, 4))
		held, err := heldPositions(k)
		if err != nil {
			return err
		}
		// The mask was made before position 8 was written (as in mlx-lm,
		// where the model builds masks before the layers update the cache):
		// visible slots must hold positions 6, 7 and the slot 8 goes to.
		var seen []int
		for i, ok := range vis {
			if ok {
				seen = append(seen, held[i])
			}
		}
		if fmt.Sprint(seen) != "[6 7 8]" && fmt.Sprint(seen) != "[8 6 7]" && fmt.Sprint(seen) != "[7 8 6]" {
			return fmt.Errorf("visible positions %v (mask %v over %v)", seen, vis, held)
		}
		return nil
	})
}
