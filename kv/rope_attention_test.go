package kv_test

import (
	"bytes"
	"fmt"
	"math"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
)

// rotary is nn.RoPE's kv.Rotary, over a spec.
type rotary struct{ spec mlx.RopeSpec }

func (r rotary) At(x *mlx.Array, p kv.Position) *mlx.Array {
	s := r.spec
	if p.Rows != nil {
		return mlx.RoPEDynamic(x, s.Dims, s.Traditional, s.Base, s.Scale, p.Rows, s.Freqs)
	}
	return mlx.RoPE(x, s.Dims, s.Traditional, s.Base, s.Scale, p.Offset, s.Freqs)
}

func (r rotary) Spec() (mlx.RopeSpec, bool) { return r.spec, true }

// cast is noise as dtype dt.
func cast(a *mlx.Array, dt mlx.Dtype) *mlx.Array { return mlx.AsType(a, dt) }

// flat concatenates arrays flattened, as one array to compare.
func flat(arrs []*mlx.Array) *mlx.Array {
	parts := make([]*mlx.Array, len(arrs))
	for i, a := range arrs {
		parts[i] = mlx.Reshape(a, -1)
	}
	return mlx.Concatenate(parts, 0)
}

// runKernels evaluates build with MLX's own CPU kernels or mlxgo's on isa
// (then RoPEAttention runs as mlx.CacheWrite and mlx.CacheAttend) and
// returns its bytes.
func runKernels(t *testing.T, kernels, isa string, build func() (*mlx.Array, error)) []byte {
	t.Helper()
	var b []byte
	mlxtest.Do(t, func() error {
		if err := mlx.SetCPUKernels(kernels, 2, isa); err != nil {
			return err
		}
		defer mlx.SetCPUKernels(mlxtest.Kernels(), mlxtest.Threads(), "")
		if on := mlx.CacheAttentionOn(); on != (kernels != mlx.KernelsMLX) {
			return fmt.Errorf("CacheAttentionOn is %v with %s kernels", on, kernels)
		}
		y, err := build()
		if err != nil {
			return err
		}
		b, err = y.Bytes()
		return err
	})
	return b
}

// TestRoPEAttentionFusedEqualsComposed: a layer's attention through a KV
// cache — a prefill (causal), decode steps across the 256-position growth,
// a second chunk (causal over the cache) — and through a decode batch's
// padded cache (per-row positions, a boolean mask), as mlxgo's fused cache
// nodes compute it on every instruction set, is bit for bit what MLX's own
// kernels compute for rope, update_and_fetch, sdpa and the transpose; so
// are the caches' buffers at the end (keys stored transposed read back as
// the composition's), and a buffer another handle still held mid-way
// (which the nodes must copy, not overwrite).
func TestRoPEAttentionFusedEqualsComposed(t *testing.T) {
	mlxtest.Need(t)
	var isaList []string
	for _, isa := range []string{"avx512", "avx2", "base"} {
		if mlx.Do(func() error { return mlx.SetCPUKernels(mlx.KernelsMLXGO, 2, isa) }) == nil {
			isaList = append(isaList, isa)
		}
	}
	mlx.Do(func() error { return mlx.SetCPUKernels(mlxtest.Kernels(), mlxtest.Threads(), "") })
	llama3 := func() *mlx.Array {
		f := make([]float32, 8)
		for i := range f {
			f[i] = float32(math.Pow(10000, float64(2*i)/16)) * float32(1+i%3)
		}
		return mlx.FromSlice(f, 8)
	}
	for _, c := range []struct {
		name         string
		dt           mlx.Dtype
		hq, hkv, d   int
		rope         mlx.RopeSpec
		freqs, batch bool
	}{
		{"f32-gqa", mlx.Float32, 6, 2, 16, mlx.RopeSpec{Dims: 16, Base: 10000, Scale: 1}, false, false},
		{"f32-partial-traditional", mlx.Float32, 4, 4, 24, mlx.RopeSpec{Dims: 8, Traditional: true, Base: 500000, Scale: 0.5}, false, false},
		{"f32-freqs", mlx.Float32, 4, 1, 16, mlx.RopeSpec{Dims: 16, Scale: 1}, true, false},
		{"f16", mlx.Float16, 4, 2, 16, mlx.RopeSpec{Dims: 16, Base: 10000, Scale: 1}, false, false},
		{"bf16", mlx.BFloat16, 9, 3, 8, mlx.RopeSpec{Dims: 8, Base: 10000, Scale: 1}, false, false},
		{"f32-batch", mlx.Float32, 6, 2, 16, mlx.RopeSpec{Dims: 16, Base: 10000, Scale: 1}, false, true},
		{"bf16-batch-freqs", mlx.BFloat16, 4, 2, 16, mlx.RopeSpec{Dims: 16, Scale: 1}, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			build := func() (*mlx.Array, error) {
				r := rotary{c.rope}
				if c.freqs {
					r.spec.Freqs = llama3()
				}
				scale := 1 / float32(math.Sqrt(float64(c.d)))
				var outs []*mlx.Array
				step := func(cache kv.Cache, seed, b, l int, mask kv.Mask) {
					q := cast(mlx.BroadcastTo(noise(seed, c.hq, l, c.d), b, c.hq, l, c.d), c.dt)
					k := cast(mlx.BroadcastTo(noise(seed+1, c.hkv, l, c.d), b, c.hkv, l, c.d), c.dt)
					v := cast(mlx.BroadcastTo(noise(seed+2, c.hkv, l, c.d), b, c.hkv, l, c.d), c.dt)
					outs = append(outs, kv.RoPEAttention(cache, r, q, k, v, scale, mask))
				}
				if !c.batch {
					cache := kv.NewKVCache()
					step(cache, 1, 1, 250, cache.MakeMask(250, 0, false))
					held := make([]*mlx.Array, 0, 2)
					for _, a := range cache.State() {
						held = append(held, a.Clone()) // a prompt cache's hold: no write in place
					}
					for i := range 10 {
						step(cache, 10+i, 1, 1, cache.MakeMask(1, 0, false))
					}
					step(cache, 40, 1, 5, cache.MakeMask(5, 0, false))
					outs = append(outs, held...)
					outs = append(outs, cache.State()...)
					return flat(outs), nil
				}
				b := kv.NewBatch(1)
				for i, n := range []int{3, 9, 254} {
					cache := kv.NewKVCache()
					step(cache, 100+i, 1, n, cache.MakeMask(n, 0, false))
					if _, err := b.Join([]kv.Cache{cache}); err != nil {
						return nil, err
					}
				}
				for i := range 6 {
					layer := b.Caches()[0]
					step(layer, 200+i, 3, 1, layer.(kv.KV).MakeMask(1, 0, false))
				}
				outs = append(outs, b.Caches()[0].State()...)
				return flat(outs), nil
			}
			want := runKernels(t, mlx.KernelsMLX, "", build)
			for _, isa := range isaList {
				if got := runKernels(t, mlx.KernelsMLXGO, isa, build); !bytes.Equal(got, want) {
					n := 0
					for i := range got {
						if i < len(want) && got[i] != want[i] {
							n++
						}
					}
					t.Errorf("%s: %d of %d bytes differ", isa, n, len(want))
				}
			}
		})
	}
}
