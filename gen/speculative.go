package gen

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
)

// DefaultNumDraftTokens is mlx_lm.generate's and mlx_lm.server's
// --num-draft-tokens default.
const DefaultNumDraftTokens = 3

// Draft is the draft model of speculative decoding: it proposes
// NumDraftTokens tokens, which the target checks in one forward pass.
type Draft struct {
	Model          Model
	NumDraftTokens int // tokens proposed per round; 0 drafts nothing
}

// Speculative is one generation with a draft model, as mlx-lm 0.32.2's
// speculative_generate_step makes it: the same prefill split (the draft's
// prompt, then the target's), the same model calls, the same sampler calls
// in the same order (the draft's one token at a time, then the target's
// rows all at once: one random key for all of them), the same cache trims
// of rejected drafts and, with logits processors, the same token history
// (prev_tokens, which holds the last prompt token and the generated ones,
// not the prompt, and which speculative_generate_step rewinds as it does).
// So its tokens and log-probabilities are mlx-lm's, bit for bit.
//
// It runs on the MLX executor. Step advances it by one prefill chunk or
// one draft-and-verify round; Generate-like callers use Speculate.
type Speculative struct {
	ctx                context.Context
	o                  Options
	emit               func(int32) error
	target, draft      *loop
	ownCaches          bool
	sampler            Sampler
	key                *keyed
	procs              []LogitsProcessor
	k, maxTokens       int
	eos                map[int32]bool
	pendDraft, pendTgt []int32 // prompt tokens left to prefill
	y, draftY          []int32 // speculative_generate_step's y and draft_y
	prev               *mlx.Array
	ntoks              int
	st                 Stats
	start              time.Time
	ended              bool
	err                error
	// observe, when set (tests), sees each yielded token before EOS
	// handling: whether it was an accepted draft and its log-probabilities
	// [1, V].
	observe func(tok int32, fromDraft bool, logprobs *mlx.Array)
}

// ErrNotTrimmable marks caches speculative decoding cannot roll back.
var ErrNotTrimmable = errors.New("speculative decoding needs caches that can be trimmed")

// NewSpeculative checks o for a speculative generation of prompt and makes
// its state; caches come from the models (o.Caches is not read). A seed
// gives it its own random key, as a Row's Seed does; nil draws from MLX's
// global sequence. emit gets each token as Batch's rows do (ErrStop ends
// it as a stop).
func NewSpeculative(ctx context.Context, target Model, d Draft, prompt []int32, o Options, seed *uint64, emit func(int32) error) (*Speculative, error) {
	switch {
	case d.Model == nil:
		return nil, errors.New("speculative decoding needs a draft model")
	case d.NumDraftTokens < 0:
		return nil, fmt.Errorf("invalid number of draft tokens %d: want 0 or more", d.NumDraftTokens)
	case o.Grammar != nil:
		return nil, errors.New("speculative decoding cannot run under a grammar (structured output)")
	case o.Caches != nil:
		return nil, errors.New("speculative decoding does not take caches holding a prefix")
	}
	l, maxTokens, err := newLoop(target, o, len(prompt), len(prompt))
	if err != nil {
		return nil, err
	}
	s := &Speculative{
		ctx: ctx, o: o, emit: emit, target: l, sampler: l.sampler, procs: l.procs,
		k: d.NumDraftTokens, maxTokens: maxTokens, eos: eosSet(o.EOS),
		pendDraft: append([]int32(nil), prompt...), pendTgt: append([]int32(nil), prompt...),
		st: Stats{PromptTokens: len(prompt)}, ownCaches: true,
	}
	if s.ctx == nil {
		s.ctx = context.Background()
	}
	// The draft's caches are quantized as the target's (one
	// quantize_cache_fn for both); a kv_config.json's layers are the
	// target's own.
	do := o
	do.KV.Layers = nil
	s.draft = &loop{m: d.Model, o: do}
	// prev_tokens is this generation's own history, not the loop's.
	l.history = 0
	if c, ok := l.sampler.(*chain); ok && seed != nil {
		if s.key, err = newKeyed(c, *seed); err != nil {
			l.closeProcs()
			return nil, err
		}
		s.sampler = s.key
	}
	l.caches = target.NewCaches(o.KV)
	s.draft.caches = d.Model.NewCaches(do.KV)
	// can_trim_prompt_cache(model_cache) is mlx-lm's check; the draft's and
	// rotating caches are refused too: a rotating cache that has evicted
	// cannot be trimmed, and mlx-lm's trim then silently keeps the rejected
	// tokens (its check passes only because the caches are empty at the start).
	for _, m := range []struct {
		name   string
		caches []kv.Cache
	}{{"the model", l.caches}, {"the draft model", s.draft.caches}} {
		for i, c := range m.caches {
			if _, rot := c.(*kv.Rotating); rot {
				s.free()
				return nil, fmt.Errorf("%w: layer %d of %s keeps a rotating window (a sliding-window layer, or --max-kv-size)", ErrNotTrimmable, i, m.name)
			} else if !c.Trimmable() {
				s.free()
				return nil, fmt.Errorf("%w: layer %d of %s keeps a recurrent state", ErrNotTrimmable, i, m.name)
			}
		}
	}
	return s, nil
}

