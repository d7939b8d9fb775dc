package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/mlxgo/mlxgo/gen"
	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models"
	"github.com/mlxgo/mlxgo/tok"
)

// MLXRunner runs completion executions as rows of one gen.Batch on the MLX
// executor, at most BatchRows at a time (<= 1: one, the serial mechanism),
// each row starting from the longest prefix the prompt cache holds.
type MLXRunner struct {
	Model     models.Model
	Cache     *PromptCache // nil: no prompt cache
	BatchRows int          // the most rows decoded together; <= 1: one
	// KV and QuantizedKVStart are the caches every execution gets and
	// where their quantization starts (WithKV); the zero value is the
	// model's own caches, never quantized.
	KV               kv.Options
	QuantizedKVStart int

	// The batch and its counts, used on the engine goroutine only.
	batch          *gen.Batch
	rows, decoding int
	abort          error  // while Abort closes the batch: the rows' error
	ranks          *Ranks // nil: one process (WithRanks)
}

// WithBatch returns m scheduled by continuous batching of up to rows rows
// (rows <= 1: one row at a time, the serial mechanism). Its runner must be
// an MLXRunner, over a model that can run rows (gen.RowModel) when rows > 1.
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

// MaxRows implements Runner: the concurrency cap.
func (r *MLXRunner) MaxRows() int { return max(1, r.BatchRows) }

// Add implements Runner. A prompt-cache hit leaves only the uncached tokens
// to prefill, as mlx_lm.server passes only the rest of the prompt (the
// logits processors then see that rest, as they do there). A row with a
// seed draws from its own random key, the draws mx.random.seed(seed) then
// generate_step would make, so rows with seeds do not disturb each other.
// On rank 0 of a distributed model the row is also recorded for the other
// ranks, which add it at the next Step (distributed.go).
func (r *MLXRunner) Add(ctx context.Context, prompt []int32, o gen.Options, seed *uint64, emit func(int32) error, done func(Result, error)) error {
	if rk := r.ranks; rk != nil && rk.leader() {
		d, s, err := rk.wire(ctx, prompt, o, seed)
		if err != nil {
			return err
		}
		rk.adds = append(rk.adds, d)
		seed = s
	}
	return r.add(ctx, prompt, o, seed, emit, done)
}

// add is Add on this rank alone.
func (r *MLXRunner) add(ctx context.Context, prompt []int32, o gen.Options, seed *uint64, emit func(int32) error, done func(Result, error)) error {
	return mlx.Do(func() error {
		if r.batch == nil {
			r.batch = gen.NewCappedBatch(r.Model, r.MaxRows())
		}
		var res Result
		var caches []kv.Cache
		adapter := adapterFrom(ctx)
		if r.Cache != nil {
			caches, res.CachedTokens = r.Cache.take(adapter, prompt)
		}
		if caches == nil && adapter != "" {
			var err error
			if caches, err = r.adapterCaches(adapter); err != nil {
				return err
			}
		}
		o.KV, o.QuantizedKVStart = r.KV, r.QuantizedKVStart
		// o.ContextLength stays whole: gen.Batch counts the tokens the
		// caches hold against it.
		var out []int32
		rowCtx, id, row := ctx, -1, (*rankRow)(nil)
		if rk := r.ranks; rk != nil {
			// The batch sees only the row's own context, which every rank
			// cancels at the same step; the request's is rank 0's to watch.
			var job context.Context
			if rk.leader() {
				job = ctx
			}
			id, rowCtx = rk.track(job, adapter)
			row = rk.rows[id]
		}
		emitRow := func(t int32) error {
			out = append(out, t)
			if row == nil {
				return emit(t)
			}
			// A distributed row ends only at a step's start, on every
			// rank alike: what emit refuses is rank 0's verdict to hand
			// over, and nothing more of the row is emitted.
			if row.verdict == nil {
				if err := emit(t); err != nil {
					row.verdict = err
				}
			}
			return nil
		}
		grow := gen.Row{
			Ctx: rowCtx, Prompt: prompt[res.CachedTokens:], Caches: caches, Options: o, Seed: seed,
			// Without a prompt cache nothing keeps the caches: every row
			// runs ahead. With one, a row whose caches could not be trimmed
			// of a token fed ahead reads each token first, so that they go
			// back to the prompt cache holding what was emitted.
			AlwaysAhead: r.Cache == nil,
			Emit:        emitRow,
			Done: func(st gen.Stats, caches []kv.Cache, err error) {
				if r.abort != nil {
					err = r.abort
				}
				res.Stats = st
				report := err
				if row != nil {
					// Ended at once (EOS, length) with a verdict not yet
					// handed over: the client hears the verdict, while
					// the caches go where every rank puts them.
					if v := row.verdict; v != nil && !row.sent && err == nil {
						if errors.Is(v, gen.ErrStop) {
							res.Stats.FinishReason = gen.FinishStop
						} else {
							report = v
						}
					}
					r.ranks.untrack(id)
				}
				done(r.settle(res, append(append([]int32(nil), prompt...), out...), caches, err), report)
			},
		}
		err := r.batch.Add(grow)
		if err != nil && row != nil {
			r.ranks.untrack(id)
		}
		if err != nil && caches != nil {
			if res.CachedTokens > 0 {
				// The caches are still ours and still hold the prefix.
				r.Cache.put(adapter, append([]int32(nil), prompt[:res.CachedTokens]...), caches)
			} else {
				kv.FreeAll(caches) // an adapter's fresh caches
			}
		}
		r.count()
		return err
	})
}

