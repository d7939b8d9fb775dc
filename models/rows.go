package models

import (
	"fmt"

	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
)

// RowModel is a Model that can run one decode step for several independent
// sequences at once (the rows of a continuous batch), each with its own
// caches at its own offset. Every architecture Load returns implements it.
type RowModel interface {
	Model
	// ForwardRows runs tokens [B, 1] (int32), row r's token with rows[r],
	// that row's per-layer caches (as NewCaches makes them), and returns the
	// logits [B, 1, vocab]. Row r's logits are bit-identical to
	// Forward(tokens[r:r+1], rows[r]). Errors come back as error arrays.
	ForwardRows(tokens *mlx.Array, rows [][]kv.Cache) *mlx.Array
}

// ForwardRows implements RowModel. Everything that treats tokens
// independently (embedding, projections, norms, MLP, lm head) runs once over
// the [B, 1, hidden] batch; on MLX's CPU backend each row of a matmul,
// quantized matmul or norm is accumulated in the same order as a one-row
// call, so those rows keep their bits (rows_test.go checks it). Attention,
// which reads each row's cache, offset and mask, runs row by row on slices
// of the batched q/k/v and is concatenated back on the batch axis.
func (d *decoder) ForwardRows(tokens *mlx.Array, rows [][]kv.Cache) *mlx.Array {
	if err := tokens.Err(); err != nil {
		return tokens
	}
	if tokens.Ndim() != 2 || tokens.Dim(1) != 1 {
		return mlx.ErrorArray(fmt.Errorf("cannot run the model on rows: token ids of shape %v, want [rows, 1]", tokens.Shape()))
	}
	if len(rows) != tokens.Dim(0) {
		return mlx.ErrorArray(fmt.Errorf("cannot run the model on rows: %d rows of caches for %d tokens", len(rows), tokens.Dim(0)))
	}
	for r, caches := range rows {
		if len(caches) != len(d.layers) {
			return mlx.ErrorArray(fmt.Errorf("cannot run the model on rows: row %d has %d caches for %d layers", r, len(caches), len(d.layers)))
		}
		for i, c := range caches {
			if c == nil {
				return mlx.ErrorArray(fmt.Errorf("cannot run the model on rows: row %d has no cache for layer %d", r, i))
			}
		}
	}
	s := mlx.NewScope()
	defer s.Close()
	out := d.forwardRows(tokens, rows)
	s.Keep(out)
	return out
}

func (d *decoder) forwardRows(tokens *mlx.Array, rows [][]kv.Cache) *mlx.Array {
	h := d.embedIn(tokens)
	// Each row's masks, made before any layer writes its caches, exactly as
	// forward makes them for a one-row call.
	full := make([]kv.Mask, len(rows))
	sliding := make([]kv.Mask, len(rows))
	for r, caches := range rows {
		full[r] = kv.AttentionMask(1, cacheAt(caches, d.globalIdx), 0)
		if d.slidingIdx >= 0 {
			sliding[r] = kv.AttentionMask(1, cacheAt(caches, d.slidingIdx), d.window)
		}
	}
	for i, l := range d.layers {
		masks := full
		if l.sliding {
			masks = sliding
		}
		h = l.around(h, func(x *mlx.Array) *mlx.Array { return l.attn.applyRows(x, masks, rows, i) })
	}
	return d.head(h)
}

// applyRows is attention over x [B, 1, hidden] where row r attends through
// rows[r][layer] with masks[r].
func (a *attention) applyRows(x *mlx.Array, masks []kv.Mask, rows [][]kv.Cache, layer int) *mlx.Array {
	b, l := x.Dim(0), x.Dim(1)
	queries, keys, values := a.project(x)
	if b == 1 {
		return a.output(a.attend(queries, keys, values, masks[0], rows[0][layer]), b, l)
	}
	// RoPE once for all rows, each at its own cache's offset (as mlx-lm's
	// BatchGenerator ropes with an offset array); then each row attends
	// through its own cache. Distinct slices for keys and values: the cache
	// takes what it is given as its own.
	offs := make([]int32, b)
	for r := range rows {
		if c := rows[r][layer]; c != nil {
			offs[r] = int32(c.Offset())
		}
	}
	at := mlx.FromSlice(offs, b)
	queries, keys = a.rope.applyRows(queries, at), a.rope.applyRows(keys, at)
	outs := make([]*mlx.Array, b)
	for r := range rows {
		outs[r] = kv.Attention(rows[r][layer], row(queries, r), row(keys, r), row(values, r), a.scale, masks[r])
	}
	return a.output(mlx.Concatenate(outs, 0), b, l)
}

// row is x[r:r+1] on a [B, H, L, D] array.
func row(x *mlx.Array, r int) *mlx.Array {
	sh := x.Shape()
	if len(sh) != 4 {
		return mlx.Slice(x, []int{r}, []int{r + 1}) // carries MLX's shape error
	}
	return mlx.Slice(x, []int{r, 0, 0, 0}, []int{r + 1, sh[1], sh[2], sh[3]})
}
