package kv_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
)

func seq(a, b int) []int {
	var out []int
	for i := a; i < b; i++ {
		out = append(out, i)
	}
	return out
}

func TestKVCacheGrowth(t *testing.T) {
	mlxtest.Do(t, func() error {
		c := kv.NewKVCache()
		defer c.Free()
		if !c.Empty() || c.Nbytes() != 0 || c.State() != nil {
			return fmt.Errorf("new cache is not empty")
		}
		steps := []struct {
			n, wantBuf int
		}{{3, 256}, {1, 256}, {252, 256}, {1, 512}, {300, 769}} // 257 kept, then 2 blocks
		off := 0
		for _, s := range steps {
			k, _ := c.Update(positions(off, s.n, 8), positions(off, s.n, 8))
			off += s.n
			got, err := heldPositions(k)
			if err != nil {
				return err
			}
			if !reflect.DeepEqual(got, seq(0, off)) {
				return fmt.Errorf("after %d tokens the cache holds %v", off, got)
			}
			if c.Offset() != off || c.Size() != off {
				return fmt.Errorf("offset %d, want %d", c.Offset(), off)
			}
			if buf := c.State()[0].Dim(2); buf != s.wantBuf {
				return fmt.Errorf("after %d tokens the buffer holds %d positions, want %d", off, buf, s.wantBuf)
			}
			if c.Nbytes() != 2*s.wantBuf*8*4 {
				return fmt.Errorf("nbytes %d", c.Nbytes())
			}
		}
		if n := c.Trim(10); n != 10 || c.Offset() != off-10 {
			return fmt.Errorf("trim 10: trimmed %d, offset %d", n, c.Offset())
		}
		if n := kv.Trim([]kv.Cache{c}, 1<<20); n != off-10 || c.Offset() != 0 {
			return fmt.Errorf("trim all: trimmed %d, offset %d", n, c.Offset())
		}
		return nil
	})
}

// rotatingRef is RotatingKVCache's behaviour in positions: what a fetch
// returns after each update, derived by hand from cache.py for keep=2,
// max=6.
func TestRotatingDecodeAndPrefill(t *testing.T) {
	mlxtest.Do(t, func() error {
		c := kv.NewRotating(6, 2)
		defer c.Free()
		type upd struct {
			n    int
			want []int
		}
		steps := []upd{
			{4, seq(0, 4)},                      // concat: first chunk stored as is
			{1, seq(0, 5)},                      // grow in place to max (6 slots)
			{1, seq(0, 6)},                      // full
			{1, []int{0, 1, 6, 3, 4, 5}},        // rotate: slot keep overwritten
			{1, []int{0, 1, 6, 7, 4, 5}},        // next slot
			{3, []int{0, 1, 5, 6, 7, 8, 9, 10}}, // concat: temporal order, keep + last max-keep-1, + 3 new
			{1, []int{0, 1, 11, 8, 9, 10}},      // trimmed to the newest max, then rotate at keep
		}
		off := 0
		for i, s := range steps {
			k, v := c.Update(positions(off, s.n, 4), positions(off, s.n, 4))
			off += s.n
			gk, err := heldPositions(k)
			if err != nil {
				return err
			}
			gv, err := heldPositions(v)
			if err != nil {
				return err
			}
			if !reflect.DeepEqual(gk, s.want) || !reflect.DeepEqual(gv, s.want) {
				return fmt.Errorf("update %d (%d tokens): holds keys %v values %v, want %v", i, s.n, gk, gv, s.want)
			}
			if c.Offset() != off || c.Size() != min(off, 6) {
				return fmt.Errorf("update %d: offset %d size %d", i, c.Offset(), c.Size())
			}
		}
		if c.Trimmable() {
			return fmt.Errorf("a rotating cache past its size must not be trimmable")
		}
		return nil
	})
}

func TestQuantizedCache(t *testing.T) {
	mlxtest.Do(t, func() error {
		c := kv.NewKVCache()
		x := mlx.Normal([]int{1, 2, 5, 64}, mlx.Float32, 0, 1, mlx.Key(1))
		c.Update(x, x)
		caches := []kv.Cache{c}
		if err := kv.MaybeQuantize(caches, 6, 64, 8); err != nil {
			return err
		}
		if _, ok := caches[0].(*kv.KVCache); !ok {
			return fmt.Errorf("quantized below quantized_kv_start")
		}
		if err := kv.MaybeQuantize(caches, 5, 64, 8); err != nil {
			return err
		}
		q, ok := caches[0].(*kv.Quantized)
		if !ok || q.Offset() != 5 || q.Quant().Bits != 8 {
			return fmt.Errorf("not switched to an 8-bit quantized cache: %T", caches[0])
		}
		defer q.Free()
		kq, _ := q.Update(x, x)
		if q.Offset() != 10 || kq[0].Dim(2) != 10 || kq[0].Dtype() != mlx.Uint32 || kq[0].Dim(3) != 64*8/32 {
			return fmt.Errorf("fetched %v after 10 tokens", kq[0].Shape())
		}
		back := mlx.Dequantize(kq[0], kq[1], kq[2], q.Quant())
		err := mlx.Max(mlx.Abs(mlx.Subtract(mlx.Slice(back, []int{0, 0, 5, 0}, []int{1, 2, 10, 64}), x)), nil, false)
		e, ierr := err.Item()
		if ierr != nil {
			return ierr
		}
		if e > 0.05 { // 8-bit groups of 64 over N(0,1): error ≈ range/255/2
			return fmt.Errorf("8-bit round trip error %g", e)
		}
		r := []kv.Cache{kv.NewRotating(8, 0)}
		r[0].(*kv.Rotating).Update(x, x)
		defer r[0].Free()
		if err := kv.MaybeQuantize(r, 0, 64, 4); err == nil || !strings.Contains(err.Error(), "rotating") {
			return fmt.Errorf("quantizing a rotating cache: %v, want an error", err)
		}
		return nil
	})
}
