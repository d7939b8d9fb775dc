// Package kv holds the per-layer caches of decoder models: the lifetime every
// cache has (Cache), the key/value caches of attention layers (KV: KVCache,
// Rotating, Quantized, and Rows, the fan-out over a decode batch's rows), the
// state of recurrent layers (Recurrent: Arrays), and the attention dispatch
// that reads them, mirroring mlx-lm's models/cache.py and
// models/base.py op for op: the L1 fidelity contract (DESIGN.md §6) needs the
// same slices, concatenations and zero padding, because attention reads the
// cache buffers exactly as they are laid out.
//
// A cache owns the arrays it keeps between steps: they are detached from every
// mlx.Scope (mlx.Detach) and released by Free or when replaced, so a decode loop
// that closes a scope per step neither leaks nor frees what the next step
// needs. Everything here runs on the MLX executor (inside mlx.Do).
package kv

import (
	"fmt"

	"github.com/mlxgo/mlxgo/mlx"
)

// Options selects the caches a model makes (mlx_lm.generate's --max-kv-size,
// --kv-bits and --kv-group-size).
type Options struct {
	// MaxKVSize > 0 asks for rotating caches of that size (keep 4), for models
	// whose mlx-lm class has no make_cache of its own.
	MaxKVSize int
	// KVBits (4 or 8) quantizes the cache once it holds QuantizedKVStart
	// tokens (see MaybeQuantize); 0 keeps it in the activation dtype.
	KVBits int
	// KVGroupSize is the quantization group along the head dimension (64).
	KVGroupSize int
	// Layers, when set, quantizes per layer instead (serve's kv_config.json,
	// as optiq's mixed-precision KV reads it): a layer listed gets its own
	// bits and group size from QuantizedKVStart, a layer absent is kept in
	// the activation dtype; KVBits and KVGroupSize are not read.
	Layers map[int]LayerQuant
}

// LayerQuant is one layer's KV quantization.
type LayerQuant struct{ Bits, GroupSize int }

// DefaultKVGroupSize is mlx_lm.generate's --kv-group-size default.
const DefaultKVGroupSize = 64

// DefaultQuantizedKVStart is mlx_lm.generate's --quantized-kv-start default.
const DefaultQuantizedKVStart = 5000

// GroupSize is o.KVGroupSize or the default.
func (o Options) GroupSize() int {
	if o.KVGroupSize > 0 {
		return o.KVGroupSize
	}
	return DefaultKVGroupSize
}

// Cache is what every layer's cache has, whatever it keeps (keys and
// values, or a recurrent state): its lifetime. It is what a model's
// NewCaches returns one of per layer, and what a prompt cache stores.
type Cache interface {
	// Offset is the number of tokens seen so far (the position of the next).
	Offset() int
	// State is the arrays to evaluate after a prefill chunk (mx.eval of
	// cache.state); nil when empty.
	State() []*mlx.Array
	// Trimmable reports whether Trim can drop the newest tokens.
	Trimmable() bool
	// Trim forgets up to n of the newest tokens and returns how many it did.
	Trim(n int) int
	// Nbytes is the size of the arrays held.
	Nbytes() int
	// Empty reports whether nothing was stored yet.
	Empty() bool
	// Free releases the arrays held; the cache is empty afterwards.
	Free()
}

// KV is an attention layer's cache of past keys and values (mlx-lm's
// KVCache, RotatingKVCache, QuantizedKVCache; Rows for a decode batch).
type KV interface {
	Cache
	// Size is the number of tokens attention can still read.
	Size() int
	// Attend stores keys and values [B, kvHeads, L, dim] (already rotated)
	// and returns attention of queries [B, heads, L, dim] over the cache:
	// mlx-lm's update_and_fetch followed by scaled_dot_product_attention.
	Attend(queries, keys, values *mlx.Array, scale float32, mask Mask) *mlx.Array
	// MakeMask is the mask n new tokens need (cache.make_mask); windowSize 0
	// means none.
	MakeMask(n, windowSize int, returnArray bool) Mask
}

// Attention is the attention of one layer: through the cache when there is
// one, plain fast SDPA otherwise (mlx-lm with cache=None). A cache that
// keeps no keys and values is an error.
func Attention(c Cache, queries, keys, values *mlx.Array, scale float32, mask Mask) *mlx.Array {
	if c == nil {
		return sdpa(queries, keys, values, scale, mask)
	}
	k, ok := c.(KV)
	if !ok {
		return mlx.ErrorArray(fmt.Errorf("cannot attend through a %T: it keeps no keys and values", c))
	}
	return k.Attend(queries, keys, values, scale, mask)
}

// Position is where a layer's new tokens start, as RoPE takes it: one
// offset, or, for the rows of a decode batch (Rows), one per row.
type Position struct {
	Offset int
	Rows   *mlx.Array // int32 [B]; nil: Offset for every row
}

