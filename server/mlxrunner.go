package server

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/mlxgo/mlxgo/gen"
	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models"
	"github.com/mlxgo/mlxgo/tok"
)

// MLXRunner runs completion executions on the MLX executor, reusing KV from
// the prompt cache when it holds a prefix: one at a time with gen.Generate
// (Run, the serial mechanism), or as rows of a gen.Batch when BatchRows > 1
// (batchrunner.go, continuous batching).
type MLXRunner struct {
	Model     models.Model
	Cache     *PromptCache // nil: no prompt cache
	BatchRows int          // the most rows decoded together; <= 1: serial
	// KV and QuantizedKVStart are the caches every execution gets and
	// where their quantization starts (WithKV); the zero value is the
	// model's own caches, never quantized.
	KV               kv.Options
	QuantizedKVStart int

	// The batch and its counts, used on the engine goroutine only.
	batch          *gen.Batch
	rows, decoding int
	abort          error // while Abort closes the batch: the rows' error
}

// Run implements Runner. With a cache hit only the uncached prompt tokens go
// to gen.Generate, as mlx_lm.server passes only the rest of the prompt; the
// logits processors then see that rest, as they do there.
func (r *MLXRunner) Run(ctx context.Context, prompt []int32, o gen.Options, seed *uint64, emit func(int32) error) (Result, error) {
	var res Result
	err := mlx.Do(func() error {
		var caches []kv.Cache
		if r.Cache != nil {
			caches, res.CachedTokens = r.Cache.take(prompt)
		}
		o.KV, o.QuantizedKVStart = r.KV, r.QuantizedKVStart
		if caches == nil {
			caches, res.CachedTokens = r.Model.NewCaches(o.KV), 0
		}
		if seed != nil {
			// mx.random.seed before anything draws a key: the same seed and
			// request give the same tokens (the engine is serial).
			if err := mlx.Seed(*seed); err != nil {
				kv.FreeAll(caches)
				return err
			}
		}
		// gen.Generate counts the tokens the caches hold against the
		// context, and leaves the caches to settle.
		o.Caches = caches
		var out []int32
		st, err := gen.Generate(ctx, r.Model, prompt[res.CachedTokens:], o, func(t int32) error {
			out = append(out, t)
			return emit(t)
		})
		res.Stats = st
		res = r.settle(res, append(append([]int32(nil), prompt...), out...), o.Caches, err)
		return err
	})
	return res, err
}

// settle ends an execution on either path: its caches go back to the
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

// keep puts the caches back under the tokens they hold. Generation may run
// one step ahead (gen.Generate does), so the caches may hold one token more
// than was emitted (an EOS) or one less (the last token at max_tokens): the
// key is what the caches hold, and an unknown extra token is trimmed off.
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
	r.Cache.put(tokens[:held], caches)
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
			KVScheme:         kvScheme(info, m.NewCaches(kv.Options{})),
			FidelityContract: "L1: logits bit-identical to mlx-lm 0.32.2 on the same libmlx",
		},
		Runner: r,
	}
}

// weightScheme names the weights' numeric scheme: the quantization and the
// activation dtype, or for unquantized weights their dtype.
func weightScheme(info models.Info) string {
	if info.Quantization == "" || info.Quantization == "none" {
		return fmt.Sprintf("%s %s weights, not quantized (%s)", info.ModelType, info.Dtype, info.Format)
	}
	return fmt.Sprintf("%s %s, %s activations (%s)", info.ModelType, info.Quantization, info.Dtype, info.Format)
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
