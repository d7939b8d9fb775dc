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

// TestAttentionTailChains: a pre-norm block after its cache writes — the
// output projection with the residual over the cache attention, then the
// SwiGLU MLP with its norm and residual — is one MlxgoAttentionTail node
// on mlxgo's kernels (the shim chains the packed ops over the pending
// attention), bit for bit MLX's own ops for it, at a prefill and a decode
// step.
func TestAttentionTailChains(t *testing.T) {
	mlxtest.Need(t)
	const hq, hkv, d, width = 6, 2, 16, 64
	const hidden = hq * d
	r := rotary{mlx.RopeSpec{Dims: d, Base: 10000, Scale: 1}}
	q := mlx.Quant{GroupSize: 32, Bits: 4, Mode: "affine"}
	words := func(seed, n int) *mlx.Array {
		w := make([]uint32, n)
		for i := range w {
			w[i] = uint32(seed*2654435761+i*40503) ^ uint32(i*i*7919)
		}
		return mlx.FromSlice(w, n)
	}
	half := func(a *mlx.Array) *mlx.Array { return mlx.Multiply(a, mlx.Scalar(0.05, mlx.Float32)) }
	weight := func(seed, n, k int) (w, s, b *mlx.Array) {
		return mlx.Reshape(words(seed, n*k/8), n, k/8), mlx.AsType(half(mlx.Reshape(noise(seed+1, 1, n, k/32), n, k/32)), mlx.Float16),
			mlx.AsType(half(mlx.Reshape(noise(seed+2, 1, n, k/32), n, k/32)), mlx.Float16)
	}
	build := func() (*mlx.Array, error) {
		stock := !mlx.CacheAttentionOn()
		ow, os, ob := weight(1, hidden, hidden)
		gw, gs, gb := weight(4, 2*width, hidden)
		dw, ds, db := weight(7, hidden, width)
		norm := mlx.Reshape(noise(9, 1, 1, hidden), hidden)
		var op, gp, dp *mlx.Packed
		if !stock {
			var err error
			if op, err = mlx.PackQuantized(ow, os, ob, q); err != nil {
				return nil, err
			}
			if gp, err = mlx.PackQuantized(gw, gs, gb, q); err != nil {
				return nil, err
			}
			if dp, err = mlx.PackQuantized(dw, ds, db, q); err != nil {
				return nil, err
			}
		}
		cache := kv.NewKVCache()
		var outs []*mlx.Array
		for i, l := range []int{20, 1} {
			x := mlx.Reshape(noise(20+i, 1, l, hidden), 1, l, hidden)
			attn := kv.RoPEAttention(cache, r, noise(30+i, hq, l, d), noise(40+i, hkv, l, d), noise(50+i, hkv, l, d),
				0.25, cache.MakeMask(l, 0, false))
			var y *mlx.Array
			if stock {
				h := mlx.Add(x, mlx.QuantizedMatmul(attn, ow, os, ob, true, q))
				gu := mlx.Split(mlx.QuantizedMatmul(mlx.RMSNorm(h, norm, 1e-5), gw, gs, gb, true, q), 2, -1)
				y = mlx.Add(h, mlx.QuantizedMatmul(mlx.SwiGLU(gu[0], gu[1]), dw, ds, db, true, q))
			} else {
				h := mlx.PackedMatmulAdd(attn, op, x)
				y = mlx.PackedMLP(h, norm, 1e-5, gp, dp, h)
				if name, err := y.OpName(); err != nil || name != "MlxgoAttentionTail" {
					return nil, fmt.Errorf("step %d: the block's output is a %q node (%v), want MlxgoAttentionTail", i, name, err)
				}
			}
			outs = append(outs, y)
		}
		return flat(outs), nil
	}
	want := runKernels(t, mlx.KernelsMLX, "", build)
	if got := runKernels(t, mlx.KernelsMLXGO, "", build); !bytes.Equal(got, want) {
		t.Errorf("the chained block differs from MLX's ops")
	}
}