// Speculate runs a whole speculative generation (Generate's counterpart):
// it returns when NewSpeculative's generation ends, with its figures.
func Speculate(ctx context.Context, target Model, d Draft, prompt []int32, o Options, emit func(int32) error) (Stats, error) {
	s, err := NewSpeculative(ctx, target, d, prompt, o, nil, emit)
	if err != nil {
		return Stats{PromptTokens: len(prompt)}, err
	}
	for !s.ended {
		s.Step()
	}
	return s.st, s.err
}

// Ended reports whether the generation is over; Result then has its end.
func (s *Speculative) Ended() bool { return s.ended }

// Result is the generation's figures and its error (nil for an EOS, a
// stop string or the length limit), final once Ended.
func (s *Speculative) Result() (Stats, error) { return s.st, s.err }

// Step runs one prefill chunk (the draft's prompt first, then the
// target's, as speculative_generate_step) or one round: draft, verify,
// emit the accepted tokens and the target's own, trim the rejected ones.
// It does nothing once the generation has ended.
func (s *Speculative) Step() {
	if s.ended {
		return
	}
	if err := s.ctx.Err(); err != nil {
		s.st.FinishReason = FinishCancelled
		s.end(err)
		return
	}
	if s.start.IsZero() {
		s.start = time.Now()
	}
	var err error
	switch {
	case len(s.pendDraft) > 1:
		s.pendDraft, err = s.prefillChunk(s.draft, s.pendDraft)
	case len(s.pendTgt) > 1:
		s.pendTgt, err = s.prefillChunk(s.target, s.pendTgt)
	default:
		if s.y == nil {
			s.y, s.draftY = s.pendTgt, s.pendDraft
		}
		err = s.round()
	}
	if err != nil {
		s.end(err)
	}
}

// Close ends a generation that has not ended (as cancelled) and frees it.
func (s *Speculative) Close() {
	if !s.ended {
		s.st.FinishReason = FinishCancelled
		s.end(context.Canceled)
	}
}

func (s *Speculative) prefillChunk(l *loop, pending []int32) ([]int32, error) {
	n := min(l.prefillStep(), len(pending)-1)
	if err := l.prefillChunk(pending[:n]); err != nil {
		return nil, err
	}
	return pending[n:], nil
}

