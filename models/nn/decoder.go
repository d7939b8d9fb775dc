package nn

import (
	"fmt"

	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
)

// Decoder is one architecture's language model, mlx-lm's Model class: an
// architecture package builds it from config.json and Weights, and package
// models runs it (Model, RowModel, the embedding pipeline).
type Decoder interface {
	// Forward runs token ids [B, L] (int32) with one cache per layer (nil:
	// no caches, a causal mask) and returns the final normalized hidden
	// states [B, L, hidden]: mlx-lm's model.model(inputs, cache). A cache may
	// be a kv.Rows (a decode batch's rows), which the layers need not know.
	Forward(tokens *mlx.Array, caches []kv.Cache) *mlx.Array
	// Unembed is the output projection of hidden states: logits [B, L, vocab].
	Unembed(h *mlx.Array) *mlx.Array
	// NewCaches is mlx-lm's make_prompt_cache for this model.
	NewCaches(opts kv.Options) []kv.Cache
	// Facts is what the architecture decided of the model's description.
	Facts() Facts
}

// Facts is the part of a model's description its architecture decides.
type Facts struct {
	Layers        int
	ContextLength int    // after the architecture's default; 0 if unknown
	Dtype         string // activation dtype (that of the embedding)
	// Caches is how many caches NewCaches makes when that is fewer than
	// Layers (gemma4's KV-shared layers read an earlier layer's cache and
	// have none of their own); 0 means one per layer.
	Caches int
}

// Builder makes an architecture's Decoder from its config.json (the raw
// bytes: each architecture reads its own ModelArgs, after models.ParseConfig
// has bounded every size in them) and the checkpoint's weights; it calls
// Weights.Finish.
type Builder func(config []byte, w *Weights) (Decoder, error)

// DefaultCaches is mlx-lm's make_prompt_cache for a model without a
// make_cache: rotating caches of MaxKVSize keeping 4 tokens, else growable.
func DefaultCaches(layers int, opts kv.Options) []kv.Cache {
	out := make([]kv.Cache, layers)
	for i := range out {
		if opts.MaxKVSize > 0 {
			out[i] = kv.NewRotating(opts.MaxKVSize, 4)
		} else {
			out[i] = kv.NewKVCache()
		}
	}
	return out
}

// SlidingCaches is the make_cache of models with sliding-window layers
// (llama's layer_types, gemma3): a rotating cache of the window for a
// sliding layer, a growable one otherwise.
func SlidingCaches(sliding []bool, window int) []kv.Cache {
	out := make([]kv.Cache, len(sliding))
	for i, s := range sliding {
		if s {
			out[i] = kv.NewRotating(window, 0)
		} else {
			out[i] = kv.NewKVCache()
		}
	}
	return out
}

// CheckHeads refuses attention shapes no layer can take.
func CheckHeads(heads, kvHeads, headDim int) error {
	if kvHeads <= 0 || heads%kvHeads != 0 {
		return fmt.Errorf("num_attention_heads %d is not a multiple of num_key_value_heads %d", heads, kvHeads)
	}
	if headDim <= 0 {
		return fmt.Errorf("head dimension %d, want > 0", headDim)
	}
	return nil
}
