package gen

import (
	"fmt"
	"math"

	"github.com/mlxgo/mlxgo/mlx"
)

// MaxTopLogprobs is the most alternatives one token may report, OpenAI's
// bound for top_logprobs.
const MaxTopLogprobs = 20

// Logprob is one generated token's log-probability, as generate_step
// computes it (logits after the processors minus their logsumexp, in the
// logits' dtype: bfloat16 values are exact in float32), with the Top most
// likely alternatives when Options.TopLogprobs > 0.
type Logprob struct {
	Token   int32
	Logprob float32
	Top     []TokenLogprob
}

// TokenLogprob is one alternative token and its log-probability.
type TokenLogprob struct {
	Token   int32
	Logprob float32
}

// readLogprobs reads token tok's log-probability and the top most likely
// tokens from a step's log-probabilities ([1, V] or [V], already evaluated or
// scheduled). It adds no op to the graph: a new op would queue behind the
// step already scheduled one ahead and wait for it. The whole row is copied
// to the host, bfloat16 and float16 widened in Go (exact).
//
// Top lists the most likely first; equal values list the lower token id
// first. mlx_lm.server's _format_top_logprobs does not order them at all (it
// returns argpartition's first top_n in partition order, which is not
// specified), so this is the deterministic order consistent with it: the same
// set wherever values differ at the cut, sorted. NaN ranks below -Inf.
func readLogprobs(logprobs *mlx.Array, tok int32, top int) (Logprob, error) {
	if err := logprobs.Err(); err != nil {
		return Logprob{}, err
	}
	if top < 0 || top > MaxTopLogprobs {
		return Logprob{}, fmt.Errorf("invalid top logprobs %d: want 0 to %d", top, MaxTopLogprobs)
	}
	shape := logprobs.Shape()
	if !(len(shape) == 1 || len(shape) == 2 && shape[0] == 1) {
		return Logprob{}, fmt.Errorf("cannot read log-probabilities of shape %v: want [1, vocab] or [vocab]", shape)
	}
	vals, err := hostFloats(logprobs)
	if err != nil {
		return Logprob{}, fmt.Errorf("cannot read log-probabilities: %w", err)
	}
	if tok < 0 || int(tok) >= len(vals) {
		return Logprob{}, fmt.Errorf("cannot read the log-probability of token %d: vocabulary size %d", tok, len(vals))
	}
	out := Logprob{Token: tok, Logprob: vals[tok]}
	if top > 0 {
		out.Top = topLogprobs(vals, min(top, len(vals)))
	}
	return out, nil
}

// hostFloats copies a floating-point array to the host as float32 without
// adding an op (see readLogprobs).
func hostFloats(a *mlx.Array) ([]float32, error) {
	switch dt := a.Dtype(); dt {
	case mlx.Float32:
		return mlx.ToSlice[float32](a)
	case mlx.BFloat16, mlx.Float16:
		bits, err := mlx.ToSlice[uint16](a)
		if err != nil {
			return nil, err
		}
		widen := mlx.BFloat16ToFloat32
		if dt == mlx.Float16 {
			widen = mlx.Float16ToFloat32
		}
		out := make([]float32, len(bits))
		for i, b := range bits {
			out[i] = widen(b)
		}
		return out, nil
	default:
		return nil, fmt.Errorf("log-probabilities have dtype %s, want a float dtype", dt)
	}
}

// before reports whether (a, ia) ranks above (b, ib): larger value first,
// then lower id; NaN below everything.
func before(a float32, ia int, b float32, ib int) bool {
	an, bn := isNaN32(a), isNaN32(b)
	switch {
	case an || bn:
		return !an && bn || an && bn && ia < ib
	case a != b:
		return a > b
	}
	return ia < ib
}

// topLogprobs returns the k best entries of vals in rank order, keeping a
// sorted list of k (k <= MaxTopLogprobs, so insertion beats a heap and most
// entries are rejected by one comparison with the current k-th).
func topLogprobs(vals []float32, k int) []TokenLogprob {
	if k <= 0 {
		return nil
	}
	best := make([]TokenLogprob, 0, k)
	for i, v := range vals {
		n := len(best)
		if n == k {
			last := best[n-1]
			// Most values fall below the k-th: one float compare rejects
			// them (a NaN fails it and goes on to the full rule).
			if v < last.Logprob || !before(v, i, last.Logprob, int(last.Token)) {
				continue
			}
			n--
		} else {
			best = append(best, TokenLogprob{})
		}
		// Shift worse entries down and insert i at its rank.
		j := n
		for j > 0 && before(v, i, best[j-1].Logprob, int(best[j-1].Token)) {
			best[j] = best[j-1]
			j--
		}
		best[j] = TokenLogprob{Token: int32(i), Logprob: v}
	}
	return best
}

// isNaN32 is math.IsNaN for float32.
func isNaN32(f float32) bool { return math.IsNaN(float64(f)) }
