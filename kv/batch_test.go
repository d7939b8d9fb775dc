package kv_test

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
)

// noise is [1, h, n, d] of deterministic values in (-1, 1), distinct per
// seed, so attention weights differ from key to key.
func noise(seed, h, n, d int) *mlx.Array {
	v := make([]float32, h*n*d)
	for i := range v {
		v[i] = float32(math.Sin(float64(seed)*12.9898 + float64(i)*0.7853))
	}
	return mlx.FromSlice(v, 1, h, n, d)
}

// TestBatchAttendEqualsEachRow: rows in one padded kv.Batch, joining with
// prompts shorter and longer than the batch's (left padding grows), leaving
// mid-way (the buffers compact) and crossing the 256-position growth, get
// at every step the attention, the positions and the caches their own
// KVCaches give them alone, bit for bit.
func TestBatchAttendEqualsEachRow(t *testing.T) {
	mlxtest.Do(t, func() error {
		const hq, hkv, d = 4, 2, 8
		prompts := []int{3, 7, 250, 1}
		solo := make([]*kv.KVCache, len(prompts))
		joined := make([][]kv.Cache, len(prompts))
		for r, n := range prompts {
			solo[r] = kv.NewKVCache()
			c := kv.NewKVCache()
			for _, x := range []*kv.KVCache{solo[r], c} {
				x.Update(noise(r, hkv, n, d), noise(r+100, hkv, n, d))
			}
			joined[r] = []kv.Cache{c}
		}
		defer func() {
			for r, c := range solo {
				c.Free()
				kv.FreeAll(joined[r])
			}
		}()
		b := kv.NewBatch(1)
		defer b.Free()
		var in []int // prompt index of each row in the batch, in its order
		join := func(r int) error {
			if !b.CanJoin(joined[r]) {
				return fmt.Errorf("row %d cannot join", r)
			}
			i, err := b.Join(joined[r])
			if err != nil {
				return err
			}
			if i != len(in) {
				return fmt.Errorf("row %d joined at %d, want %d", r, i, len(in))
			}
			in = append(in, r)
			return nil
		}
		leave := func(i int) error {
			r := in[i]
			caches, err := b.Leave(i)
			if err != nil {
				return err
			}
			joined[r] = caches // it may join again
			in = slices.Delete(in, i, i+1)
			c := caches[0].(*kv.KVCache)
			if c.Offset() != solo[r].Offset() {
				return fmt.Errorf("row %d left with %d tokens, alone it holds %d", r, c.Offset(), solo[r].Offset())
			}
			gk, gv := c.Update(noise(999, hkv, 1, d), noise(998, hkv, 1, d))
			wk, wv := solo[r].Update(noise(999, hkv, 1, d), noise(998, hkv, 1, d))
			solo[r].Trim(1)
			c.Trim(1)
			for _, p := range [][2]*mlx.Array{{gk, wk}, {gv, wv}} {
				if err := sameBits(p[0], p[1]); err != nil {
					return fmt.Errorf("row %d's caches after leaving: %w", r, err)
				}
			}
			return nil
		}
		step := 0
		decode := func() error {
			step++
			caches := b.Caches()
			l := caches[0]
			pos, err := kv.PositionOf(l).Rows.Int32s()
			if err != nil {
				return err
			}
			var qs, ks, vs []*mlx.Array
			for _, r := range in {
				qs = append(qs, noise(1000*step+r, hq, 1, d))
				ks = append(ks, noise(2000*step+r, hkv, 1, d))
				vs = append(vs, noise(3000*step+r, hkv, 1, d))
			}
			cat := func(x []*mlx.Array) *mlx.Array { return mlx.Concatenate(x, 0) }
			got := kv.Attention(l, cat(qs), cat(ks), cat(vs), 0.35, kv.AttentionMask(1, l, 0))
			for i, r := range in {
				if int(pos[i]) != solo[r].Offset() {
					return fmt.Errorf("step %d: row %d at position %d, alone at %d", step, r, pos[i], solo[r].Offset())
				}
				want := kv.Attention(solo[r], qs[i], ks[i], vs[i], 0.35, kv.AttentionMask(1, solo[r], 0))
				row := mlx.Slice(got, []int{i, 0, 0, 0}, []int{i + 1, hq, 1, d})
				if err := sameBits(row, want); err != nil {
					return fmt.Errorf("step %d, row %d: %w", step, r, err)
				}
			}
			return nil
		}
		for _, f := range []func() error{
			func() error { return join(0) }, func() error { return join(1) },
			decode, decode,
			func() error { return join(2) }, // longer: rows 0 and 1 get more padding
			decode,
			func() error { return leave(1) }, // compacts
			decode,
			func() error { return join(3) }, func() error { return join(1) },
			decode, decode, decode, decode, decode, decode, // crosses 256 positions
			func() error { return leave(1) }, func() error { return leave(0) }, // 250's row left: padding trimmed
			decode,
			func() error { return leave(1) }, func() error { return leave(0) },
		} {
			if err := f(); err != nil {
				return err
			}
		}
		if b.Len() != 0 {
			return fmt.Errorf("%d rows left in an emptied batch", b.Len())
		}
		if _, err := b.Leave(0); err == nil {
			return fmt.Errorf("leaving an empty batch did not fail")
		}
		rot := []kv.Cache{kv.NewRotating(8, 0)}
		if b.CanJoin(rot) || b.CanJoin(nil) {
			return fmt.Errorf("a rotating cache or no caches can join a batch")
		}
		return nil
	})
}

