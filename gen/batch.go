package gen

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
)

// RowModel is a Model that decodes several rows in one call (the continuous
// batch's decode step); models.RowModel satisfies it.
type RowModel interface {
	Model
	// ForwardRows runs tokens [B, 1] with rows[r] as row r's per-layer
	// caches and returns logits [B, 1, vocab], row r bit-identical to
	// Forward(tokens[r:r+1], rows[r]).
	ForwardRows(tokens *mlx.Array, rows [][]kv.Cache) *mlx.Array
}

// ErrBatchClosed is the error rows end with when their batch is closed.
var ErrBatchClosed = errors.New("the batch was closed")

// Row is one sequence of a continuous batch: a request's prompt, its
// generation options and where its tokens and result go.
type Row struct {
	// Ctx cancelled ends the row at the next Step with Ctx's error; its
	// caches are handed back through Done. Nil: never cancelled.
	Ctx context.Context
	// Prompt is the tokens to run after whatever Caches already hold; at
	// least one, since the last prompt token's logits give the first token.
	Prompt []int32
	// Caches already hold a prefix (from a prompt cache); nil: fresh ones
	// from the model's NewCaches(Options.KV).
	Caches []kv.Cache
	// PrefixTokens, when set, are the tokens Caches already hold (all of
	// them): the repetition, presence and frequency penalties read them as
	// Generate would have read them from the whole prompt.
	PrefixTokens []int32
	// Options as for Generate, Logprobs and TopLogprobs included. KV
	// quantization (KV.KVBits > 0) is refused: generate_step swaps a row's
	// caches for quantized ones mid-generation, which the batch's decode
	// step does not do (yet).
	Options Options
	// Seed, when set, gives the row the draws mlx.Seed(*Seed) followed by
	// Generate would make; nil takes a fresh key from MLX's global random
	// sequence when the row is added.
	Seed *uint64
	// Emit gets each generated token; ErrStop ends the row (finish "stop"),
	// another error ends it with that error. Nil: tokens are dropped.
	Emit func(tok int32) error
	// Done is called exactly once, when the row ends, with its figures
	// (PromptTokens counts Prompt, not the prefix), its caches (the
	// caller's now: keep them or kv.FreeAll them) and nil for an EOS, a stop
	// or a length finish. The caches hold the first Offset() tokens of
	// prefix + Prompt + emitted tokens: after an EOS every emitted token
	// (the EOS itself is never fed); after any other end all but the last
	// emitted one, which was sampled and never fed back. Nil: the caches
	// are freed.
	Done func(st Stats, caches []kv.Cache, err error)
}

// Batch decodes many rows together on one MLX executor: continuous
// batching. Each Step runs at most one prefill chunk of one waiting row,
// then one decode step of every decoding row, so a long prompt never stalls
// the streams already running. Each row keeps its own caches, processors'
// history, sampler and random key, so its tokens are exactly those Generate
// would give it alone. A Batch belongs to the executor: every method runs
// inside mlx.Do, called by one goroutine. Emit and Done may call Add.
type Batch struct {
	m        RowModel
	waiting  []*batchRow // admitted, prompt not finished; the first prefills
	decoding []*batchRow
	steps    int
}

// NewBatch returns an empty batch over m.
func NewBatch(m RowModel) *Batch { return &Batch{m: m} }

// Len is the number of rows added and not ended.
func (b *Batch) Len() int { return len(b.waiting) + len(b.decoding) }

// Decoding is the number of rows in the decode set now.
func (b *Batch) Decoding() int { return len(b.decoding) }

// batchRow is a row's state between steps; its loop is the same state
// Generate keeps (caches, processors, token history).
type batchRow struct {
	Row
	l         *loop
	key       *keyed // nil for greedy sampling
	pending   []int32
	last      int32 // the token to feed next
	maxTokens int
	eos       map[int32]bool
	st        Stats
	start     time.Time
}

