// Package gen generates tokens from a decoder model with mlx-lm 0.32.2's
// semantics: its sampler and logits processors (same ops, same order, same
// use of MLX's global random keys), and its generate_step loop (the same
// prefill split, KV quantization switch-over and one-step-ahead pipelining).
// Batch is the one scheduler: `mlxgo serve` runs its requests as rows of
// one, and Generate (`mlxgo generate`) is a batch of one row.
//
// Everything here runs on the MLX executor: call Generate inside mlx.Do.
// gen never tokenizes; it detokenizes only through the Detokenizer its
// caller gives a TextStream.
package gen

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
)

// Model is what generation needs of a model; models.Model satisfies it.
type Model interface {
	Forward(tokens *mlx.Array, caches []kv.Cache) *mlx.Array
	NewCaches(opts kv.Options) []kv.Cache
}

// DefaultPrefillStepSize is mlx-lm's prefill_step_size default.
const DefaultPrefillStepSize = 2048

// Options configure one generation. The zero value is mlx-lm's generate_step
// with greedy sampling, except that MaxTokens 0 means no limit and
// QuantizedKVStart is taken as given (mlx_lm.generate's default is
// kv.DefaultQuantizedKVStart).
type Options struct {
	MaxTokens  int // tokens to generate; <= 0: until EOS or the context is full
	Sampler    SamplerOptions
	Processors ProcessorOptions
	// PrefillStepSize is how many prompt tokens one prefill call takes
	// (0: DefaultPrefillStepSize).
	PrefillStepSize int
	// KV picks the caches (max size, quantization bits and group size).
	KV kv.Options
	// Caches, when set, are caches that already hold a prefix of the
	// context (a prompt cache's): the prompt continues it, and the prefix
	// counts against ContextLength. They stay the caller's: Generate never
	// frees them, and KV quantization replaces entries of this slice in
	// place. Nil: new caches from the model, freed when Generate returns.
	Caches []kv.Cache
	// QuantizedKVStart is the cache offset from which KV.KVBits applies.
	QuantizedKVStart int
	// EOS ids end generation; the EOS token itself is not emitted.
	EOS []int32
	// ContextLength > 0 bounds the prompt (longer is an error, never cut)
	// and, when MaxTokens <= 0, the generation.
	ContextLength int
	// VocabSize > 0 bounds top-k and logit-bias ids.
	VocabSize int
	// Logprobs, when set, is called on the executor just before emit with
	// the emitted token's log-probability (generate_step's logprobs: after
	// the processors, before the sampler's filters and temperature). Nil
	// costs nothing: no op and no host read is added.
	Logprobs func(Logprob)
	// TopLogprobs (0 to MaxTopLogprobs) is how many of the most likely
	// tokens each Logprob lists; it needs Logprobs.
	TopLogprobs int
	// Grammar, when set, constrains the generation (structured output): a
	// processor after mlx-lm's lets through only the tokens it allows next.
	// Each generation (each row) has its own state; each of its steps waits
	// for the token before (the grammar must see it), so no step runs ahead.
	Grammar *Grammar
	// NumDraftTokens, when set, is this execution's tokens per draft pass
	// for a runner with a draft model (serve's num_draft_tokens); nil: the
	// runner's own. Speculate and Batch do not read it.
	NumDraftTokens *int
}

// ErrStop is what an emit function returns to end generation early (a stop
// string was seen); Generate then returns without an error.
var ErrStop = errors.New("stop requested")

// ErrContext marks a prompt that does not fit the model's context.
var ErrContext = errors.New("prompt does not fit the model's context")

// Finish reasons, as OpenAI-style APIs name them.
const (
	FinishStop      = "stop"      // an EOS token or a stop string
	FinishLength    = "length"    // MaxTokens or the context length
	FinishCancelled = "cancelled" // the context was cancelled
)