// Step implements Runner: one gen.Batch step on the MLX executor. On rank
// 0 of a distributed model the step's schedule goes to the other ranks
// first; a failure there or in the step stops the server (Ranks.Fatal).
func (r *MLXRunner) Step() error {
	return mlx.Do(func() error {
		rk := r.ranks
		if rk != nil {
			if err := rk.handOver(opStep); err != nil {
				return err
			}
			defer rk.stepping()()
		}
		if r.batch == nil {
			return nil
		}
		defer r.count()
		err := r.batch.Step()
		if err != nil && rk != nil {
			return rk.fail(err)
		}
		return err
	})
}

// Abort implements Runner: the batch is closed, which ends every row (each
// Done reports err), and a new one is made at the next Add. The other ranks
// of a distributed model close theirs too.
func (r *MLXRunner) Abort(err error) {
	mlx.Do(func() error {
		if rk := r.ranks; rk != nil && !rk.failed {
			rk.handOver(opAbort)
		}
		r.abortLocal(err)
		return nil
	})
}

// abortLocal closes this rank's batch (on the executor).
func (r *MLXRunner) abortLocal(err error) {
	if r.batch == nil {
		return
	}
	r.abort = err
	r.batch.Close()
	r.batch, r.abort = nil, nil
	r.count()
}

// Rows and Decoding implement Runner from the counts taken on the executor
// after each change, so that the engine reads them without a round trip to
// MLX.
func (r *MLXRunner) Rows() int     { return r.rows }
func (r *MLXRunner) Decoding() int { return r.decoding }

func (r *MLXRunner) count() {
	r.rows, r.decoding = 0, 0
	if r.batch != nil {
		r.rows, r.decoding = r.batch.Len(), r.batch.Decoding()
	}
}

// settle ends an execution: its caches go back to the
// prompt cache under tokens (prompt and generated), or are freed after an
// error or without a prompt cache, and res gets the figures for /metrics.
// It runs on the MLX executor.
func (r *MLXRunner) settle(res Result, tokens []int32, caches []kv.Cache, err error) Result {
	if err != nil || r.Cache == nil {
		kv.FreeAll(caches)
	} else {
		r.keep(tokens, caches)
	}
	if m, merr := mlx.Memory(); merr == nil {
		res.ActiveMemory, res.PeakMemory = m.Active, m.Peak
	}
	if r.Cache != nil {
		res.CacheBytes = r.Cache.Bytes()
	}
	return res
}

// keep puts the caches back under the tokens they hold: gen.Batch hands
// them back holding the prompt and all but the last emitted token (all of
// them after an EOS); the key is what the caches hold, and any token beyond
// what was emitted is trimmed off.
func (r *MLXRunner) keep(tokens []int32, caches []kv.Cache) {
	if len(caches) == 0 {
		return
	}
	held := caches[0].Offset()
	if extra := held - len(tokens); extra > 0 {
		if kv.Trim(caches, extra) != extra {
			kv.FreeAll(caches)
			return
		}
		held = len(tokens)
	}
	adapter, _ := models.AdapterOf(r.Model, caches)
	r.Cache.put(adapter, tokens[:held], caches)
}

