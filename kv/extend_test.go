package kv_test

import (
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
)

// TestAttendStoredEqualsAttend: right after a layer's Attend, AttendStored
// with the same queries over the same cache (what a gemma4 KV-shared layer
// does) gives the same bits and stores nothing, for every cache kind a
// shared layer can read: growable, rotating (prefill and in-place decode),
// a decode batch's Rows and its padded Batch.
func TestAttendStoredEqualsAttend(t *testing.T) {
	mlxtest.Do(t, func() error {
		const hq, hkv, d = 4, 2, 8
		check := func(name string, c kv.Cache, rows, n int, mask func() kv.Mask) error {
			q := mlx.Concatenate(repeat(func(r int) *mlx.Array { return noise(50+r, hq, n, d) }, rows), 0)
			k := mlx.Concatenate(repeat(func(r int) *mlx.Array { return noise(60+r, hkv, n, d) }, rows), 0)
			v := mlx.Concatenate(repeat(func(r int) *mlx.Array { return noise(70+r, hkv, n, d) }, rows), 0)
			m := mask()
			want := kv.Attention(c, q, k, v, 0.5, m)
			off := c.Offset()
			got := kv.AttendStored(c, q, 0.5, m)
			if err := sameBits(got, want); err != nil {
				return &namedErr{name, err}
			}
			if c.Offset() != off {
				return &namedErr{name, errString("AttendStored stored tokens")}
			}
			return nil
		}
		kvc := kv.NewKVCache()
		defer kvc.Free()
		rot := kv.NewRotating(8, 0)
		defer rot.Free()
		for _, n := range []int{5, 1, 6, 1, 1} {
			if err := check("KVCache", kvc, 1, n, func() kv.Mask { return kv.AttentionMask(n, kvc, 0) }); err != nil {
				return err
			}
			if err := check("Rotating", rot, 1, n, func() kv.Mask { return kv.AttentionMask(n, rot, 8) }); err != nil {
				return err
			}
		}
		// Two rows of their own caches, as kv.Rows and as a padded kv.Batch.
		var rows [][]kv.Cache
		var joined [][]kv.Cache
		for r, n := range []int{3, 9} {
			a, b := kv.NewKVCache(), kv.NewKVCache()
			a.Update(noise(r, hkv, n, d), noise(r+10, hkv, n, d))
			b.Update(noise(r, hkv, n, d), noise(r+10, hkv, n, d))
			rows, joined = append(rows, []kv.Cache{a}), append(joined, []kv.Cache{b})
		}
		defer func() {
			for r := range rows {
				kv.FreeAll(rows[r])
			}
		}()
		for range 3 {
			layer := kv.NewRows(rows, 0)
			if err := check("Rows", layer, 2, 1, func() kv.Mask { return kv.AttentionMask(1, layer, 0) }); err != nil {
				return err
			}
		}
		b := kv.NewBatch(1)
		defer b.Free()
		for _, c := range joined {
			if _, err := b.Join(c); err != nil {
				return err
			}
		}
		for range 3 {
			layer := b.Caches()[0]
			if err := check("Batch", layer, 2, 1, func() kv.Mask { return kv.AttentionMask(1, layer, 0) }); err != nil {
				return err
			}
		}
		if a := kv.AttendStored(kv.NewQuantized(64, 4), noise(1, hq, 1, d), 1, kv.Mask{}); a.Err() == nil {
			return errString("AttendStored over a quantized cache did not fail")
		}
		return nil
	})
}

func repeat(f func(int) *mlx.Array, n int) []*mlx.Array {
	out := make([]*mlx.Array, n)
	for i := range out {
		out[i] = f(i)
	}
	return out
}

type errString string

func (e errString) Error() string { return string(e) }

type namedErr struct {
	name string
	err  error
}

func (e *namedErr) Error() string { return e.name + ": " + e.err.Error() }