// Stats are the figures of one generation. Times are wall clock on the
// executor; PrefillDuration runs from the start of the prefill until the first
// generated token is on the host (mlx-lm's prompt_tps uses the same span).
type Stats struct {
	PromptTokens    int
	GeneratedTokens int // tokens emitted, EOS excluded
	PrefillDuration time.Duration
	FirstToken      time.Time     // when the first token was on the host
	DecodeDuration  time.Duration // from the first token to the last
	PeakMemory      uint64        // MLX's peak allocator figure at the end
	KVBytes         int           // bytes the caches hold at the end
	KVBytesPerToken int           // bytes one token adds to the caches
	FinishReason    string
	// Speculative decoding (Speculative): draft tokens proposed, how many
	// of them the target accepted, and the target's verifying passes.
	DraftTokens, AcceptedTokens, TargetPasses int
}

// AcceptanceRate is the share of draft tokens the target accepted (0
// without drafts).
func (s Stats) AcceptanceRate() float64 {
	if s.DraftTokens == 0 {
		return 0
	}
	return float64(s.AcceptedTokens) / float64(s.DraftTokens)
}

// TokensPerPass is the tokens emitted per target forward pass: what
// speculative decoding saves in target passes, the speed-up it would give
// were drafting free (0 without target passes).
func (s Stats) TokensPerPass() float64 {
	if s.TargetPasses == 0 {
		return 0
	}
	return float64(s.GeneratedTokens) / float64(s.TargetPasses)
}

// PrefillTPS is prompt tokens per second of prefill.
func (s Stats) PrefillTPS() float64 {
	if s.PrefillDuration <= 0 {
		return 0
	}
	return float64(s.PromptTokens) / s.PrefillDuration.Seconds()
}

// DecodeTPS is tokens per second after the first: (generated - 1) over the
// time from the first token to the last, as bench_ref.py measures mlx-lm.
func (s Stats) DecodeTPS() float64 {
	if s.GeneratedTokens < 2 || s.DecodeDuration <= 0 {
		return 0
	}
	return float64(s.GeneratedTokens-1) / s.DecodeDuration.Seconds()
}

// Generate runs prompt through m and calls emit with each generated token as
// soon as it is on the host, until an EOS id, MaxTokens, the context length,
// emit returning ErrStop, or ctx being cancelled (then it returns ctx's error
// with the stats so far). It must run on the MLX executor. It is a Batch of
// one row: generate_step's loop (prefill split, KV quantization switch-over,
// one step ahead) is the batch's, and sampling draws from MLX's global
// random sequence, so mlx.Seed before Generate is mx.random.seed.
func Generate(ctx context.Context, m Model, prompt []int32, o Options, emit func(tok int32) error) (Stats, error) {
	var (
		st    Stats
		err   error
		ended bool
	)
	// Always ahead, as generate_step: caches the caller gave may hold one
	// token more than was emitted (an EOS) when they cannot be trimmed.
	row := Row{Ctx: ctx, Prompt: prompt, Caches: o.Caches, Options: o, Emit: emit, AlwaysAhead: true,
		Done: func(s Stats, caches []kv.Cache, e error) {
			st, err, ended = s, e, true
			if o.Caches == nil {
				kv.FreeAll(caches)
			}
		}}
	b := NewCappedBatch(m, 1)
	if err := b.Add(row); err != nil {
		return Stats{PromptTokens: len(prompt)}, err
	}
	for !ended {
		if serr := b.Step(); serr != nil && !ended {
			return st, serr // not reached: a failed Step ends the row
		}
	}
	return st, err
}

// newLoop checks o for a generation whose prompt has promptLen tokens to
// run and total tokens in all (a cached prefix included), and builds the
// loop state of one row, caches aside. maxTokens is MaxTokens,
// or what the context leaves when MaxTokens is unset.
func newLoop(m Model, o Options, promptLen, total int) (l *loop, maxTokens int, err error) {
	switch {
	case promptLen == 0:
		return nil, 0, errors.New("cannot generate from an empty prompt")
	case o.ContextLength > 0 && total > o.ContextLength:
		return nil, 0, fmt.Errorf("%w: %d prompt tokens, context length %d", ErrContext, total, o.ContextLength)
	case o.TopLogprobs < 0 || o.TopLogprobs > MaxTopLogprobs:
		return nil, 0, fmt.Errorf("invalid top logprobs %d: want 0 to %d", o.TopLogprobs, MaxTopLogprobs)
	}
	sampler, err := NewSampler(o.Sampler, o.VocabSize)
	if err != nil {
		return nil, 0, err
	}
	procs, err := NewProcessors(o.Processors, o.VocabSize)
	if err != nil {
		return nil, 0, err
	}
	maxTokens = o.MaxTokens
	if maxTokens <= 0 && o.ContextLength > 0 {
		maxTokens = o.ContextLength - total
		if maxTokens == 0 {
			return nil, 0, fmt.Errorf("%w: %d prompt tokens leave no room to generate in context length %d", ErrContext, total, o.ContextLength)
		}
	}
	if o.Grammar != nil {
		gp, err := o.Grammar.Processor()
		if err != nil {
			return nil, 0, err
		}
		procs = append(procs, gp)
	}
	l = &loop{m: m, o: o, sampler: sampler, procs: procs}
	for _, p := range procs {
		l.history = max(l.history, p.Context(), 1)
	}
	return l, maxTokens, nil
}