// Add validates r and queues it for prefill. On an error nothing is kept
// (Caches stay the caller's) and Done is not called.
func (b *Batch) Add(r Row) error {
	// What the row keeps (its key, its token history) is detached; the rest
	// made here goes with the scope.
	s := mlx.NewScope()
	defer s.Close()
	o := r.Options
	fresh := b.m.NewCaches(o.KV)
	prefix := 0
	if r.Caches != nil {
		if len(r.Caches) != len(fresh) {
			return fmt.Errorf("cannot add the row: %d caches for a model that makes %d", len(r.Caches), len(fresh))
		}
		if len(r.Caches) > 0 {
			prefix = r.Caches[0].Offset()
		}
	}
	switch {
	case len(r.PrefixTokens) > 0 && len(r.PrefixTokens) != prefix:
		return fmt.Errorf("cannot add the row: %d prefix tokens for caches holding %d", len(r.PrefixTokens), prefix)
	case o.KV.KVBits > 0 || len(o.KV.Layers) > 0:
		return errors.New("cannot batch a row with a quantized kv cache: KV bits must be 0")
	}
	l, maxTokens, err := newLoop(b.m, o, len(r.Prompt), prefix+len(r.Prompt))
	if err != nil {
		return err
	}
	row := &batchRow{
		Row:       r,
		l:         l,
		pending:   append([]int32(nil), r.Prompt...),
		maxTokens: maxTokens,
		eos:       eosSet(o.EOS),
		st:        Stats{PromptTokens: len(r.Prompt)},
	}
	if row.Ctx == nil {
		row.Ctx = context.Background()
	}
	if c, ok := l.sampler.(*chain); ok {
		if row.key, err = newKeyed(c, r.Seed); err != nil {
			return err
		}
		l.sampler = row.key
	}
	l.caches = r.Caches
	if l.caches == nil {
		l.caches = fresh
	}
	if l.history > 0 && len(r.PrefixTokens) > 0 {
		l.tokens = lastTokens(mlx.FromSlice(r.PrefixTokens, len(r.PrefixTokens)), l.history)
		row.keepHistory()
	}
	b.waiting = append(b.waiting, row)
	return nil
}

// Step runs one scheduling step: cancelled rows leave, the first waiting row
// runs one prefill chunk (and, once its prompt is done, samples its first
// token and joins the decode set), then every decoding row decodes one
// token. Rows that end call Done and leave. Step returns an error only for a
// failure that ends every row (all their Done get it).
func (b *Batch) Step() error {
	s := mlx.NewScope()
	defer s.Close()
	b.reapCancelled()
	if len(b.waiting) > 0 {
		b.prefill(b.waiting[0])
	}
	if len(b.decoding) > 0 {
		if err := b.decode(); err != nil {
			b.endAll(err)
			return err
		}
	}
	b.steps++
	if b.steps%256 == 0 {
		// generate_step returns freed buffers every 256 tokens.
		if err := mlx.ClearCache(); err != nil {
			b.endAll(err)
			return err
		}
	}
	return nil
}

// Close ends every row with ErrBatchClosed.
func (b *Batch) Close() { b.endAll(ErrBatchClosed) }

func (b *Batch) reapCancelled() {
	for _, list := range []*[]*batchRow{&b.waiting, &b.decoding} {
		for _, r := range append([]*batchRow(nil), *list...) {
			if err := r.Ctx.Err(); err != nil {
				r.st.FinishReason = FinishCancelled
				b.end(r, err)
			}
		}
	}
}

// prefill runs one chunk of r's prompt with Generate's split (chunks of
// min(PrefillStepSize, remaining-1), so the caches get the same bits), and
// when one token is left, the step that samples r's first token.
func (b *Batch) prefill(r *batchRow) {
	if r.start.IsZero() {
		r.start = time.Now()
	}
	if len(r.pending) > 1 {
		n := min(r.l.prefillStep(), len(r.pending)-1)
		err := r.l.prefillChunk(r.pending[:n])
		r.keepHistory()
		if err != nil {
			b.end(r, err)
			return
		}
		r.pending = r.pending[n:]
		if len(r.pending) > 1 {
			return
		}
	}
	y, lp, err := r.l.step(mlx.FromSlice(r.pending, 1))
	if err == nil {
		err = r.eval(y, lp)
	}
	r.pending = nil
	b.waiting = remove(b.waiting, r)
	if err != nil {
		b.end(r, err)
		return
	}
	b.decoding = append(b.decoding, r)
	b.accept(r, y, lp)
}

// keepHistory takes the processors' token history out of the step's scopes:
// it lives as long as the row.
func (r *batchRow) keepHistory() { mlx.Detach(r.l.tokens) }

// eval computes a step's token and log-probabilities, and the row's next
// random key, so the key's graph never grows from step to step.
func (r *batchRow) eval(y, lp *mlx.Array) error {
	r.keepHistory()
	arrs := []*mlx.Array{y, lp}
	if r.key != nil {
		arrs = append(arrs, r.key.key)
	}
	if err := mlx.Eval(arrs...); err != nil {
		return fmt.Errorf("cannot run the model: %w", err)
	}
	return nil
}

