package gen

import (
	"fmt"
	"math"

	"github.com/mlxgo/mlxgo/mlx"
)

// SamplerOptions are mlx-lm's make_sampler arguments. The zero value is greedy
// decoding, mlx-lm's default.
type SamplerOptions struct {
	Temp            float64 // 0: greedy argmax
	TopP            float64 // applied when 0 < TopP < 1
	MinP            float64 // applied when != 0; must lie in [0, 1]
	MinTokensToKeep int     // for MinP; 0 means mlx-lm's default 1
	TopK            int     // applied when > 0; must be below the vocabulary size
	// XTC ("exclude top choices"): with probability XTCProbability (applied
	// when > 0), every token above XTCThreshold but the least likely of them
	// is dropped. mlx-lm's default threshold is DefaultXTCThreshold; 0 is
	// taken as given. XTCSpecialTokens are never dropped (mlx_lm.server
	// passes the EOS ids and "\n").
	XTCProbability   float64
	XTCThreshold     float64
	XTCSpecialTokens []int32
}

// DefaultXTCThreshold is make_sampler's xtc_threshold default.
const DefaultXTCThreshold = 0.1

// Sampler picks the next token from log-probabilities [B, V] (logits minus
// their logsumexp) and returns its ids [B] (uint32, as MLX's argmax and
// categorical return them). It must be called on the executor; it draws from
// MLX's global random key sequence, so mlx.Seed(s) followed by the same
// calls gives the same tokens as mx.random.seed(s) under mlx-lm.
type Sampler interface {
	Sample(logprobs *mlx.Array) *mlx.Array
}

// Greedy reports whether the options pick the argmax (no randomness).
func (o SamplerOptions) Greedy() bool { return o.Temp == 0 }

// Validate checks the options the way mlx-lm's sampling functions do, before
// any array exists; vocab is the model's vocabulary size (0: unknown, skip
// the top-k bound).
func (o SamplerOptions) Validate(vocab int) error {
	switch {
	case math.IsNaN(o.Temp) || o.Temp < 0 || math.IsInf(o.Temp, 0):
		return fmt.Errorf("invalid temperature %v: want a finite value >= 0", o.Temp)
	case o.Temp == 0:
		return nil // greedy: mlx-lm ignores the other settings
	case math.IsNaN(o.TopP) || o.TopP < 0 || o.TopP > 1:
		return fmt.Errorf("invalid top-p %v: want a value in [0, 1]", o.TopP)
	case math.IsNaN(o.MinP) || o.MinP < 0 || o.MinP > 1:
		return fmt.Errorf("invalid min-p %v: want a value in [0, 1]", o.MinP)
	case o.MinTokensToKeep < 0:
		return fmt.Errorf("invalid min-tokens-to-keep %d: want a positive integer", o.MinTokensToKeep)
	case o.TopK < 0:
		return fmt.Errorf("invalid top-k %d: want 0 (off) or a positive integer", o.TopK)
	case o.TopK > 0 && vocab > 0 && o.TopK >= vocab:
		return fmt.Errorf("invalid top-k %d: want a value below the vocabulary size %d", o.TopK, vocab)
	case math.IsNaN(o.XTCProbability) || o.XTCProbability < 0 || o.XTCProbability > 1:
		return fmt.Errorf("invalid xtc probability %v: want a value in [0, 1]", o.XTCProbability)
	case o.XTCProbability > 0 && (math.IsNaN(o.XTCThreshold) || o.XTCThreshold < 0 || o.XTCThreshold > 0.5):
		return fmt.Errorf("invalid xtc threshold %v: want a value in [0, 0.5]", o.XTCThreshold)
	}
	for _, id := range o.XTCSpecialTokens {
		if id < 0 || (vocab > 0 && int(id) >= vocab) {
			return fmt.Errorf("invalid xtc special token %d: want an id in [0, %d)", id, vocab)
		}
	}
	return nil
}

// NewSampler builds make_sampler's chain: greedy when Temp is 0, else the
// filters in mlx-lm's order (top-p, min-p, XTC, top-k) and a categorical draw from
// logprobs / temp. The order matters: each filter sees the previous one's
// -inf entries.
func NewSampler(o SamplerOptions, vocab int) (Sampler, error) {
	if err := o.Validate(vocab); err != nil {
		return nil, err
	}
	if o.Greedy() {
		return greedy{}, nil
	}
	c := &chain{temp: o.Temp}
	if o.TopP > 0 && o.TopP < 1 {
		c.filters = append(c.filters, topP(o.TopP))
	}
	if o.MinP != 0 {
		keep := o.MinTokensToKeep
		if keep == 0 {
			keep = 1
		}
		c.filters = append(c.filters, minP(o.MinP, keep))
	}
	if o.XTCProbability > 0 {
		c.filters = append(c.filters, xtc(o.XTCProbability, o.XTCThreshold, o.XTCSpecialTokens))
	}
	if o.TopK > 0 {
		c.filters = append(c.filters, topK(o.TopK))
	}
	return c, nil
}

// greedy is mlx-lm's greedy_sampler: argmax over the last axis.
type greedy struct{}

func (greedy) Sample(logprobs *mlx.Array) *mlx.Array { return mlx.Argmax(logprobs, -1, false) }