// eosSet is ids as a set.
func eosSet(ids []int32) map[int32]bool {
	eos := make(map[int32]bool, len(ids))
	for _, id := range ids {
		eos[id] = true
	}
	return eos
}

// readToken reads the sampled token [1] without adding an op: y.Item()'s
// astype would be queued on the stream behind the step scheduled one ahead,
// so the token would reach the host only after that step had run too, and
// nothing would overlap. Samplers return uint32 (argmax, categorical).
func readToken(y *mlx.Array) (int32, error) {
	if err := y.Err(); err != nil {
		return 0, err
	}
	if y.Size() != 1 {
		return 0, fmt.Errorf("the sampler returned shape %v, want one token", y.Shape())
	}
	switch y.Dtype() {
	case mlx.Uint32:
		v, err := mlx.ToSlice[uint32](y)
		if err != nil {
			return 0, err
		}
		return int32(v[0]), nil
	case mlx.Int32:
		v, err := mlx.ToSlice[int32](y)
		if err != nil {
			return 0, err
		}
		return v[0], nil
	}
	v, err := y.Item()
	return int32(v), err
}

// loop is one generation's state between steps.
type loop struct {
	m       Model
	o       Options
	sampler Sampler
	procs   []LogitsProcessor
	caches  []kv.Cache
	history int        // trailing tokens the processors read; 0: none kept
	tokens  *mlx.Array // those tokens (int32 [N]), when history > 0
}

// closeProcs frees what processors hold outside MLX (a grammar's state).
func (l *loop) closeProcs() {
	for _, p := range l.procs {
		if c, ok := p.(interface{ Close() }); ok {
			c.Close()
		}
	}
	l.procs = nil
}

func (l *loop) finish(st Stats) Stats {
	if m, err := mlx.Memory(); err == nil {
		st.PeakMemory = m.Peak
	}
	st.KVBytes = kv.Nbytes(l.caches)
	// Every cache array is [B, H, capacity, ...] (quantized ones included),
	// so bytes over capacity is what one token costs, padding aside.
	for _, a := range kv.States(l.caches) {
		if n := a.Dim(2); n > 0 {
			st.KVBytesPerToken += a.Nbytes() / n
		}
	}
	return st
}

// prefill feeds all but the last prompt token in chunks of
// min(PrefillStepSize, remaining-1), quantizing and evaluating the caches
// after each, as generate_step does; it returns the tokens left (at least
// one).
func (l *loop) prefill(ctx context.Context, prompt []int32) ([]int32, error) {
	for len(prompt) > 1 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		n := min(l.prefillStep(), len(prompt)-1)
		if err := l.prefillChunk(prompt[:n]); err != nil {
			return nil, err
		}
		prompt = prompt[n:]
	}
	return prompt, nil
}

// prefillStep is how many prompt tokens one prefill chunk takes.
func (l *loop) prefillStep() int {
	if l.o.PrefillStepSize > 0 {
		return l.o.PrefillStepSize
	}
	return DefaultPrefillStepSize
}