// round is one pass of speculative_generate_step's loop.
func (s *Speculative) round() error {
	sc := mlx.NewScope()
	defer sc.Close()
	numDraft := s.k
	if s.maxTokens > 0 {
		numDraft = min(s.maxTokens-s.ntoks, s.k)
	}
	draftTokens, err := s.draftGenerate(numDraft)
	if err != nil {
		return err
	}
	if s.prev != nil {
		s.setPrev(pyHead(s.prev, s.prev.Dim(0)-len(s.y)-numDraft+1))
	}
	input := mlx.FromSlice(s.y, len(s.y))
	if numDraft > 0 {
		input = mlx.Concatenate([]*mlx.Array{input, draftTokens}, 0)
	}
	tokens, logprobs, err := s.stepModel(s.target, input, numDraft+1)
	if err != nil {
		return err
	}
	s.st.TargetPasses++
	s.st.DraftTokens += numDraft
	evals := []*mlx.Array{tokens}
	if draftTokens != nil {
		evals = append(evals, draftTokens)
	}
	if err := mlx.Eval(evals...); err != nil {
		return fmt.Errorf("cannot run the model: %w", err)
	}
	toks, err := readTokens(tokens)
	if err != nil {
		return err
	}
	var drafts []int32
	if numDraft > 0 {
		if drafts, err = readTokens(draftTokens); err != nil {
			return err
		}
	}
	full := func() bool { return s.maxTokens > 0 && s.ntoks >= s.maxTokens }
	n := 0
	done := false
	var yerr error
	for n < numDraft && !done && toks[n] == drafts[n] {
		n++
		s.ntoks++
		s.st.AcceptedTokens++
		done, yerr = s.yield(toks[n-1], logprobs, n-1, true)
		done = done || full()
	}
	if !done && !full() {
		s.ntoks++
		done, yerr = s.yield(toks[n], logprobs, n, false)
	}
	if done || full() {
		// speculative_generate_step's finally: the last round's rewind.
		s.rewind(numDraft, n)
		s.end(yerr)
		return nil
	}
	s.y = []int32{toks[n]}
	s.draftY = s.y
	if n == numDraft && numDraft > 0 {
		// Every draft was accepted: the draft model has not seen its
		// last one yet.
		s.draftY = []int32{drafts[numDraft-1], toks[n]}
	}
	if s.prev != nil {
		s.setPrev(pyHead(s.prev, -max(numDraft-n, 1)))
	}
	s.rewind(numDraft, n)
	return nil
}

// yield handles one token speculative_generate_step yields as
// stream_generate's caller does (see Batch.accept): an EOS ends the
// generation unemitted, else the token is emitted and counted. It reports
// whether the generation ends here, and with which error.
func (s *Speculative) yield(tok int32, logprobs *mlx.Array, row int, fromDraft bool) (bool, error) {
	if s.observe != nil {
		v := logprobs.Dim(1)
		s.observe(tok, fromDraft, mlx.Slice(logprobs, []int{row, 0}, []int{row + 1, v}))
	}
	if s.st.FirstToken.IsZero() {
		s.st.FirstToken = time.Now()
		s.st.PrefillDuration = s.st.FirstToken.Sub(s.start)
	}
	if s.eos[tok] {
		s.st.FinishReason = FinishStop
		return true, nil
	}
	if s.o.Logprobs != nil {
		v := logprobs.Dim(1)
		info, err := readLogprobs(mlx.Slice(logprobs, []int{row, 0}, []int{row + 1, v}), tok, s.o.TopLogprobs)
		if err != nil {
			return true, fmt.Errorf("cannot read the sampled token: %w", err)
		}
		s.o.Logprobs(info)
	}
	s.st.GeneratedTokens++
	s.st.DecodeDuration = time.Since(s.st.FirstToken)
	if s.emit != nil {
		if err := s.emit(tok); err != nil {
			if errors.Is(err, ErrStop) {
				s.st.FinishReason = FinishStop
				err = nil
			}
			return true, err
		}
	}
	if err := s.ctx.Err(); err != nil {
		s.st.FinishReason = FinishCancelled
		return true, err
	}
	return false, nil
}

// draftGenerate is _draft_generate: numDraft draft steps, each fed the
// token before (draft_y first), each queued as soon as it is built.
func (s *Speculative) draftGenerate(numDraft int) (*mlx.Array, error) {
	if numDraft == 0 {
		return nil, nil
	}
	y := mlx.FromSlice(s.draftY, len(s.draftY))
	ys := make([]*mlx.Array, 0, numDraft)
	for range numDraft {
		var err error
		if y, _, err = s.stepModel(s.draft, y, 1); err != nil {
			return nil, err
		}
		if err := mlx.AsyncEval(y); err != nil {
			return nil, fmt.Errorf("cannot run the draft model: %w", err)
		}
		ys = append(ys, y)
	}
	return mlx.Concatenate(ys, 0), nil
}

