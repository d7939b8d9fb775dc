package kv

import (
	"fmt"
	"slices"

	"github.com/mlxgo/mlxgo/mlx"
)

// Batch holds the keys and values of a decode batch's rows in one buffer per
// layer, [B, kvHeads, capacity, dim], each row left-padded so that every
// row's next token goes to the same position: mlx-lm's BatchKVCache. A
// decode step then writes all rows with one slice_update and attends with one
// attention node over [B, heads, 1, dim], whatever B is, where Rows runs
// each row's cache as nodes of its own (about eight a row a layer).
//
// Padding changes no bit on the CPU: a padded key is masked to finfo.min
// before the softmax, whose exp is exactly 0, so the row's sum gains only
// leading +0 terms and p @ v only leading zero products, and sums that start
// with zeros are the sums without them (models/rows_test.go and
// gen/batch_rows_test.go compare rows with their solo runs bit for bit). On
// a GPU MLX's attention kernels split the keys between threads by position,
// so a padded row is summed in another order: there batched rows agree with
// their solo runs as mlx-lm's BatchGenerator's do, not bit for bit.
//
// Rows join with the growable KVCaches they were prefilled into (Join) and
// leave with KVCaches of their own again (Leave), so a row's caches are
// always what a solo generation would hand back. Rotating and quantized
// caches cannot join (CanJoin): their rows decode through Rows.
type Batch struct {
	layers  []*BatchLayer
	pads    []int  // left padding of each row, in positions
	removed []bool // rows that left; dropped from the buffers by compact
}

// BatchLayer is one layer's view of a Batch, the Cache its attention reads.
type BatchLayer struct {
	b            *Batch
	keys, values *mlx.Array // [B, kvHeads, capacity, dim]
	offset       int        // positions written, padding included
}

// NewBatch returns an empty batch of layers layers.
func NewBatch(layers int) *Batch {
	b := &Batch{layers: make([]*BatchLayer, layers)}
	for i := range b.layers {
		b.layers[i] = &BatchLayer{b: b}
	}
	return b
}

// Len is the number of rows in the batch.
func (b *Batch) Len() int {
	n := 0
	for _, r := range b.removed {
		if !r {
			n++
		}
	}
	return n
}

// Caches is the batch's per-layer caches, for one Forward over the rows in
// the order they joined (those that left excluded).
func (b *Batch) Caches() []Cache {
	b.compact()
	out := make([]Cache, len(b.layers))
	for i, l := range b.layers {
		out[i] = l
	}
	return out
}

// CanJoin reports whether a row with these caches can join: one growable,
// non-empty KVCache per layer, of the batch's head count, head size and
// dtype.
func (b *Batch) CanJoin(caches []Cache) bool {
	if len(caches) != len(b.layers) || len(caches) == 0 {
		return false
	}
	for i, c := range caches {
		kc, ok := c.(*KVCache)
		if !ok || kc.keys == nil || kc.offset == 0 {
			return false
		}
		if l := b.layers[i]; l.keys != nil && !sameLayout(l.keys, kc.keys) || l.values != nil && !sameLayout(l.values, kc.values) {
			return false
		}
	}
	return true
}

// sameLayout: one row of a and b stack along the batch axis.
func sameLayout(a, b *mlx.Array) bool {
	return a.Dtype() == b.Dtype() && a.Ndim() == 4 && b.Ndim() == 4 && b.Dim(0) == 1 && a.Dim(1) == b.Dim(1) && a.Dim(3) == b.Dim(3)
}