// prefillChunk runs ids through the model for the caches only.
func (l *loop) prefillChunk(ids []int32) error {
	s := mlx.NewScope()
	defer s.Close()
	n := len(ids)
	chunk := mlx.FromSlice(ids, 1, n)
	// The logits of a prefill chunk are never read: evaluating the cache
	// state computes only what the caches depend on.
	l.forward(chunk).Free()
	if err := l.maybeQuantize(); err != nil {
		return err
	}
	if err := mlx.Eval(kv.States(l.caches)...); err != nil {
		return fmt.Errorf("cannot prefill the prompt: %w", err)
	}
	l.remember(mlx.Reshape(chunk, n), s)
	return mlx.ClearCache()
}

// forward runs the model in a scope of its own that keeps only the logits.
// Handles pin buffers: were the intermediates' handles alive at evaluation,
// every activation of every layer would stay allocated until the step ends
// (Python drops them as it goes), and prefill's peak memory would grow with
// the chunk times the depth. Freed before evaluation, they are only graph
// nodes, and MLX releases each buffer once its last consumer has run. The
// caches keep their own arrays (kv detaches them).
func (l *loop) forward(tokens *mlx.Array) *mlx.Array {
	s := mlx.NewScope()
	defer s.Close()
	logits := l.m.Forward(tokens, l.caches)
	s.Keep(logits)
	return logits
}

func (l *loop) maybeQuantize() error {
	if len(l.o.KV.Layers) > 0 {
		return kv.MaybeQuantizeLayers(l.caches, l.o.QuantizedKVStart, l.o.KV.Layers)
	}
	if l.o.KV.KVBits == 0 {
		return nil
	}
	return kv.MaybeQuantize(l.caches, l.o.QuantizedKVStart, l.o.KV.GroupSize(), l.o.KV.KVBits)
}

// remember appends input (int32 [L]) to the token history the processors
// read, keeping only its last l.history tokens; s is the scope input lives
// in, out of which the new history is kept.
func (l *loop) remember(input *mlx.Array, s *mlx.Scope) {
	if l.history == 0 {
		return
	}
	next := input
	if l.tokens != nil {
		next = mlx.Concatenate([]*mlx.Array{l.tokens, input}, 0)
	}
	next = lastTokens(next, l.history)
	s.Keep(next)
	if l.tokens != nil && l.tokens != next {
		l.tokens.Free()
	}
	l.tokens = next
}

// step is generate_step's _step: the model on input (int32 or uint32 [L]),
// the last position's logits, the processors, the cache switch-over, the
// log-softmax and the sampler. It returns the sampled token [1] and the
// log-probabilities [1, V], kept out of the step's scope.
func (l *loop) step(input *mlx.Array) (y, logprobs *mlx.Array, err error) {
	s := mlx.NewScope()
	defer s.Close()
	if input.Dtype() != mlx.Int32 {
		input = mlx.AsType(input, mlx.Int32)
	}
	n := input.Dim(0)
	logits := l.forward(mlx.Reshape(input, 1, n))
	if err := logits.Err(); err != nil {
		return nil, nil, fmt.Errorf("cannot run the model: %w", err)
	}
	if logits.Ndim() != 3 {
		return nil, nil, fmt.Errorf("cannot run the model: logits have shape %v, want [1, L, vocab]", logits.Shape())
	}
	v := logits.Dim(2)
	logits = mlx.Reshape(mlx.Slice(logits, []int{0, n - 1, 0}, []int{1, n, v}), 1, v)
	if err := l.maybeQuantize(); err != nil {
		return nil, nil, err
	}
	return l.choose(input, logits, s)
}

// choose is the part of a step after the model, on the last position's
// logits [1, V]: the processors over the history with input appended,
// log-softmax, then the sampler. y and logprobs are kept out of s, the
// step's scope.
func (l *loop) choose(input, logits *mlx.Array, s *mlx.Scope) (y, logprobs *mlx.Array, err error) {
	if len(l.procs) > 0 {
		l.remember(input, s)
		for _, p := range l.procs {
			logits = p.Process(l.tokens, logits)
		}
	}
	logprobs = mlx.Subtract(logits, mlx.LogSumExp(logits, nil, true))
	y = l.sampler.Sample(logprobs)
	if err := y.Err(); err != nil {
		return nil, nil, fmt.Errorf("cannot sample: %w", err)
	}
	s.Keep(y, logprobs)
	return y, logprobs, nil
}
