package gen

import (
	"fmt"
	"math"
	"sort"

	"github.com/mlxgo/mlxgo/mlx"
)

// DefaultPenaltyContext is mlx-lm's default repetition, presence and
// frequency context: the last 20 tokens.
const DefaultPenaltyContext = 20

// LogitsProcessor rewrites a step's logits [B, V] before the log-softmax,
// given every token so far (prompt included) as an int32 array [N], N >= 1.
// It runs on the executor inside the step's scope.
type LogitsProcessor interface {
	Process(tokens, logits *mlx.Array) *mlx.Array
	// Context is how many trailing tokens Process reads (0: none), so the
	// loop can keep the token history that short.
	Context() int
}

// ProcessorOptions are mlx-lm's make_logits_processors arguments. Zero
// penalties are off, as None or 0 are in mlx-lm.
type ProcessorOptions struct {
	LogitBias             map[int32]float32
	RepetitionPenalty     float64
	RepetitionContextSize int // 0: DefaultPenaltyContext
	PresencePenalty       float64
	PresenceContextSize   int // 0: DefaultPenaltyContext
	FrequencyPenalty      float64
	FrequencyContextSize  int // 0: DefaultPenaltyContext
}

// NewProcessors builds the processors in mlx-lm's order: logit bias, then
// the repetition, presence and frequency penalties. vocab bounds the bias
// token ids (0: unchecked).
func NewProcessors(o ProcessorOptions, vocab int) ([]LogitsProcessor, error) {
	var out []LogitsProcessor
	if len(o.LogitBias) > 0 {
		b := &logitBias{}
		for id := range o.LogitBias {
			if id < 0 || (vocab > 0 && int(id) >= vocab) {
				return nil, fmt.Errorf("invalid logit bias token %d: want an id in [0, %d)", id, vocab)
			}
			b.ids = append(b.ids, id)
		}
		sort.Slice(b.ids, func(i, j int) bool { return b.ids[i] < b.ids[j] })
		for _, id := range b.ids {
			b.values = append(b.values, o.LogitBias[id])
		}
		out = append(out, b)
	}
	if p := o.RepetitionPenalty; p != 0 {
		if p < 0 || math.IsNaN(p) || math.IsInf(p, 0) {
			return nil, fmt.Errorf("invalid repetition penalty %v: want a non-negative number", p)
		}
		out = append(out, &repetitionPenalty{penalty: p, context: contextSize(o.RepetitionContextSize)})
	}
	if p := o.PresencePenalty; p != 0 {
		if math.IsNaN(p) || math.IsInf(p, 0) {
			return nil, fmt.Errorf("invalid presence penalty %v", p)
		}
		out = append(out, &presencePenalty{penalty: p, context: contextSize(o.PresenceContextSize)})
	}
	if p := o.FrequencyPenalty; p != 0 {
		if math.IsNaN(p) || math.IsInf(p, 0) {
			return nil, fmt.Errorf("invalid frequency penalty %v", p)
		}
		out = append(out, &frequencyPenalty{penalty: p, context: contextSize(o.FrequencyContextSize)})
	}
	return out, nil
}

func contextSize(n int) int {
	if n <= 0 {
		return DefaultPenaltyContext
	}
	return n
}

// lastTokens is tokens[-n:].
func lastTokens(tokens *mlx.Array, n int) *mlx.Array {
	if l := tokens.Dim(0); l > n {
		return mlx.Slice(tokens, []int{l - n}, []int{l})
	}
	return tokens
}

// repetitionPenalty is make_repetition_penalty (CTRL, arXiv:1909.05858):
// logits of recent tokens are divided by the penalty when positive and
// multiplied by it when negative.
type repetitionPenalty struct {
	penalty float64
	context int
}

func (r *repetitionPenalty) Context() int { return r.context }

