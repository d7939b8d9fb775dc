package embed

import (
	"context"
	"fmt"
	"sort"

	"github.com/mlxgo/mlxgo/mlx"
)

// Embed computes one vector per input, in input order. It tokenizes and
// checks every input before running any, so a bad input fails the call
// without wasted work; ctx is checked between batches.
func (m *Model) Embed(ctx context.Context, inputs []Input, opts Options) (*Result, error) {
	if m.enc == nil {
		return nil, fmt.Errorf("cannot embed: the model is closed")
	}
	bs := opts.BatchSize
	if bs <= 0 {
		bs = 32
	}
	ids := make([][]int32, len(inputs))
	res := &Result{Embeddings: make([][]float32, len(inputs))}
	for i, in := range inputs {
		var err error
		if ids[i], err = m.Tokenize(i, in, opts); err != nil {
			return nil, err
		}
		res.Tokens += len(ids[i])
	}
	// Longest first, as sentence-transformers orders them: batches of
	// similar lengths waste little work on padding.
	order := make([]int, len(inputs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return len(ids[order[a]]) > len(ids[order[b]]) })
	for start := 0; start < len(order); start += bs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		batch := order[start:min(start+bs, len(order))]
		rows := make([][]int32, len(batch))
		for j, i := range batch {
			rows[j] = ids[i]
		}
		vecs, err := m.embedBatch(rows, m.Pipeline.Normalize && !opts.NoNormalize)
		if err != nil {
			return nil, err
		}
		for j, i := range batch {
			res.Embeddings[i] = vecs[j]
		}
	}
	return res, nil
}

// embedBatch runs rows, right-padded to the longest, and returns their
// pooled (and normalized) vectors.
func (m *Model) embedBatch(rows [][]int32, normalize bool) ([][]float32, error) {
	n := len(rows[0])
	for _, r := range rows {
		n = max(n, len(r))
	}
	flat := make([]int32, len(rows)*n)
	valid := make([]float32, len(rows)*n)
	last := make([]int32, len(rows))
	for j, r := range rows {
		copy(flat[j*n:], r) // pads are id 0: masked out, whatever token it is
		for k := range r {
			valid[j*n+k] = 1
		}
		last[j] = int32(len(r) - 1)
	}
	var out []float32
	err := mlx.Do(func() error {
		s := mlx.NewScope()
		defer s.Close()
		idsA := mlx.FromSlice(flat, len(rows), n)
		maskA := mlx.FromSlice(valid, len(rows), n)
		h := m.enc.hidden(idsA, maskA)
		v := pool(h, maskA, mlx.FromSlice(last, len(rows)), m.Pipeline.Pooling)
		if normalize {
			v = l2normalize(v)
		}
		var err error
		out, err = mlx.AsType(v, mlx.Float32).Float32s()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cannot embed a batch of %d inputs: %w", len(rows), err)
	}
	dims := len(out) / len(rows)
	vecs := make([][]float32, len(rows))
	for j := range vecs {
		vecs[j] = out[j*dims : (j+1)*dims : (j+1)*dims]
	}
	return vecs, nil
}

// pool reduces token vectors h [B, L, H] to [B, H] over the valid positions
// of mask [B, L] (float32 0/1), in sentence-transformers' Pooling formulas.
func pool(h, mask, last *mlx.Array, p Pooling) *mlx.Array {
	h = mlx.AsType(h, mlx.Float32)
	m := mlx.ExpandDims(mask, 2)
	switch p {
	case PoolCLS:
		return mlx.Squeeze(mlx.Slice(h, []int{0, 0, 0}, []int{h.Dim(0), 1, h.Dim(2)}), 1)
	case PoolMax:
		// Pads become -1e9 so they never win, as sentence-transformers does.
		neg := mlx.Scalar(-1e9, mlx.Float32)
		return mlx.Max(mlx.Where(mlx.Greater(m, mlx.Scalar(0, mlx.Float32)), h, neg), []int{1}, false)
	case PoolLast:
		idx := mlx.Reshape(mlx.AsType(last, mlx.Int32), h.Dim(0), 1, 1)
		return mlx.Squeeze(mlx.TakeAlongAxis(h, idx, 1), 1)
	default: // PoolMean: sum(h·mask) / clamp(count, 1e-9)
		sum := mlx.Sum(mlx.Multiply(h, m), []int{1}, false)
		count := mlx.Maximum(mlx.Sum(m, []int{1}, false), mlx.Scalar(1e-9, mlx.Float32))
		return mlx.Divide(sum, count)
	}
}

// l2normalize is torch's F.normalize(p=2): v / max(‖v‖, 1e-12).
func l2normalize(v *mlx.Array) *mlx.Array {
	norm := mlx.Sqrt(mlx.Sum(mlx.Square(v), []int{-1}, true))
	return mlx.Divide(v, mlx.Maximum(norm, mlx.Scalar(1e-12, mlx.Float32)))
}