// Join adds rows whose caches hold their prompts (CanJoin must hold for
// each, and the rows must match one another); the batch takes their arrays
// and frees the caches. However many rows join, each layer's buffers are
// concatenated once: rows joining one at a time copied the whole batch for
// each. It returns the index of the first of them among the rows now in the
// batch (the others follow it in order).
func (b *Batch) Join(rows ...[]Cache) (int, error) {
	if len(rows) == 0 {
		return 0, fmt.Errorf("cannot join the decode batch: no rows")
	}
	ns := make([]int, len(rows))
	for r, caches := range rows {
		if !b.CanJoin(caches) || !sameLayers(rows[0], caches) {
			return 0, fmt.Errorf("cannot join the decode batch: its caches are not growable KV caches of the batch's shape")
		}
		ns[r] = caches[0].Offset()
		for _, c := range caches {
			if c.Offset() != ns[r] {
				return 0, fmt.Errorf("cannot join the decode batch: layers hold %d and %d tokens", ns[r], c.Offset())
			}
		}
	}
	b.compact()
	at := 0
	if len(b.pads) > 0 {
		at = b.layers[0].offset
	}
	if m := slices.Max(ns); m > at && len(b.pads) > 0 {
		// A new row is longer than every row: the others get more padding
		// on the left.
		grow := m - at
		for _, l := range b.layers {
			l.keys = replace(l.keys, padLeft(l.keys, grow))
			l.values = replace(l.values, padLeft(l.values, grow))
			l.offset += grow
		}
		for i := range b.pads {
			b.pads[i] += grow
		}
	}
	at = max(at, slices.Max(ns))
	for i, l := range b.layers {
		var ks, vs []*mlx.Array
		capacity := at // a new batch's buffers end at the rows' last position
		if l.keys != nil {
			ks, vs, capacity = []*mlx.Array{l.keys}, []*mlx.Array{l.values}, l.keys.Dim(2)
		}
		for r, caches := range rows {
			kc, n := caches[i].(*KVCache), ns[r]
			ks = append(ks, padRight(padLeft(slice2(kc.keys, 0, n), at-n), capacity-at))
			vs = append(vs, padRight(padLeft(slice2(kc.values, 0, n), at-n), capacity-at))
			kc.Free()
		}
		l.keys, l.values, l.offset = replace(l.keys, concat0(ks)), replace(l.values, concat0(vs)), at
	}
	first := len(b.pads)
	for _, n := range ns {
		b.pads = append(b.pads, at-n)
		b.removed = append(b.removed, false)
	}
	if err := settle(b.buffers()...); err != nil {
		return 0, fmt.Errorf("cannot join the decode batch: %w", err)
	}
	return first, nil // compacted above: no row has left
}

// sameLayers: b's layers stack with a's along the batch axis.
func sameLayers(a, b []Cache) bool {
	for i, c := range b {
		ka, kb := a[i].(*KVCache), c.(*KVCache)
		if !sameLayout(ka.keys, kb.keys) || !sameLayout(ka.values, kb.values) {
			return false
		}
	}
	return true
}

// concat0 is the arrays along the batch axis (one of them: itself).
func concat0(arrs []*mlx.Array) *mlx.Array {
	if len(arrs) == 1 {
		return arrs[0]
	}
	return mlx.Concatenate(arrs, 0)
}

// buffers is every layer's keys and values.
func (b *Batch) buffers() []*mlx.Array {
	var arrs []*mlx.Array
	for _, l := range b.layers {
		if l.keys != nil {
			arrs = append(arrs, l.keys, l.values)
		}
	}
	return arrs
}

// settle evaluates what the batch just rebuilt (a join's buffers, a
// compaction's, a leaving row's copies) as a graph of its own, before the
// next decode step is built on it. Why: on a GPU MLX records an evaluation
// as CUDA graphs of 100 ops each (H100/H200) and launches a cached
// instantiation only when the next graph has the same kernels in the same
// places; copies queued in front of a step's forward shift every 100-op
// chunk of it. On an H200 a step in which a row had joined or left took
// 20-50 ms whatever its rows (2 to 63), against 11 ms for 63 rows
// otherwise (testdata/gpu/results/2026-12-04-h200-genhost/); those chunks
// instantiated anew are the suspected cause, not yet measured with this
// change (no GPU was lent after it). On the CPU it is one more evaluation
// call a change, not a step.
func settle(arrs ...*mlx.Array) error {
	if len(arrs) == 0 {
		return nil
	}
	return mlx.AsyncEval(arrs...)
}

// gone is the number of rows that left and are not yet compacted away.
func (b *Batch) gone() int { return len(b.removed) - b.Len() }