func (r *repetitionPenalty) Process(tokens, logits *mlx.Array) *mlx.Array {
	recent := lastTokens(tokens, r.context)
	sel := mlx.Take(logits, recent, 1)
	p := mlx.ScalarLike(float32(r.penalty), sel)
	sel = mlx.Where(mlx.Less(sel, mlx.ScalarLike(0, sel)), mlx.Multiply(sel, p), mlx.Divide(sel, p))
	return putColumns(logits, recent, sel)
}

// presencePenalty is make_presence_penalty: subtract the penalty once from
// every token seen in the context.
type presencePenalty struct {
	penalty float64
	context int
}

func (r *presencePenalty) Context() int { return r.context }

func (r *presencePenalty) Process(tokens, logits *mlx.Array) *mlx.Array {
	recent := lastTokens(tokens, r.context)
	sel := mlx.Take(logits, recent, 1)
	sel = mlx.Subtract(sel, mlx.ScalarLike(float32(r.penalty), sel))
	return putColumns(logits, recent, sel)
}

// frequencyPenalty is make_frequency_penalty:
// logits.at[:, recent].subtract(penalty), a scatter_add in which a token seen
// k times has the penalty added k times, rounding to the logits' dtype after
// each add. Without scatter_add in the shim, the same arithmetic is rounds of
// presence-style updates on the gathered columns: round k subtracts once
// more from every column whose token occurs at least k times, and subtracts
// an exact 0 from the others (x - 0 is x, bit for bit). Every copy of a
// token's column goes through the same rounds, so the final put writes
// equal values for duplicates. There are as many rounds as the window is
// long (the largest possible count), since reading the counts back would
// stall the one-step-ahead pipeline: one subtract per round, with the
// per-round penalties built as one [n, n] array and split in a single op.
type frequencyPenalty struct {
	penalty float64
	context int
}

func (r *frequencyPenalty) Context() int { return r.context }

func (r *frequencyPenalty) Process(tokens, logits *mlx.Array) *mlx.Array {
	recent := lastTokens(tokens, r.context)
	n := recent.Dim(0)
	// counts[i] is how often recent[i] occurs in the window.
	same := mlx.Equal(mlx.ExpandDims(recent, 1), mlx.ExpandDims(recent, 0))
	counts := mlx.Sum(mlx.AsType(same, mlx.Int32), []int{1}, false)
	sel := mlx.Take(logits, recent, 1)
	// penalties[k-1][i] is the penalty when recent[i] occurs >= k times, else 0.
	rounds := mlx.Arange(1, float64(n+1), 1, mlx.Int32)
	again := mlx.GreaterEqual(mlx.ExpandDims(counts, 0), mlx.ExpandDims(rounds, 1))
	penalties := mlx.Where(again, mlx.ScalarLike(float32(r.penalty), sel), mlx.ScalarLike(0, sel))
	for _, row := range mlx.Split(penalties, n, 0) {
		sel = mlx.Subtract(sel, row)
	}
	return putColumns(logits, recent, sel)
}

// logitBias is the logit_bias processor: logits.at[:, ids].add(values). The
// ids are distinct, so a gather, an add in the logits' dtype and a put give
// the same bits as MLX's scatter_add.
type logitBias struct {
	ids    []int32
	values []float32
}

func (b *logitBias) Context() int { return 0 }

func (b *logitBias) Process(_, logits *mlx.Array) *mlx.Array {
	ids := mlx.FromSlice(b.ids, len(b.ids))
	vals := mlx.AsType(mlx.FromSlice(b.values, len(b.values)), logits.Dtype())
	sel := mlx.Add(mlx.Take(logits, ids, 1), vals)
	return putColumns(logits, ids, sel)
}

// putColumns is logits[:, ids] = vals for logits [B, V], ids [N], vals [B, N].
// Repeated ids carry equal values, so which write wins does not matter.
func putColumns(logits, ids, vals *mlx.Array) *mlx.Array {
	b := logits.Dim(0)
	idx := mlx.BroadcastTo(mlx.ExpandDims(ids, 0), b, ids.Dim(0))
	return mlx.PutAlongAxis(logits, idx, vals, 1)
}
