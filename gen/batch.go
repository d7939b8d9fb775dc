package gen

import (
	"context"
	"errors"
	"fmt"
	"os"
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

// PaddedModel is a RowModel that also decodes a batch's rows held in one
// kv.Batch (left-padded buffers, one attention node for all rows);
// models.RowModel satisfies it.
type PaddedModel interface {
	RowModel
	// ForwardPadded runs tokens [B, 1] over the caches of a kv.Batch
	// holding B rows and returns logits [B, 1, vocab]; on the CPU row r is
	// bit-identical to Forward of that row alone.
	ForwardPadded(tokens *mlx.Array, caches []kv.Cache) *mlx.Array
}

// ErrBatchClosed is the error rows end with when their batch is closed.
var ErrBatchClosed = errors.New("the batch was closed")

// Row is one sequence of a batch: a request's prompt, its generation options
// and where its tokens and result go.
type Row struct {
	// Ctx cancelled ends the row at the next Step with Ctx's error; its
	// caches are handed back through Done. Nil: never cancelled.
	Ctx context.Context
	// Prompt is the tokens to run after whatever Caches already hold; at
	// least one, since the last prompt token's logits give the first token.
	Prompt []int32
	// Caches already hold a prefix (from a prompt cache); nil: fresh ones
	// from the model's NewCaches(Options.KV). KV quantization replaces
	// entries of this slice in place. Options.Caches is not read.
	Caches []kv.Cache
	// PrefixTokens, when set, are the tokens Caches already hold (all of
	// them): the repetition, presence and frequency penalties read them as
	// Generate would have read them from the whole prompt.
	PrefixTokens []int32
	// Options as for Generate, Logprobs and TopLogprobs included. KV
	// quantization (KV.KVBits > 0 or KV.Layers) needs a batch of one row
	// (NewCappedBatch(m, 1)): generate_step swaps a row's caches for
	// quantized ones mid-generation, which the rows' shared decode step
	// does not do (yet).
	Options Options
	// Seed, when set, gives the row its own random key: the draws
	// mlx.Seed(*Seed) followed by Generate would make, whatever other rows
	// draw meanwhile. Nil: the row samples from MLX's global random
	// sequence, as generate_step does.
	Seed *uint64
	// Emit gets each generated token; ErrStop ends the row (finish "stop"),
	// another error ends it with that error. Nil: tokens are dropped.
	Emit func(tok int32) error
	// Done is called exactly once, when the row ends, with its figures
	// (PromptTokens counts Prompt, not the prefix), its caches (the
	// caller's now: keep them or kv.FreeAll them) and nil for an EOS, a stop
	// or a length finish. The caches hold the first Offset() tokens of
	// prefix + Prompt + emitted tokens: after an EOS every emitted token
	// (the EOS itself is never kept), after any other end all but the last
	// emitted one. Nil: the caches are freed.
	Done func(st Stats, caches []kv.Cache, err error)
	// AlwaysAhead runs the row one step ahead even where the token that
	// step feeds could not be trimmed off again (a rotating cache about to
	// evict): Done's caches may then hold one token more than the emitted
	// ones, as generate_step's do. For callers that do not keep the caches
	// (Generate sets it); otherwise such a row reads each token before
	// feeding it.
	AlwaysAhead bool
}

// Batch is the one scheduler of generation: it decodes rows together on one
// MLX executor (continuous batching), one row being the case Generate
// runs. Each Step runs at most one prefill chunk of one waiting row, then
// one decode step of every decoding row, so a long prompt never stalls the
// streams already running. Decoding runs one step ahead, as generate_step
// does: the next step's graph is queued before the tokens of this one are
// read back, so host work (emit, detokenizing, the HTTP writes behind it)
// overlaps the model. Each row keeps its own caches, processors' history,
// sampler and random key, so its tokens are exactly those Generate would
// give it alone. A Batch belongs to the executor: every method runs inside
// mlx.Do, called by one goroutine. Emit and Done may call Add.
type Batch struct {
	m        Model
	rows     RowModel    // nil: m cannot decode rows in one call
	padded   PaddedModel // nil: rows decode through their own caches only
	cap      int         // the most rows; 0: no cap
	waiting  []*batchRow // admitted, prompt not finished; the first prefills
	decoding []*batchRow
	steps    int
	// built and queued are when the last decode finished building its graph
	// and returned from mlx.AsyncEval ($MLXGO_TRACE_STEPS).
	built, queued time.Time
	// kv holds the caches of the rows decoding together in one padded
	// buffer per layer (kv.Batch), members in its row order; a member's own
	// l.caches is nil until it leaves. Nil until two rows decode together.
	kv      *kv.Batch
	members []*batchRow
}

// NewBatch returns an empty batch over m with no cap on its rows.
func NewBatch(m Model) *Batch { return NewCappedBatch(m, 0) }

// NewCappedBatch returns an empty batch over m that holds at most rows rows
// (0: no cap). A batch of one row takes rows with quantized KV, and needs
// no RowModel.
func NewCappedBatch(m Model, rows int) *Batch {
	b := &Batch{m: m, cap: rows}
	b.rows, _ = m.(RowModel)
	b.padded, _ = m.(PaddedModel)
	return b
}

// Len is the number of rows added and not ended.
func (b *Batch) Len() int { return len(b.waiting) + len(b.decoding) }

// Decoding is the number of rows in the decode set now.
func (b *Batch) Decoding() int { return len(b.decoding) }

// batchRow is a row's state between steps; its loop is the state one
// generation keeps (caches, processors, token history).
type batchRow struct {
	Row
	l         *loop
	key       *keyed // nil: greedy, or the global random sequence
	pending   []int32
	prefix    int // tokens the caches held when the row was added
	maxTokens int
	eos       map[int32]bool
	sawEOS    bool
	quantized bool // its KV is quantized: it decodes alone
	st        Stats
	start     time.Time
	// y and lp are the token sampled by the last step queued for the row
	// and its log-probabilities: evaluated asynchronously, not yet read.
	// Detached: they outlive the step that made them.
	y, lp *mlx.Array
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
	quantized := o.KV.KVBits > 0 || len(o.KV.Layers) > 0
	switch {
	case b.cap > 0 && b.Len() >= b.cap:
		return fmt.Errorf("cannot add the row: the batch holds its cap of %d rows", b.cap)
	case len(r.PrefixTokens) > 0 && len(r.PrefixTokens) != prefix:
		return fmt.Errorf("cannot add the row: %d prefix tokens for caches holding %d", len(r.PrefixTokens), prefix)
	case quantized && b.cap != 1:
		return errors.New("cannot batch a row with a quantized kv cache: KV bits must be 0, or the batch one row")
	}
	l, maxTokens, err := newLoop(b.m, o, len(r.Prompt), prefix+len(r.Prompt))
	if err != nil {
		return err
	}
	row := &batchRow{
		Row:       r,
		l:         l,
		pending:   append([]int32(nil), r.Prompt...),
		prefix:    prefix,
		maxTokens: maxTokens,
		eos:       eosSet(o.EOS),
		quantized: quantized,
		st:        Stats{PromptTokens: len(r.Prompt)},
	}
	if row.Ctx == nil {
		row.Ctx = context.Background()
	}
	if c, ok := l.sampler.(*chain); ok && r.Seed != nil {
		if row.key, err = newKeyed(c, *r.Seed); err != nil {
			l.closeProcs()
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
// runs one prefill chunk (and, once its prompt is done, queues the step
// that samples its first token and joins the decode set), then every
// decoding row decodes one token. Rows that end call Done and leave. Step
// returns an error only for a failure that ends every row (all their Done
// get it).
func (b *Batch) Step() error {
	s := mlx.NewScope()
	defer s.Close()
	b.reapCancelled()
	t := stepTrace{start: time.Now()} // a few clock reads a step; printed only under traceSteps
	t.prefilled = t.start
	if len(b.waiting) > 0 {
		t.prefill = len(b.waiting[0].pending)
		b.prefillSome()
		t.prefilled = time.Now()
	}
	t.decoding = len(b.decoding)
	t.decodeStart = time.Now()
	if len(b.decoding) > 0 {
		if err := b.decode(); err != nil {
			b.endAll(err)
			return err
		}
	}
	if traceSteps {
		t.built, t.queued = b.built, b.queued
		t.print(b.steps)
	}
	b.steps++
	if b.steps%256 == 1 {
		// generate_step returns freed buffers every 256 tokens.
		if err := mlx.ClearCache(); err != nil {
			b.endAll(err)
			return err
		}
	}
	return nil
}

// traceSteps ($MLXGO_TRACE_STEPS=1) prints one stderr line per Step: the
// prompt tokens its prefill chunk had left, the rows decoding, and where
// the step's time went. It is for finding which part of a slow serve is
// slow on a machine where no profiler runs (the GPU machine).
var traceSteps = os.Getenv("MLXGO_TRACE_STEPS") == "1"

type stepTrace struct {
	start, prefilled time.Time // prefilled: when the prefill chunk ended (start when none ran)
	prefill          int       // prompt tokens left before this step's chunk; 0: none
	decoding         int       // rows this step decoded
	// The decode's phases: building its graph (from decodeStart to built),
	// mlx.AsyncEval (to queued: MLX's CPU evaluation returns only when few
	// of the step's tasks are left), reading the tokens (to the end).
	decodeStart, built, queued time.Time
}

func (t stepTrace) print(step int) {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }
	line := fmt.Sprintf("mlxgo: step %d: prefill %d tokens %.2f ms, decode %d rows %.2f ms",
		step, t.prefill, ms(t.prefilled.Sub(t.start)), t.decoding, ms(time.Since(t.prefilled)))
	if t.decoding > 0 && t.queued.After(t.decodeStart) {
		line += fmt.Sprintf(" (graph %.2f, queue %.2f, read %.2f)", ms(t.built.Sub(t.decodeStart)),
			ms(t.queued.Sub(t.built)), ms(time.Since(t.queued)))
	}
	fmt.Fprintln(os.Stderr, line)
}

// Close ends every row with ErrBatchClosed.
func (b *Batch) Close() { b.endAll(ErrBatchClosed) }

func (b *Batch) reapCancelled() {
	for _, list := range []*[]*batchRow{&b.waiting, &b.decoding} {
		for _, r := range append([]*batchRow(nil), *list...) {
			if r.Ctx.Err() == nil {
				continue
			}
			// A row cancelled with ErrStop as the cause (a distributed
			// row's stop string, seen the step before) finishes "stop".
			if err := context.Cause(r.Ctx); errors.Is(err, ErrStop) {
				r.st.FinishReason = FinishStop
				b.end(r, nil)
			} else {
				r.st.FinishReason = FinishCancelled
				b.end(r, err)
			}
		}
	}
}

// prefillSome runs prefill chunks of the waiting rows in turn while the
// step's chunks fit in one prefill step of tokens (the first's
// PrefillStepSize; a row's last chunk is its one-token first step): short
// prompts that arrive together are prefilled in one step and join the
// decode batch together, where one a step made the decoding rows wait a
// step and copy the batch's buffers for each (64 prompts on an H100: 64
// steps of 20-33 ms where decoding 64 rows takes 10.5). A long prompt
// still takes one chunk a step.
func (b *Batch) prefillSome() {
	budget := -1
	for len(b.waiting) > 0 {
		r := b.waiting[0]
		n := 1
		if len(r.pending) > 1 {
			n = min(r.l.prefillStep(), len(r.pending)-1)
		}
		if budget < 0 {
			budget = r.l.prefillStep()
		} else if n > budget {
			return
		}
		budget -= n
		b.prefill(r)
		if len(b.waiting) > 0 && b.waiting[0] == r {
			return // more of its prompt: the next step's
		}
	}
}

// prefill runs one chunk of r's prompt with generate_step's split (chunks of
// min(PrefillStepSize, remaining-1), so the caches get the same bits), and
// when one token is left, queues the step that samples r's first token.
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
		err = r.queue(y, lp)
	}
	r.pending = nil
	b.waiting = remove(b.waiting, r)
	if err != nil {
		b.end(r, err)
		return
	}
	b.decoding = append(b.decoding, r)
}

// keepHistory takes the processors' token history out of the step's scopes:
// it lives as long as the row.
func (r *batchRow) keepHistory() { mlx.Detach(r.l.tokens) }

// queue makes y and lp the row's pending token; evalArrays are what must be
// evaluated with them.
func (r *batchRow) queue(y, lp *mlx.Array) error {
	r.keepHistory()
	mlx.Detach(y, lp)
	r.y, r.lp = y, lp
	if err := mlx.AsyncEval(r.evalArrays()...); err != nil {
		return fmt.Errorf("cannot run the model: %w", err)
	}
	return nil
}

// evalArrays are the pending token, its log-probabilities and the row's
// next random key, evaluated together so the key's graph never grows from
// step to step.
func (r *batchRow) evalArrays() []*mlx.Array {
	arrs := []*mlx.Array{r.y, r.lp}
	if r.key != nil {
		arrs = append(arrs, r.key.key)
	}
	return arrs
}

// ahead reports whether r may run a step past its pending token before
// reading it: not when that token is the last MaxTokens allows
// (generate_step computes no token after the last), nor when the token
// that step feeds could not be trimmed off again should the row end (a
// rotating cache about to evict), since Done's caches must hold what the
// row accepted.
func (r *batchRow) ahead() bool {
	if r.maxTokens > 0 && r.st.GeneratedTokens+1 >= r.maxTokens {
		return false
	}
	if r.AlwaysAhead {
		return true
	}
	for _, c := range r.l.caches {
		if rc, ok := c.(*kv.Rotating); ok && rc.Offset()+1 >= rc.MaxSize() {
			return false
		} else if !ok && !c.Trimmable() {
			return false
		}
	}
	return true
}

// decode runs one decode step of every decoding row, one step ahead where
// it can: the steps fed with the rows' pending tokens are queued first,
// then those tokens are read back and accepted. A row that may not run
// ahead has its pending token read first and its step fed with it. One row
// decodes with plain Forward (what generate_step costs); several with
// ForwardRows, except rows with quantized KV, which decode alone.
func (b *Batch) decode() error {
	rows := append([]*batchRow(nil), b.decoding...)
	input := make(map[*batchRow]*mlx.Array, len(rows))
	var aheadRows []*batchRow
	for _, r := range rows {
		if r.ahead() {
			input[r] = r.y
			aheadRows = append(aheadRows, r)
			continue
		}
		if tok, ok := b.accept(r); ok {
			input[r] = mlx.FromSlice([]int32{tok}, 1)
		}
	}
	var together, alone []*batchRow
	for _, r := range rows {
		switch {
		case input[r] == nil:
		case r.quantized || b.rows == nil:
			alone = append(alone, r)
		default:
			together = append(together, r)
		}
	}
	if len(together) == 1 {
		alone, together = append(alone, together...), nil
	}
	if len(together) == 0 {
		b.dissolve() // a row decoding alone decodes through its own caches
	}
	next := make(map[*batchRow][2]*mlx.Array, len(rows))
	for _, r := range alone {
		y, lp, err := r.l.step(input[r])
		if err != nil {
			return err
		}
		r.keepHistory()
		next[r] = [2]*mlx.Array{y, lp}
	}
	if len(together) > 0 {
		together = b.group(together)
		last := make([]*mlx.Array, len(together))
		for i, r := range together {
			last[i] = input[r]
		}
		n := len(together)
		tokens := mlx.Reshape(mlx.AsType(mlx.Concatenate(last, 0), mlx.Int32), n, 1)
		var logits *mlx.Array
		if b.kv != nil {
			logits = b.padded.ForwardPadded(tokens, b.kv.Caches())
		} else {
			caches := make([][]kv.Cache, n)
			for i, r := range together {
				caches[i] = r.l.caches
			}
			logits = b.rows.ForwardRows(tokens, caches)
		}
		if err := logits.Err(); err != nil {
			return fmt.Errorf("cannot run the model: %w", err)
		}
		if sh := logits.Shape(); len(sh) != 3 || sh[0] != n || sh[1] != 1 {
			return fmt.Errorf("cannot run the model: logits of shape %v for %d rows, want [%d, 1, vocab]", sh, n, n)
		}
		if err := sampleRows(together, last, logits, next); err != nil {
			return err
		}
	}
	var arrs []*mlx.Array
	for _, r := range rows {
		if yl, ok := next[r]; ok {
			mlx.Detach(yl[0], yl[1])
			arrs = append(arrs, yl[0], yl[1])
			if r.key != nil {
				arrs = append(arrs, r.key.key)
			}
		}
	}
	b.built = time.Now()
	if len(arrs) > 0 {
		if err := mlx.AsyncEval(arrs...); err != nil {
			for _, yl := range next {
				yl[0].Free()
				yl[1].Free()
			}
			return fmt.Errorf("cannot run the model: %w", err)
		}
	}
	b.queued = time.Now()
	for _, r := range aheadRows {
		if _, ok := b.accept(r); !ok {
			yl := next[r]
			yl[0].Free()
			yl[1].Free()
			delete(next, r)
		}
	}
	for r, yl := range next {
		r.y, r.lp = yl[0], yl[1]
	}
	return nil
}

// group makes the rows decoding together the members of b.kv, joining
// those that are not yet, and returns them in b.kv's row order. When a row
// cannot join (its caches are not growable KV caches: a sliding window, a
// recurrent layer), every row decodes through its own caches instead
// (kv.Rows) and b.kv is dissolved.
func (b *Batch) group(together []*batchRow) []*batchRow {
	if b.padded == nil {
		return together
	}
	in := make(map[*batchRow]bool, len(together))
	for _, r := range together {
		in[r] = true
	}
	for _, r := range b.members {
		if !in[r] {
			b.dissolve() // every member decodes or has left: not reached
			break
		}
	}
	if b.kv == nil {
		b.kv = kv.NewBatch(len(together[0].l.caches))
	}
	member := make(map[*batchRow]bool, len(b.members))
	for _, r := range b.members {
		member[r] = true
	}
	for _, r := range together {
		if !member[r] && !b.kv.CanJoin(r.l.caches) {
			b.dissolve()
			return together
		}
	}
	var joining []*batchRow
	var caches [][]kv.Cache
	for _, r := range together {
		if !member[r] {
			joining = append(joining, r)
			caches = append(caches, r.l.caches)
		}
	}
	if len(joining) > 0 {
		// Together: one concatenation of the batch's buffers for all of them.
		if _, err := b.kv.Join(caches...); err != nil {
			b.dissolve() // CanJoin said yes: not reached
			return together
		}
		for _, r := range joining {
			r.l.caches = nil
		}
		b.members = append(b.members, joining...)
	}
	return append([]*batchRow(nil), b.members...)
}

// leave takes r out of b.kv, giving it back its own caches.
func (b *Batch) leave(r *batchRow) error {
	for i, m := range b.members {
		if m != r {
			continue
		}
		caches, err := b.kv.Leave(i)
		if err != nil {
			return err
		}
		r.l.caches = caches
		b.members = append(b.members[:i], b.members[i+1:]...)
		if len(b.members) == 0 {
			b.kv.Free()
			b.kv = nil
		}
		return nil
	}
	return nil
}

// dissolve gives every member its own caches back and drops b.kv.
func (b *Batch) dissolve() {
	for len(b.members) > 0 {
		if err := b.leave(b.members[0]); err != nil {
			// Leave of a member fails only on a bookkeeping bug; the rows'
			// caches are then lost with the batch's buffers.
			b.members = nil
			break
		}
	}
	if b.kv != nil {
		b.kv.Free()
		b.kv = nil
	}
}

// sampleRows is loop.choose for each row of a batch's logits [B, 1, V],
// rows[i] fed inputs[i], into next. The rows without logits processors
// share one log-softmax over [B, V], and the greedy ones one argmax, as
// mlx-lm's BatchGenerator computes them; each row's are views of those.
// That is the same arithmetic per row as choose on the row alone: MLX's
// LogSumExp (the node mx.logsumexp builds for [1, V] too) and ArgReduce
// reduce each row on its own, with a kernel picked by the row's length on
// the CPU and the GPU, and the subtraction is per element (the batch
// tests pin it). On the GPU it is three kernels a step instead of three a
// row. A row with processors goes through choose with its own history.
func sampleRows(rows []*batchRow, inputs []*mlx.Array, logits *mlx.Array, next map[*batchRow][2]*mlx.Array) error {
	n, v := logits.Dim(0), logits.Dim(2)
	var nPlain, nGreedy int
	for _, r := range rows {
		if len(r.l.procs) == 0 {
			nPlain++
			if _, ok := r.l.sampler.(greedy); ok {
				nGreedy++
			}
		}
	}
	var lps, ys *mlx.Array
	if nPlain > 0 {
		flat := mlx.Reshape(logits, n, v)
		lps = mlx.Subtract(flat, mlx.LogSumExp(flat, []int{-1}, true))
	}
	if nGreedy > 0 {
		ys = mlx.Argmax(lps, -1, false)
	}
	for i, r := range rows {
		s := mlx.NewScope()
		var y, lp *mlx.Array
		var err error
		switch {
		case len(r.l.procs) > 0:
			row := mlx.Reshape(mlx.Slice(logits, []int{i, 0, 0}, []int{i + 1, 1, v}), 1, v)
			y, lp, err = r.l.choose(mlx.AsType(inputs[i], mlx.Int32), row, s)
		default:
			lp = mlx.Slice(lps, []int{i, 0}, []int{i + 1, v})
			if _, ok := r.l.sampler.(greedy); ok {
				y = mlx.Slice(ys, []int{i}, []int{i + 1})
			} else {
				y = r.l.sampler.Sample(lp)
			}
			if err = y.Err(); err != nil {
				err = fmt.Errorf("cannot sample: %w", err)
			}
			s.Keep(y, lp)
		}
		r.keepHistory()
		s.Close()
		if err != nil {
			return err
		}
		next[r] = [2]*mlx.Array{y, lp}
	}
	return nil
}

// accept reads r's pending token and handles it as generate_step's caller
// does: EOS ends the row unemitted; otherwise the token is emitted, and
// ErrStop, an emit error, cancellation or MaxTokens end the row. It frees
// the pending arrays and returns the token and whether the row goes on.
func (b *Batch) accept(r *batchRow) (int32, bool) {
	tok, err := readToken(r.y)
	var info Logprob
	if err == nil && r.Options.Logprobs != nil && !r.eos[tok] {
		// lp is evaluated with y; it is read before it is freed.
		info, err = readLogprobs(r.lp, tok, r.Options.TopLogprobs)
	}
	r.y.Free()
	r.lp.Free()
	r.y, r.lp = nil, nil
	if err != nil {
		b.end(r, fmt.Errorf("cannot read the sampled token: %w", err))
		return 0, false
	}
	if r.st.FirstToken.IsZero() {
		r.st.FirstToken = time.Now()
		r.st.PrefillDuration = r.st.FirstToken.Sub(r.start)
	}
	if r.eos[tok] {
		r.st.FinishReason, r.sawEOS = FinishStop, true
		b.end(r, nil)
		return 0, false
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
			return 0, false
		}
	}
	if err := r.Ctx.Err(); err != nil {
		r.st.FinishReason = FinishCancelled
		b.end(r, err)
		return 0, false
	}
	if r.maxTokens > 0 && r.st.GeneratedTokens >= r.maxTokens {
		r.st.FinishReason = FinishLength
		b.end(r, nil)
		return 0, false
	}
	return tok, true
}

// end takes r out of the batch, frees its own arrays and hands its caches
// to Done, trimmed of the token a step run ahead fed them.
func (b *Batch) end(r *batchRow, err error) {
	b.waiting = remove(b.waiting, r)
	b.decoding = remove(b.decoding, r)
	if r.st.FinishReason == "" && err == nil {
		r.st.FinishReason = FinishLength
	}
	r.y.Free()
	r.lp.Free()
	r.y, r.lp = nil, nil
	if lerr := b.leave(r); lerr != nil && err == nil {
		err = fmt.Errorf("cannot hand back the row's caches: %w", lerr)
	}
	caches := r.l.caches
	if len(caches) > 0 && r.st.GeneratedTokens > 0 {
		held := r.prefix + len(r.Prompt) + r.st.GeneratedTokens
		if !r.sawEOS {
			held-- // the last emitted token was never fed back
		}
		if extra := caches[0].Offset() - held; extra > 0 {
			kv.Trim(caches, extra)
		}
	}
	st := r.l.finish(r.st)
	r.l.closeProcs()
	r.l.tokens.Free()
	r.l.tokens = nil
	if r.key != nil {
		r.key.free()
	}
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
