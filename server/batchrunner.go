package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/mlxgo/mlxgo/gen"
	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
)

// This file makes MLXRunner a BatchRunner: with BatchRows > 1 its executions are
// rows of one gen.Batch, stepped together on the MLX executor, and each row
// starts from the longest prefix the prompt cache holds, as a serial
// execution does.

// WithBatch returns m scheduled by continuous batching of up to rows rows
// (rows <= 1: serial). Its runner must be an MLXRunner over a model that
// can run rows (gen.RowModel).
func WithBatch(m Model, rows int) (Model, error) {
	r, ok := m.Runner.(*MLXRunner)
	if !ok {
		return m, fmt.Errorf("cannot batch %s: its runner (%T) is not an MLX runner", m.ID, m.Runner)
	}
	if rows > 1 && (r.KV.KVBits > 0 || len(r.KV.Layers) > 0) {
		return m, errBatchQuantizedKV(m.ID, rows)
	}
	if _, ok := r.Model.(gen.RowModel); !ok && rows > 1 {
		return m, fmt.Errorf("cannot batch %s: the model cannot decode rows together", m.ID)
	}
	m.Runner = &MLXRunner{Model: r.Model, Cache: r.Cache, BatchRows: rows, KV: r.KV, QuantizedKVStart: r.QuantizedKVStart}
	return m, nil
}

// MaxRows implements BatchRunner: the concurrency cap.
func (r *MLXRunner) MaxRows() int { return max(1, r.BatchRows) }

// Add implements BatchRunner. As in Run, a prompt-cache hit leaves only the
// uncached tokens to prefill; the row's seed is its own random key, so rows
// with seeds do not disturb each other's draws.
func (r *MLXRunner) Add(ctx context.Context, prompt []int32, o gen.Options, seed *uint64, emit func(int32) error, done func(Result, error)) error {
	return mlx.Do(func() error {
		if r.batch == nil {
			rm, ok := r.Model.(gen.RowModel)
			if !ok {
				return errors.New("cannot batch: the model cannot decode rows together")
			}
			r.batch = gen.NewBatch(rm)
		}
		var res Result
		var caches []kv.Cache
		if r.Cache != nil {
			caches, res.CachedTokens = r.Cache.take(prompt)
		}
		o.KV, o.QuantizedKVStart = r.KV, r.QuantizedKVStart
		// o.ContextLength stays whole: gen.Batch counts the tokens the
		// caches hold against it, as gen.Generate does.
		var out []int32
		row := gen.Row{
			Ctx: ctx, Prompt: prompt[res.CachedTokens:], Caches: caches, Options: o, Seed: seed,
			Emit: func(t int32) error {
				out = append(out, t)
				return emit(t)
			},
			Done: func(st gen.Stats, caches []kv.Cache, err error) {
				if r.abort != nil {
					err = r.abort
				}
				res.Stats = st
				done(r.settle(res, append(append([]int32(nil), prompt...), out...), caches, err), err)
			},
		}
		err := r.batch.Add(row)
		if err != nil && caches != nil {
			// The caches are still ours and still hold the prefix.
			r.Cache.put(append([]int32(nil), prompt[:res.CachedTokens]...), caches)
		}
		r.count()
		return err
	})
}

// Step implements BatchRunner: one gen.Batch step on the MLX executor.
func (r *MLXRunner) Step() error {
	return mlx.Do(func() error {
		if r.batch == nil {
			return nil
		}
		defer r.count()
		return r.batch.Step()
	})
}

// Abort implements BatchRunner: the batch is closed, which ends every row
// (each Done reports err), and a new one is made at the next Add.
func (r *MLXRunner) Abort(err error) {
	mlx.Do(func() error {
		if r.batch == nil {
			return nil
		}
		r.abort = err
		r.batch.Close()
		r.batch, r.abort = nil, nil
		r.count()
		return nil
	})
}

// Rows and Decoding implement BatchRunner from the counts taken on the
// executor after each change, so that the engine reads them without a
// round trip to MLX.
func (r *MLXRunner) Rows() int     { return r.rows }
func (r *MLXRunner) Decoding() int { return r.decoding }

func (r *MLXRunner) count() {
	r.rows, r.decoding = 0, 0
	if r.batch != nil {
		r.rows, r.decoding = r.batch.Len(), r.batch.Decoding()
	}
}