// filter masks log-probabilities that may not be drawn with -inf. key gives
// the next random key for a filter that draws (XTC): nil, MLX's global
// sequence, for the chain; the row's own for a seeded row.
type filter func(logprobs *mlx.Array, key func() *mlx.Array) *mlx.Array

type chain struct {
	filters []filter
	temp    float64
}

func (c *chain) Sample(logprobs *mlx.Array) *mlx.Array {
	for _, f := range c.filters {
		logprobs = f(logprobs, globalKey)
	}
	// categorical_sampling: logits * (1.0 / temp). Python computes the
	// reciprocal in double and MLX narrows it to float before the weak-scalar
	// cast to the logits' dtype; float32(...) here is that same narrowing.
	scaled := mlx.Multiply(logprobs, mlx.ScalarLike(float32(1.0/c.temp), logprobs))
	return mlx.Categorical(scaled, -1, nil)
}

// globalKey draws from MLX's global key sequence (KeySequence.default()).
func globalKey() *mlx.Array { return nil }

// xtc is apply_xtc: the tokens above the threshold but the least likely of
// them are dropped when a uniform draw (one key, before categorical's) is at
// most p. mlx-lm compiles it; the ops are elementwise, so unfused they round
// the same.
func xtc(p, threshold float64, special []int32) filter {
	return func(logits *mlx.Array, key func() *mlx.Array) *mlx.Array {
		probs := mlx.Softmax(logits, []int{-1}, false)
		above := mlx.Where(mlx.Greater(probs, mlx.ScalarLike(float32(threshold), probs)), probs, mlx.ScalarLike(float32(math.Inf(1)), probs))
		mask := mlx.Greater(probs, mlx.Min(above, []int{-1}, true))
		if len(special) > 0 {
			keep := make([]bool, logits.Dim(-1))
			for i := range keep {
				keep[i] = true
			}
			for _, id := range special {
				keep[id] = false
			}
			mask = mlx.LogicalAnd(mask, mlx.FromSlice(keep))
		}
		u := mlx.Uniform(mlx.Scalar(0, mlx.Float32), mlx.Scalar(1, mlx.Float32), nil, mlx.Float32, key())
		skip := mlx.Greater(u, mlx.Scalar(float32(p), mlx.Float32))
		return mlx.Where(skip, logits, mlx.Where(mask, negInf(logits), logits))
	}
}

// negInf is -inf in a's dtype, the weak scalar mlx-lm writes as -float("inf").
func negInf(a *mlx.Array) *mlx.Array { return mlx.ScalarLike(float32(math.Inf(-1)), a) }

// topP is apply_top_p: keep the smallest set of most likely tokens whose
// probability mass reaches p (mass summed in float32 from the sorted end).
func topP(p float64) filter {
	return func(logprobs *mlx.Array, _ func() *mlx.Array) *mlx.Array {
		sorted := mlx.Sort(logprobs, -1)
		probs := mlx.Exp(mlx.AsType(sorted, mlx.Float32))
		above := mlx.Cumsum(probs, -1, true, false)
		last := above.Ndim() - 1
		total := mlx.Add(sliceLast(above, 0, 1, last), sliceLast(probs, 0, 1, last))
		threshold := mlx.Multiply(mlx.ScalarLike(float32(p), total), total)
		dropped := mlx.Sum(mlx.GreaterEqual(above, threshold), []int{-1}, true)
		cut := mlx.TakeAlongAxis(sorted, dropped, -1)
		return mlx.Where(mlx.Less(logprobs, cut), negInf(logprobs), logprobs)
	}
}

// minP is apply_min_p: drop tokens less likely than p times the top token,
// always keeping the keep most likely ones.
func minP(p float64, keep int) filter {
	return func(logprobs *mlx.Array, _ func() *mlx.Array) *mlx.Array {
		top := mlx.Max(logprobs, []int{-1}, true)
		scaled := mlx.Add(top, mlx.ScalarLike(float32(math.Log(p)), top))
		remove := mlx.Less(logprobs, scaled)
		if keep > 1 {
			idx := mlx.Argpartition(logprobs, -keep, -1)
			n := idx.Dim(idx.Ndim() - 1)
			idx = sliceLast(idx, n-keep, n, idx.Ndim()-1)
			remove = mlx.PutAlongAxis(remove, idx, mlx.Scalar(0, mlx.Bool), -1)
		}
		return mlx.Where(remove, negInf(logprobs), logprobs)
	}
}

// topK is apply_top_k: everything outside the k largest becomes -inf.
func topK(k int) filter {
	return func(logprobs *mlx.Array, _ func() *mlx.Array) *mlx.Array {
		idx := mlx.Argpartition(mlx.Negative(logprobs), k-1, -1)
		n := idx.Dim(idx.Ndim() - 1)
		idx = sliceLast(idx, k, n, idx.Ndim()-1)
		return mlx.PutAlongAxis(logprobs, idx, mlx.Scalar(float32(math.Inf(-1)), logprobs.Dtype()), -1)
	}
}

// sliceLast is a[..., start:stop] along axis (the last one).
func sliceLast(a *mlx.Array, start, stop, axis int) *mlx.Array {
	if a.Err() != nil {
		return a
	}
	lo := make([]int, a.Ndim())
	hi := a.Shape()
	lo[axis], hi[axis] = start, stop
	return mlx.Slice(a, lo, hi)
}