// LogitsFidelity is the fidelity contract of a language model's logits under
// the CPU kernels in use: L1, except with --kernels fast on the CPU, whose
// int8-activation matmuls are not MLX's arithmetic.
func LogitsFidelity() string {
	if fastKernels() {
		return "L3: " + fastContract + "; logits differ from mlx-lm 0.32.2's by the error the README measures"
	}
	return "L1: logits bit-identical to mlx-lm 0.32.2 on the same libmlx"
}

const fastContract = "--kernels fast (int8 activations in 4- and 8-bit quantized matmuls, as llama.cpp)"

// fastKernels reports whether models run on the CPU with --kernels fast.
func fastKernels() bool {
	k, err := mlx.CPUKernelsInUse()
	d, derr := mlx.DefaultDevice()
	return err == nil && derr == nil && d.Type == mlx.CPU && !k.Exact()
}

// NewMLXModel describes a loaded model for the server: its limits, EOS ids
// (the config's and the tokenizer's, as mlx-lm's TokenizerWrapper collects
// them), the fixed part of its execution composition, and a runner with a
// prompt cache of cacheBytes (0: none). runtime names mlxgo's version.
func NewMLXModel(m models.Model, t *tok.Tokenizer, id, runtime string, cacheBytes int) Model {
	info := m.Info()
	eos := info.EOSIDs(t.EOSIDs()...)
	r := &MLXRunner{Model: m}
	if cacheBytes > 0 {
		r.Cache = NewPromptCache(cacheBytes)
	}
	return Model{
		ID: id, Tokenizer: t, ContextLength: info.ContextLength, VocabSize: info.VocabSize, EOS: eos,
		Fingerprint: func() (string, error) {
			if info.Artifact == nil {
				return "", fmt.Errorf("the model has no artifact record")
			}
			return info.Artifact.Fingerprint()
		},
		Composition: Composition{
			ModelRuntime:     fmt.Sprintf("%s, %s", runtime, mlx.RuntimeDescription()),
			WeightScheme:     weightScheme(info),
			KVScheme:         kvScheme(info, layerCaches(m, kv.Options{})),
			FidelityContract: LogitsFidelity(),
		},
		Runner:   r,
		Adapters: adaptersOf(info),
	}
}

// weightScheme names the weights' numeric scheme: the quantization and the
// activation dtype, or for unquantized weights their dtype.
func weightScheme(info models.Info) string {
	cast := ""
	if info.CastTo != "" {
		cast = ", cast to " + info.CastTo + " at load (--dtype)"
	}
	if info.Quantization == "" || info.Quantization == "none" {
		return fmt.Sprintf("%s %s weights, not quantized (%s%s)", info.ModelType, info.Dtype, info.Format, cast)
	}
	return fmt.Sprintf("%s %s, %s activations (%s%s)", info.ModelType, info.Quantization, info.Dtype, info.Format, cast)
}

// kvScheme names the KV caches a request gets, from the caches the model
// makes (mlx-lm's make_prompt_cache): their dtype, and how many layers keep
// every token and how many a rotating window (Gemma 3's sliding-window
// layers). caches are made empty and hold no arrays.
func kvScheme(info models.Info, caches []kv.Cache) string {
	out := info.Dtype + ", not quantized"
	windows := map[int]int{} // window size -> layers
	var sizes []int
	for _, c := range caches {
		if r, ok := c.(*kv.Rotating); ok {
			if windows[r.MaxSize()] == 0 {
				sizes = append(sizes, r.MaxSize())
			}
			windows[r.MaxSize()]++
		}
	}
	if len(sizes) == 0 {
		return out
	}
	slices.Sort(sizes)
	rotating := 0
	var parts []string
	for _, w := range sizes {
		rotating += windows[w]
		parts = append(parts, fmt.Sprintf("%d rotating (sliding window of %d tokens)", windows[w], w))
	}
	return fmt.Sprintf("%s; %d layers: %d growing, %s", out, len(caches), len(caches)-rotating, strings.Join(parts, ", "))
}
