package mlx

import "sync/atomic"

// RopeSpec is fast.rope's parameters (RoPE's) as CacheWrite and CacheAttend
// take them.
type RopeSpec struct {
	Dims        int // 0: no rotation
	Traditional bool
	Base, Scale float32
	Freqs       *Array // nil: frequencies from Base (RoPE's freqs)
}

// cRopeSpec is the shim's mlxgo_rope_spec.
type cRopeSpec struct {
	dims, traditional, hasBase int32
	base, scale                float32
	freqs, offsets             uintptr
}

// kernelsMode is the shim's kernel mode as SetCPUKernels last set it, read
// per layer by CacheAttentionOn without a call into the shim.
var kernelsMode atomic.Int32

// CacheAttentionOn reports whether CacheAttention can run: mlxgo's CPU
// kernels are selected and the default device is the CPU.
func CacheAttentionOn() bool {
	if kernelsMode.Load() == kernelModes[KernelsMLX] {
		return false
	}
	d, err := DefaultDevice()
	return err == nil && d.Type == CPU
}

// spec is r as the shim takes it, with offsets (nil: the node's offset).
func (c *call) spec(r RopeSpec, offsets *Array) cRopeSpec {
	return cRopeSpec{dims: int32(r.Dims), traditional: flag(r.Traditional), hasBase: flag(r.Freqs == nil),
		base: r.Base, scale: r.Scale, freqs: c.opt(r.Freqs), offsets: c.opt(offsets)}
}

// CacheWrite is a KV cache buffer after a step's write, on the CPU kernels:
// x [B, H, L, D] rotated by rope (Dims 0: as it is) at offset (or, with
// ropeOffsets, int32 [B], each row at its own), written into buf [B, H, old,
// D] at offset (nil: an empty cache) — mlx-lm's KVCache.update_and_fetch. A
// capacity other than old grows the buffer: its first keep positions are
// kept, zeros follow. transposed lays the buffer out as [B, H, D, capacity]
// in memory (keys: what CacheAttend's score product reads in place); to
// every op it is [B, H, capacity, D] all the same. The bits are RoPE's and
// SliceUpdate's. One node, which reuses buf in place when nothing else holds
// it. Call it only when CacheAttentionOn.
func CacheWrite(buf, x *Array, offset, keep, capacity int, transposed bool, rope RopeSpec, ropeOffsets *Array) *Array {
	c := begin("cpu_cache_write")
	hb, hx := c.opt(buf), c.in(x)
	r := c.spec(rope, ropeOffsets)
	return c.do(func(out *uintptr) int32 {
		return fn.cpuCacheWrite(hb, hx, int32(offset), int32(keep), int32(capacity), flag(transposed), &r, out)
	})
}

// CacheAttend is attention over a KV cache on the CPU kernels: q [B, Hq, L,
// D] rotated by rope at length-L (or ropeOffsets), attended over the first
// length positions of the key and value buffers (causal, or with mask, a
// boolean or additive array broadcastable to [B, Hq, L, length], or
// neither), and the heads transposed back: [B, L, Hq*Dv], the bits of RoPE,
// ScaledDotProductAttention over the buffers' slices, Transpose and Reshape.
// One node. Call it only when CacheAttentionOn.
func CacheAttend(q, kbuf, vbuf *Array, length int, rope RopeSpec, ropeOffsets *Array, scale float32, causal bool,
	mask *Array) *Array {
	c := begin("cpu_cache_attend")
	hq, hk, hv, hm := c.in(q), c.in(kbuf), c.in(vbuf), c.opt(mask)
	r := c.spec(rope, ropeOffsets)
	return c.do(func(out *uintptr) int32 {
		return fn.cpuCacheAttend(hq, hk, hv, int32(length), &r, &scale, flag(causal), hm, out)
	})
}