// sameBits compares two float32 arrays bit for bit.
func sameBits(got, want *mlx.Array) error {
	g, err := got.Float32s()
	if err != nil {
		return err
	}
	w, err := want.Float32s()
	if err != nil {
		return err
	}
	if len(g) != len(w) {
		return fmt.Errorf("%d values, want %d", len(g), len(w))
	}
	for i := range g {
		if math.Float32bits(g[i]) != math.Float32bits(w[i]) {
			return fmt.Errorf("value %d is %g, alone %g", i, g[i], w[i])
		}
	}
	return nil
}

// TestBatchJoinTogether: rows joining in one Join (one concatenation a
// layer) leave the batch's buffers, offsets and row order exactly as the
// same rows joining one by one, into an empty batch and into one with rows
// of its own (shorter and longer prompts, so the left padding grows).
func TestBatchJoinTogether(t *testing.T) {
	mlxtest.Do(t, func() error {
		const hkv, d, layers = 2, 8, 2
		prefilled := func(seed, n int) []kv.Cache {
			cs := make([]kv.Cache, layers)
			for i := range cs {
				c := kv.NewKVCache()
				c.Update(noise(seed+i, hkv, n, d), noise(seed+i+50, hkv, n, d))
				cs[i] = c
			}
			return cs
		}
		for _, first := range [][]int{nil, {6}, {30}} {
			one, all := kv.NewBatch(layers), kv.NewBatch(layers)
			for i, n := range first {
				if _, err := one.Join(prefilled(100+i, n)); err != nil {
					return err
				}
				if _, err := all.Join(prefilled(100+i, n)); err != nil {
					return err
				}
			}
			prompts := []int{4, 17, 9}
			var rows [][]kv.Cache
			for r, n := range prompts {
				i, err := one.Join(prefilled(10*r, n))
				if err != nil {
					return err
				}
				if i != len(first)+r {
					return fmt.Errorf("row %d joined as %d", r, i)
				}
				rows = append(rows, prefilled(10*r, n))
			}
			if i, err := all.Join(rows...); err != nil || i != len(first) {
				return fmt.Errorf("joined together at %d (%v), want %d", i, err, len(first))
			}
			if one.Len() != all.Len() {
				return fmt.Errorf("%d rows one by one, %d together", one.Len(), all.Len())
			}
			for l := range layers {
				a, b := one.Caches()[l], all.Caches()[l]
				if a.Offset() != b.Offset() {
					return fmt.Errorf("layer %d: offset %d one by one, %d together", l, a.Offset(), b.Offset())
				}
				for j, x := range a.State() {
					y := b.State()[j]
					if !slices.Equal(x.Shape(), y.Shape()) {
						return fmt.Errorf("layer %d array %d: shape %v one by one, %v together", l, j, x.Shape(), y.Shape())
					}
					if err := sameBits(y, x); err != nil {
						return fmt.Errorf("first %v, layer %d array %d: %v", first, l, j, err)
					}
				}
			}
			one.Free()
			all.Free()
		}
		return nil
	})
}