// decode runs one decode step of every decoding row: plain Forward when
// one row decodes (what Generate costs), ForwardRows otherwise.
func (b *Batch) decode() error {
	rows := append([]*batchRow(nil), b.decoding...)
	ys := make([]*mlx.Array, len(rows))
	lps := make([]*mlx.Array, len(rows))
	if len(rows) == 1 {
		r := rows[0]
		y, lp, err := r.l.step(mlx.FromSlice([]int32{r.last}, 1))
		if err != nil {
			return err
		}
		if err := r.eval(y, lp); err != nil {
			return err
		}
		ys[0], lps[0] = y, lp
	} else {
		last := make([]int32, len(rows))
		caches := make([][]kv.Cache, len(rows))
		for i, r := range rows {
			last[i], caches[i] = r.last, r.l.caches
		}
		logits := b.m.ForwardRows(mlx.FromSlice(last, len(rows), 1), caches)
		if err := logits.Err(); err != nil {
			return fmt.Errorf("cannot run the model: %w", err)
		}
		if sh := logits.Shape(); len(sh) != 3 || sh[0] != len(rows) || sh[1] != 1 {
			return fmt.Errorf("cannot run the model: logits of shape %v for %d rows, want [%d, 1, vocab]", sh, len(rows), len(rows))
		}
		var arrs []*mlx.Array
		for i, r := range rows {
			y, lp, err := r.sampleRow(mlx.FromSlice(last[i:i+1], 1), logits, i)
			if err != nil {
				return err
			}
			ys[i], lps[i] = y, lp
			arrs = append(arrs, y, lp)
			if r.key != nil {
				arrs = append(arrs, r.key.key)
			}
		}
		if err := mlx.Eval(arrs...); err != nil {
			return fmt.Errorf("cannot run the model: %w", err)
		}
	}
	for i, r := range rows {
		b.accept(r, ys[i], lps[i])
	}
	return nil
}

// sampleRow is loop.choose for row i of a batch's logits [B, 1, V].
func (r *batchRow) sampleRow(input, logits *mlx.Array, i int) (y, logprobs *mlx.Array, err error) {
	s := mlx.NewScope()
	defer s.Close()
	v := logits.Dim(2)
	row := mlx.Reshape(mlx.Slice(logits, []int{i, 0, 0}, []int{i + 1, 1, v}), 1, v)
	y, logprobs, err = r.l.choose(input, row, s)
	r.keepHistory()
	return y, logprobs, err
}

// accept handles r's sampled token y (evaluated) as Generate's loop does:
// EOS ends the row unemitted; otherwise the token is emitted, and ErrStop,
// an emit error, cancellation or MaxTokens end the row.
func (b *Batch) accept(r *batchRow, y, lp *mlx.Array) {
	tok, err := readToken(y)
	if err != nil {
		b.end(r, fmt.Errorf("cannot read the sampled token: %w", err))
		return
	}
	if r.st.FirstToken.IsZero() {
		r.st.FirstToken = time.Now()
		r.st.PrefillDuration = r.st.FirstToken.Sub(r.start)
	}
	if r.eos[tok] {
		r.st.FinishReason = FinishStop
		b.end(r, nil)
		return
	}
	var info Logprob
	if r.Options.Logprobs != nil {
		if info, err = readLogprobs(lp, tok, r.Options.TopLogprobs); err != nil {
			b.end(r, err)
			return
		}
	}
	r.st.GeneratedTokens++
	r.st.DecodeDuration = time.Since(r.st.FirstToken)
	if r.Options.Logprobs != nil {
		r.Options.Logprobs(info)
	}
	if r.Emit != nil {
		if err := r.Emit(tok); err != nil {
			if errors.Is(err, ErrStop) {
				r.st.FinishReason = FinishStop
				err = nil
			}
			b.end(r, err)
			return
		}
	}
	if err := r.Ctx.Err(); err != nil {
		r.st.FinishReason = FinishCancelled
		b.end(r, err)
		return
	}
	if r.maxTokens > 0 && r.st.GeneratedTokens >= r.maxTokens {
		r.st.FinishReason = FinishLength
		b.end(r, nil)
		return
	}
	r.last = tok
}

// end takes r out of the batch, frees its own arrays and hands its caches
// to Done.
func (b *Batch) end(r *batchRow, err error) {
	b.waiting = remove(b.waiting, r)
	b.decoding = remove(b.decoding, r)
	if r.st.FinishReason == "" && err == nil {
		r.st.FinishReason = FinishLength
	}
	st := r.l.finish(r.st)
	r.l.tokens.Free()
	r.l.tokens = nil
	if r.key != nil {
		r.key.free()
	}
	caches := r.l.caches
	r.l.caches = nil
	if r.Done == nil {
		kv.FreeAll(caches)
		return
	}
	r.Done(st, caches, err)
}

// endAll ends every row with err.
func (b *Batch) endAll(err error) {
	for _, r := range append(append([]*batchRow(nil), b.waiting...), b.decoding...) {
		b.end(r, err)
	}
}

// remove drops r from rows, keeping the order of the others.
func remove(rows []*batchRow, r *batchRow) []*batchRow {
	for i, x := range rows {
		if x == r {
			return append(rows[:i], rows[i+1:]...)
		}
	}
	return rows
}