// PositionOf is the cache's offset (0 without a cache): mlx-lm's
// cache.offset, which is an array of offsets for a batch's cache.
func PositionOf(c Cache) Position {
	switch c := c.(type) {
	case nil:
		return Position{}
	case *Rows:
		return Position{Rows: c.offsets()}
	case *BatchLayer:
		return Position{Rows: c.offsets()}
	default:
		return Position{Offset: c.Offset()}
	}
}

// sdpa is mx.fast.scaled_dot_product_attention with mlx-lm's mask forms.
func sdpa(q, k, v *mlx.Array, scale float32, mask Mask) *mlx.Array {
	return sdpaSinks(q, k, v, scale, mask, nil)
}

// MaybeQuantize is mlx-lm's maybe_quantize_kv_cache: with bits set, every
// plain KV cache holding at least start tokens is replaced by its quantized
// form. mlx-lm cannot quantize a rotating cache (NotImplementedError); that
// is an error here too rather than a silent skip.
func MaybeQuantize(caches []Cache, start, groupSize, bits int) error {
	if bits == 0 {
		return nil
	}
	for i, c := range caches {
		if c.Offset() >= start {
			if err := quantizeLayer(caches, i, groupSize, bits); err != nil {
				return err
			}
		}
	}
	return nil
}

// quantizeLayer replaces a plain KV cache by its quantized form.
func quantizeLayer(caches []Cache, i, groupSize, bits int) error {
	switch cc := caches[i].(type) {
	case *KVCache:
		q, err := cc.ToQuantized(groupSize, bits)
		if err != nil {
			return fmt.Errorf("cannot quantize the kv cache of layer %d: %w", i, err)
		}
		caches[i] = q
	case *Rotating:
		return fmt.Errorf("cannot quantize the kv cache of layer %d: rotating caches (sliding window or max kv size) cannot be quantized", i)
	}
	return nil
}

// MaybeQuantizeLayers is MaybeQuantize with per-layer bits and group
// sizes: only the layers in layers are quantized (optiq's
// patched_maybe_quantize).
func MaybeQuantizeLayers(caches []Cache, start int, layers map[int]LayerQuant) error {
	for i, c := range caches {
		lq, ok := layers[i]
		if !ok || c.Offset() < start {
			continue
		}
		if err := quantizeLayer(caches, i, lq.GroupSize, lq.Bits); err != nil {
			return err
		}
	}
	return nil
}

// States gathers every cache's State, for one mlx.Eval after a prefill chunk.
func States(caches []Cache) []*mlx.Array {
	var out []*mlx.Array
	for _, c := range caches {
		out = append(out, c.State()...)
	}
	return out
}

// Trimmable is can_trim_prompt_cache: every cache can be trimmed.
func Trimmable(caches []Cache) bool {
	for _, c := range caches {
		if !c.Trimmable() {
			return false
		}
	}
	return true
}

// Trim is trim_prompt_cache: it trims every cache by n tokens when all can
// be, and returns the number trimmed (0 when they cannot).
func Trim(caches []Cache, n int) int {
	if len(caches) == 0 || !Trimmable(caches) {
		return 0
	}
	trimmed := 0
	for i, c := range caches {
		t := c.Trim(n)
		if i == 0 {
			trimmed = t
		}
	}
	return trimmed
}

// Nbytes is the total size of the caches.
func Nbytes(caches []Cache) int {
	n := 0
	for _, c := range caches {
		n += c.Nbytes()
	}
	return n
}

// FreeAll releases every cache.
func FreeAll(caches []Cache) {
	for _, c := range caches {
		c.Free()
	}
}

// own takes a out of whatever scope made it: a cache's buffers outlive the
// step that wrote them and are freed by the cache itself.
func own(a *mlx.Array) { mlx.Detach(a) }

// replace frees old (if it is not new) and detaches new from the scopes:
// the cache's arrays live from step to step.
func replace(old, new *mlx.Array) *mlx.Array {
	if old != nil && old != new {
		old.Free()
	}
	own(new)
	return new
}

// slice2 is x[..., start:stop, :] on a [B, H, L, D] array.
func slice2(x *mlx.Array, start, stop int) *mlx.Array {
	sh := x.Shape()
	if len(sh) != 4 {
		return mlx.Slice(x, []int{0, 0, start}, []int{0, 0, stop}) // carries MLX's shape error
	}
	return mlx.Slice(x, []int{0, 0, start, 0}, []int{sh[0], sh[1], stop, sh[3]})
}

// setSlice2 is x[..., start:stop, :] = v on a [B, H, L, D] array.
func setSlice2(x, v *mlx.Array, start, stop int) *mlx.Array {
	sh := x.Shape()
	if len(sh) != 4 {
		return mlx.SliceUpdate(x, v, []int{0, 0, start}, []int{0, 0, stop})
	}
	return mlx.SliceUpdate(x, v, []int{0, 0, start, 0}, []int{sh[0], sh[1], stop, sh[3]})
}

// At is caches[i], or nil when there are no caches (a forward pass without
// cache).
func At(caches []Cache, i int) Cache {
	if i < 0 || i >= len(caches) {
		return nil
	}
	return caches[i]
}