// Leave takes row i (its index among the rows in the batch) out and returns
// its caches: growable KVCaches holding the row's tokens in buffers of a
// whole number of steps, as Update grows them. Why whole steps: on a GPU,
// MLX's cuDNN attention caches its graphs by the keys' strides, and a buffer
// of exactly the row's length gave the next prefill into the row's
// prompt-cache entry a stride no graph had, so it built one: 70-100 ms of
// that request's first token on an H200 (testdata/gpu/results/2026-12-03-h200-suite/).
func (b *Batch) Leave(i int) ([]Cache, error) {
	j := b.slot(i)
	if j < 0 {
		return nil, fmt.Errorf("cannot leave the decode batch: no row %d in %d", i, b.Len())
	}
	out := make([]Cache, len(b.layers))
	for li, l := range b.layers {
		k := mlx.Slice(l.keys, []int{j, 0, b.pads[j], 0}, []int{j + 1, l.keys.Dim(1), l.offset, l.keys.Dim(3)})
		v := mlx.Slice(l.values, []int{j, 0, b.pads[j], 0}, []int{j + 1, l.values.Dim(1), l.offset, l.values.Dim(3)})
		// A copy, not a view: the row's caches may outlive the batch's
		// buffers by long (a prompt cache), and a view would keep them.
		n := l.offset - b.pads[j]
		c := NewKVCache()
		c.keys, c.values, c.offset = replace(nil, wholeSteps(k, n)), replace(nil, wholeSteps(v, n)), n
		out[li] = c
	}
	var arrs []*mlx.Array
	for _, c := range out {
		arrs = append(arrs, c.(*KVCache).keys, c.(*KVCache).values)
	}
	if err := settle(arrs...); err != nil {
		FreeAll(out)
		return nil, fmt.Errorf("cannot leave the decode batch: %w", err)
	}
	b.removed[j] = true
	return out, nil
}

// slot is the buffer row of the i-th row still in the batch; -1 if none.
func (b *Batch) slot(i int) int {
	for j, r := range b.removed {
		if r {
			continue
		}
		if i == 0 {
			return j
		}
		i--
	}
	return -1
}

// compact drops the rows that left from the buffers, and the left padding
// every remaining row has, once per change rather than per row.
func (b *Batch) compact() {
	if b.gone() == 0 {
		return
	}
	var keep []int32
	var pads []int
	for j, r := range b.removed {
		if !r {
			keep = append(keep, int32(j))
			pads = append(pads, b.pads[j])
		}
	}
	if len(keep) == 0 {
		b.Free()
		return
	}
	trim := pads[0]
	for _, p := range pads {
		trim = min(trim, p)
	}
	idx := mlx.FromSlice(keep, len(keep))
	for _, l := range b.layers {
		k, v := mlx.Take(l.keys, idx, 0), mlx.Take(l.values, idx, 0)
		if trim > 0 {
			k, v = slice2(k, trim, k.Dim(2)), slice2(v, trim, v.Dim(2))
			l.offset -= trim
		}
		l.keys, l.values = replace(l.keys, k), replace(l.values, v)
	}
	for i := range pads {
		pads[i] -= trim
	}
	b.pads = pads
	b.removed = make([]bool, len(pads))
	// A failure to evaluate the compacted buffers is the next step's: its
	// evaluation, over them, reports it.
	_ = settle(b.buffers()...)
}

// Free releases every buffer; the batch is empty afterwards.
func (b *Batch) Free() {
	for _, l := range b.layers {
		l.keys.Free()
		l.values.Free()
		l.keys, l.values, l.offset = nil, nil, 0
	}
	b.pads, b.removed = nil, nil
}

// padLeft is x with n zero positions before its first ([B, H, L, D]).
func padLeft(x *mlx.Array, n int) *mlx.Array {
	if n <= 0 {
		return x
	}
	z := mlx.Zeros(x.Dtype(), x.Dim(0), x.Dim(1), n, x.Dim(3))
	return mlx.Concatenate([]*mlx.Array{z, x}, 2)
}