// stepModel is _step: the model on y (int32 [L]), the logits of the last
// nPredict positions, the cache quantization, then with processors one
// sampler call per position over prev_tokens, else one call on all rows.
// It returns the tokens [nPredict] (int32) and log-probabilities
// [nPredict, V], in the caller's scope.
func (s *Speculative) stepModel(l *loop, y *mlx.Array, nPredict int) (*mlx.Array, *mlx.Array, error) {
	n := y.Dim(0)
	logits := l.forward(mlx.Reshape(y, 1, n))
	if err := logits.Err(); err != nil {
		return nil, nil, fmt.Errorf("cannot run the model: %w", err)
	}
	if logits.Ndim() != 3 {
		return nil, nil, fmt.Errorf("cannot run the model: logits have shape %v, want [1, L, vocab]", logits.Shape())
	}
	v := logits.Dim(2)
	logits = mlx.Slice(logits, []int{0, n - nPredict, 0}, []int{1, n, v})
	if err := l.maybeQuantize(); err != nil {
		return nil, nil, err
	}
	if len(s.procs) == 0 {
		return s.sample(nil, mlx.Reshape(logits, nPredict, v))
	}
	if nPredict > 1 {
		y = mlx.Slice(y, []int{0}, []int{n - (nPredict - 1)})
	}
	ys := make([]*mlx.Array, nPredict)
	lps := make([]*mlx.Array, nPredict)
	for i := range nPredict {
		if s.prev == nil {
			s.setPrev(y)
		} else {
			s.setPrev(mlx.Concatenate([]*mlx.Array{s.prev, y}, 0))
		}
		var err error
		row := mlx.Reshape(mlx.Slice(logits, []int{0, i, 0}, []int{1, i + 1, v}), 1, v)
		if y, lps[i], err = s.sample(s.prev, row); err != nil {
			return nil, nil, err
		}
		ys[i] = y
	}
	return mlx.Concatenate(ys, 0), mlx.Concatenate(lps, 0), nil
}

// sample is _process_and_sample on logits [B, V]: the processors over
// tokens, the log-softmax, the sampler; the tokens come back as int32.
func (s *Speculative) sample(tokens, logits *mlx.Array) (*mlx.Array, *mlx.Array, error) {
	for _, p := range s.procs {
		logits = p.Process(tokens, logits)
	}
	logprobs := mlx.Subtract(logits, mlx.LogSumExp(logits, []int{-1}, true))
	y := s.sampler.Sample(logprobs)
	if err := y.Err(); err != nil {
		return nil, nil, fmt.Errorf("cannot sample: %w", err)
	}
	return mlx.AsType(y, mlx.Int32), logprobs, nil
}

// setPrev replaces prev_tokens with a (made in the current scope): the
// history outlives the round, so it is detached and the old one freed.
func (s *Speculative) setPrev(a *mlx.Array) {
	if a == s.prev {
		return
	}
	mlx.Detach(a)
	if s.prev != nil {
		old := s.prev
		defer old.Free()
	}
	s.prev = a
}

// rewind is _rewind_cache: the target forgets the rejected drafts, the
// draft model those it saw (it never saw its last one).
func (s *Speculative) rewind(numDraft, accepted int) {
	kv.Trim(s.target.caches, numDraft-accepted)
	kv.Trim(s.draft.caches, max(numDraft-accepted-1, 0))
}

func (s *Speculative) end(err error) {
	if s.ended {
		return
	}
	s.ended, s.err = true, err
	if s.st.FinishReason == "" && err == nil {
		s.st.FinishReason = FinishLength
	}
	s.st = s.target.finish(s.st)
	s.free()
}

func (s *Speculative) free() {
	s.target.closeProcs()
	if s.ownCaches {
		kv.FreeAll(s.target.caches)
		kv.FreeAll(s.draft.caches)
	}
	s.target.caches, s.draft.caches = nil, nil
	s.prev.Free()
	s.prev = nil
	if s.key != nil {
		s.key.free()
		s.key = nil
	}
}

// pyHead is a[:stop] with Python's reading of stop: negative counts from
// the end, and out-of-range bounds clamp.
func pyHead(a *mlx.Array, stop int) *mlx.Array {
	n := a.Dim(0)
	if stop < 0 {
		stop += n
	}
	stop = max(0, min(stop, n))
	if stop == n {
		return a
	}
	return mlx.Slice(a, []int{0}, []int{stop})
}

// readTokens reads sampled ids (int32) to the host.
func readTokens(a *mlx.Array) ([]int32, error) {
	if err := a.Err(); err != nil {
		return nil, err
	}
	return mlx.ToSlice[int32](a)
}