// wholeSteps is a copy of x's n positions in a buffer of a whole number of
// steps (zeros after them).
func wholeSteps(x *mlx.Array, n int) *mlx.Array {
	if pad := (n+step-1)/step*step - n; pad > 0 {
		return padRight(x, pad)
	}
	return mlx.Contiguous(x)
}

// padRight is x with n zero positions after its last.
func padRight(x *mlx.Array, n int) *mlx.Array {
	if n <= 0 {
		return x
	}
	z := mlx.Zeros(x.Dtype(), x.Dim(0), x.Dim(1), n, x.Dim(3))
	return mlx.Concatenate([]*mlx.Array{x, z}, 2)
}

func (l *BatchLayer) Offset() int { return l.offset }
func (l *BatchLayer) Size() int   { return l.offset }
func (l *BatchLayer) Empty() bool { return l.keys == nil }

// Trimmable is false: a row's tokens are trimmed after it leaves (Leave
// gives it KVCaches of its own).
func (l *BatchLayer) Trimmable() bool { return false }
func (l *BatchLayer) Trim(int) int    { return 0 }

func (l *BatchLayer) State() []*mlx.Array {
	if l.keys == nil {
		return nil
	}
	return []*mlx.Array{l.keys, l.values}
}

func (l *BatchLayer) Nbytes() int {
	if l.keys == nil {
		return 0
	}
	return l.keys.Nbytes() + l.values.Nbytes()
}

// Free frees the whole batch: its layers share one lifetime.
func (l *BatchLayer) Free() { l.b.Free() }

// offsets is every row's own offset (its tokens so far), int32 [B], what
// RoPE rotates each row's new tokens by.
func (l *BatchLayer) offsets() *mlx.Array {
	offs := make([]int32, len(l.b.pads))
	for i, p := range l.b.pads {
		offs[i] = int32(l.offset - p)
	}
	return mlx.FromSlice(offs, len(offs))
}

// MakeMask is the mask n new tokens of every row need: key j (a buffer
// position) is seen by query i of row r when it is not padding (j >=
// pads[r]), is not in the future (j <= offset+i) and, with a window, is
// within it (j > offset+i-window): the row's own causal mask, shifted by
// its padding. Always an array, [B, 1, n, offset+n].
func (l *BatchLayer) MakeMask(n, windowSize int, _ bool) Mask {
	b, total := len(l.b.pads), l.offset+n
	m := make([]bool, b*n*total)
	for r, p := range l.b.pads {
		for i := range n {
			q := l.offset + i
			row := m[(r*n+i)*total:]
			for j := p; j <= q; j++ {
				row[j] = windowSize <= 0 || j > q-windowSize
			}
		}
	}
	return Mask{Array: mlx.FromSlice(m, b, 1, n, total)}
}

// Attend writes every row's new keys and values [B, kvHeads, L, dim] at the
// batch's offset and attends over the buffers with mask (MakeMask's).
func (l *BatchLayer) Attend(queries, keys, values *mlx.Array, scale float32, mask Mask) *mlx.Array {
	if keys.Ndim() != 4 || l.keys == nil || keys.Dim(0) != l.keys.Dim(0) {
		return mlx.ErrorArray(fmt.Errorf("cannot attend over the decode batch: keys of shape %v for %d rows", keys.Shape(), len(l.b.pads)))
	}
	prev, n := l.offset, keys.Dim(2)
	if prev+n > l.keys.Dim(2) {
		size := (step + n - 1) / step * step
		l.keys = replace(l.keys, padRight(slice2(l.keys, 0, prev), size))
		l.values = replace(l.values, padRight(slice2(l.values, 0, prev), size))
	}
	l.offset += n
	l.keys = replace(l.keys, setSlice2(l.keys, keys, prev, l.offset))
	l.values = replace(l.values, setSlice2(l.values, values, prev, l.offset))
	k, v := l.fetch()
	return sdpa(queries, k, v, scale, mask)
}

// fetch is the written part of the buffers (every row's padding included),
// new handles in the caller's scope.
func (l *BatchLayer) fetch() (*mlx.Array, *mlx.Array) {
	return slice2(l.keys, 0, l.offset), slice2(l.values, 0, l.offset)
}
