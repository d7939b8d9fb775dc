package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/mlxgo/mlxgo/gen"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models"
)

// A distributed model (serve --shard) runs one MLXRunner per rank. Rank 0
// serves HTTP and leads; the other ranks follow (MLXRunner.Follow): every
// collective in the model's forward must be issued by every rank in the
// same order, so every rank's gen.Batch must build the same graphs. Given
// the same rows (prompt, options, seed, adapter) added in the same order,
// with their ends at the same points, gen.Batch is deterministic: identical
// logits on every rank (all_sum, all_gather) give identical tokens, EOS and
// length ends, processors and prompt-cache hits. What only rank 0 knows is
// which rows join (the engine's admissions) and which end early (a stop
// string, a client gone, a timeout). Rank 0 records those decisions and
// hands them to the others at the start of each Step, before any graph of
// that Step is built, as one small int32 array through MLX's own all_sum
// (the followers add zeros); every rank then applies them in the same
// order. An early end therefore always takes effect at the next Step's
// start on every rank (gen.Batch's reapCancelled), never mid-step: rank 0
// stops emitting the row's tokens at once and ends it one Step later.

// ErrRankLost is what rows end with on rank 0 when a collective fails: a
// rank died or its link broke, and the server stops.
var ErrRankLost = errors.New("a rank of the distributed model failed")

// Ranks is an MLXRunner's place in a distributed model (nil: alone).
type Ranks struct {
	Group       *mlx.Group
	Parallelism models.Parallelism
	// Fatal, on rank 0, is called once when a step or a hand-over fails: the
	// ranks can no longer agree, and the caller stops serving.
	Fatal func(error)

	busy      atomic.Int64     // rank 0: when the step under way began (unix ns; 0: none)
	last      atomic.Int64     // rank 0: when the last hand-over or step ended (unix ns)
	next      int              // the id the next Add gets (every rank counts the same)
	adds      []distributedRow // rank 0: added since the last hand-over
	rows      map[int]*rankRow // rows added and not ended
	order     []int            // ids of rows, in Add order
	failed    bool
	dismissed bool          // rank 0: the exit is handed over; nothing more is
	grammars  *gen.Grammars // the model's, for the rows' constraints
}

// rankRow is a row's state on any rank: its own context, cancelled (with the
// cause) when rank 0 ends it early.
type rankRow struct {
	cancel  context.CancelCauseFunc
	job     context.Context // rank 0: the request's context
	verdict error           // rank 0: why emit ended it (not yet handed over)
	sent    bool            // rank 0: its end is handed over
}

// distributedRow is one Add as rank 0 hands it over.
type distributedRow struct {
	Prompt      []int32              `json:"p"`
	Seed        *uint64              `json:"s,omitempty"`
	Adapter     string               `json:"a,omitempty"`
	MaxTokens   int                  `json:"m,omitempty"`
	Sampler     gen.SamplerOptions   `json:"sa"`
	Processors  gen.ProcessorOptions `json:"pr"`
	Prefill     int                  `json:"ps,omitempty"`
	EOS         []int32              `json:"e,omitempty"`
	Context     int                  `json:"c,omitempty"`
	Vocab       int                  `json:"v,omitempty"`
	Logprobs    bool                 `json:"l,omitempty"`
	TopLogprobs int                  `json:"tl,omitempty"`
	// A structured-output constraint: its kind and source (gen.Grammar),
	// compiled again by each rank against the same vocabulary.
	GrammarKind string `json:"gk,omitempty"`
	Grammar     string `json:"g,omitempty"`
}

func grammarKind(g *gen.Grammar) string {
	if g == nil {
		return ""
	}
	return g.Kind
}

func grammarSource(g *gen.Grammar) string {
	if g == nil {
		return ""
	}
	return g.Source()
}

// Operations of a hand-over.
const (
	opStep  = "step"
	opAbort = "abort"
	opExit  = "exit"
	opIdle  = "idle" // nothing to step: the followers sleep idleTick
)

// idleTick paces the hand-overs of an idle rank 0. MLX's ring polls its
// sockets while a collective waits: a follower left waiting for rank 0's
// next step would spin a core for as long as the server is idle. So an idle
// rank 0 hands over "idle" every idleTick and the followers sleep that long
// before the next collective; both enter it within a few milliseconds of
// each other. A request that arrives meanwhile waits at most idleTick for
// the followers.
const idleTick = 50 * time.Millisecond

// handover is what rank 0 sends at each Step (Abort, exit): the rows added
// since the last one, then the rows to end before the step, as [id, code].
type handover struct {
	Op   string           `json:"o"`
	Adds []distributedRow `json:"a,omitempty"`
	Ends [][2]int         `json:"e,omitempty"`
}

// End codes: a stop string (the row finishes "stop"), or an error (a client
// gone, a timeout, an emit error: the row's caches are not kept).
const (
	endStop  = 1
	endError = 2
)

// errEndedByLeader is the cause a follower's row ends with when rank 0
// ended it with an error.
var errEndedByLeader = errors.New("ended by rank 0")

// WithRanks makes m's runner one rank of a distributed model over g: rank 0
// leads (it serves), the others must call Follow. The composition records
// the parallelism. It must be applied after WithKV and WithBatch.
func WithRanks(m Model, rk *Ranks) (Model, error) {
	r, ok := m.Runner.(*MLXRunner)
	if !ok {
		return m, fmt.Errorf("cannot run %s on several ranks: its runner (%T) is not an MLX runner", m.ID, m.Runner)
	}
	rk.rows = map[int]*rankRow{}
	rk.grammars = m.Grammars
	r.ranks = rk
	m.Composition.Parallelism = rk.Parallelism.String()
	m.Parallelism = rk.Parallelism
	return m, nil
}

func (rk *Ranks) leader() bool { return rk.Group.Rank() == 0 }

// Stalled is how long rank 0's step under way has run (0: none). A step
// waits for every rank in its collectives, and MLX's ring may wait forever
// on a peer that died mid-collective: the caller's watchdog reads this.
func (rk *Ranks) Stalled() time.Duration {
	t := rk.busy.Load()
	if t == 0 {
		return 0
	}
	return time.Since(time.Unix(0, t))
}

// stepping marks a step under way until the returned func is called.
func (rk *Ranks) stepping() func() {
	rk.busy.Store(time.Now().UnixNano())
	return func() {
		rk.busy.Store(0)
		rk.last.Store(time.Now().UnixNano())
	}
}

// share sends rank 0's message to every rank (mlx.Share, a byte an int32);
// the other ranks pass nil and get the message.
func (rk *Ranks) share(msg []byte) ([]byte, error) {
	vals := make([]int32, len(msg))
	for i, c := range msg {
		vals[i] = int32(c)
	}
	got, err := mlx.Share(vals, rk.Group)
	if err != nil {
		return nil, err
	}
	out := make([]byte, len(got))
	for i, v := range got {
		out[i] = byte(v)
	}
	return out, nil
}

// wire is an Add as rank 0 hands it over: everything gen.Batch reads that
// changes what it computes. An unseeded sampling row gets a seed here, so
// that every rank draws the same tokens (MLX's global random sequence is
// per process), as generate --shard shares one.
func (rk *Ranks) wire(ctx context.Context, prompt []int32, o gen.Options, seed *uint64) (distributedRow, *uint64, error) {
	if seed == nil && o.Sampler.Temp > 0 {
		s := rand.Uint64() >> 1
		seed = &s
	}
	return distributedRow{
		Prompt: prompt, Seed: seed, Adapter: adapterFrom(ctx),
		MaxTokens: o.MaxTokens, Sampler: o.Sampler, Processors: o.Processors, Prefill: o.PrefillStepSize,
		EOS: o.EOS, Context: o.ContextLength, Vocab: o.VocabSize,
		Logprobs: o.Logprobs != nil, TopLogprobs: o.TopLogprobs,
		GrammarKind: grammarKind(o.Grammar), Grammar: grammarSource(o.Grammar),
	}, seed, nil
}

// options is the gen.Options a follower runs a handed-over row with; its
// grammar is compiled with grammars, as rank 0 compiled it.
func (d distributedRow) options(grammars *gen.Grammars) (gen.Options, error) {
	o := gen.Options{
		MaxTokens: d.MaxTokens, Sampler: d.Sampler, Processors: d.Processors, PrefillStepSize: d.Prefill,
		EOS: d.EOS, ContextLength: d.Context, VocabSize: d.Vocab, TopLogprobs: d.TopLogprobs,
	}
	if d.Logprobs {
		o.Logprobs = func(gen.Logprob) {} // reading them changes the graph: read and drop
	}
	if d.GrammarKind != "" {
		if grammars == nil {
			return o, errors.New("cannot constrain a row: this rank has no grammar compiler")
		}
		var err error
		if o.Grammar, err = grammars.Compile(d.GrammarKind, d.Grammar); err != nil {
			return o, err
		}
	}
	return o, nil
}

// track gives the next row id a cancellable context that carries the
// row's adapter; job is the request's context on rank 0 (nil elsewhere).
func (rk *Ranks) track(job context.Context, adapter string) (int, context.Context) {
	id := rk.next
	rk.next++
	ctx, cancel := context.WithCancelCause(withAdapter(context.Background(), adapter))
	rk.rows[id] = &rankRow{cancel: cancel, job: job}
	rk.order = append(rk.order, id)
	return id, ctx
}

// untrack forgets a row that ended.
func (rk *Ranks) untrack(id int) {
	if row, ok := rk.rows[id]; ok {
		row.cancel(nil)
		delete(rk.rows, id)
		for i, x := range rk.order {
			if x == id {
				rk.order = append(rk.order[:i], rk.order[i+1:]...)
				break
			}
		}
	}
}

// ends are rank 0's early ends since the last hand-over, in row order:
// rows whose emit refused a token, then rows whose request is gone.
func (rk *Ranks) ends() [][2]int {
	var out [][2]int
	for _, id := range rk.order {
		row := rk.rows[id]
		if row.sent {
			continue
		}
		switch {
		case row.verdict != nil && errors.Is(row.verdict, gen.ErrStop):
			out = append(out, [2]int{id, endStop})
		case row.verdict != nil:
			out = append(out, [2]int{id, endError})
		case row.job != nil && row.job.Err() != nil:
			row.verdict = context.Cause(row.job)
			out = append(out, [2]int{id, endError})
		default:
			continue
		}
		row.sent = true
	}
	return out
}

// apply ends the rows rank 0 ended, before the step: gen.Batch reaps them
// at the step's start, in its own row order, on every rank alike.
func (rk *Ranks) apply(ends [][2]int) {
	for _, e := range ends {
		row, ok := rk.rows[e[0]]
		if !ok {
			continue
		}
		cause := errEndedByLeader
		if row.verdict != nil {
			cause = row.verdict
		}
		if e[1] == endStop {
			cause = gen.ErrStop
		}
		row.cancel(cause)
	}
}

// handOver is rank 0's side of a Step, Abort or exit: it sends the rows
// added since the last one and the early ends, and applies the ends.
func (rk *Ranks) handOver(op string) error {
	defer rk.stepping()()
	h := handover{Op: op, Adds: rk.adds, Ends: rk.ends()}
	rk.adds = nil
	msg, err := json.Marshal(h)
	if err != nil {
		return err
	}
	if _, err := rk.share(msg); err != nil {
		return rk.fail(err)
	}
	rk.apply(h.Ends)
	return nil
}

// fail marks the ranks as out of step (once) and tells the caller.
func (rk *Ranks) fail(err error) error {
	err = fmt.Errorf("%w: %v", ErrRankLost, err)
	if !rk.failed {
		rk.failed = true
		if rk.Fatal != nil {
			rk.Fatal(err)
		}
	}
	return err
}

// Follow runs a follower rank (rank > 0): it takes rank 0's hand-overs and
// replays them on its own batch until rank 0 sends exit (nil) or a step or
// a collective fails (the error: the process should exit non-zero, and
// the launcher stops the other ranks).
func (r *MLXRunner) Follow() error {
	rk := r.ranks
	if rk == nil || rk.leader() {
		return errors.New("Follow is for the ranks other than 0 of a distributed model")
	}
	for {
		var h handover
		err := mlx.Do(func() error {
			msg, err := rk.share(nil)
			if err != nil {
				return fmt.Errorf("%w: %v", ErrRankLost, err)
			}
			if err := json.Unmarshal(msg, &h); err != nil {
				return fmt.Errorf("cannot read rank 0's schedule: %w", err)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, d := range h.Adds {
			if err := r.follow(d); err != nil {
				return err
			}
		}
		err = mlx.Do(func() error {
			rk.apply(h.Ends)
			switch h.Op {
			case opStep:
				if r.batch == nil {
					return nil
				}
				defer r.count()
				return r.batch.Step()
			case opAbort:
				r.abortLocal(errEndedByLeader)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("cannot run the model's step: %w", err)
		}
		switch h.Op {
		case opExit:
			return nil
		case opIdle:
			time.Sleep(idleTick)
		}
	}
}

// follow adds a handed-over row as rank 0 added it; the errors of add are
// rank 0's too (the same checks on the same inputs), so they are dropped
// here. A grammar this rank cannot compile is an error: the ranks would part.
func (r *MLXRunner) follow(d distributedRow) error {
	o, err := d.options(r.ranks.grammars)
	if err != nil {
		return fmt.Errorf("cannot follow rank 0's row: %w", err)
	}
	ctx := withAdapter(context.Background(), d.Adapter)
	r.add(ctx, d.Prompt, o, d.Seed, func(int32) error { return nil }, func(Result, error) {})
	return nil
}

// Lead runs on rank 0 beside the engine until stop is closed: while the
// batch is empty it hands over "idle" every idleTick (see idleTick).
func (r *MLXRunner) Lead(stop <-chan struct{}) {
	rk := r.ranks
	if rk == nil || !rk.leader() {
		return
	}
	rk.last.Store(time.Now().UnixNano())
	for {
		wait := idleTick - time.Since(time.Unix(0, rk.last.Load()))
		select {
		case <-stop:
			return
		case <-time.After(max(wait, time.Millisecond)):
		}
		mlx.Do(func() error {
			if rk.failed || rk.dismissed || r.batch != nil && r.batch.Len() > 0 || time.Since(time.Unix(0, rk.last.Load())) < idleTick {
				return nil
			}
			return rk.handOver(opIdle)
		})
	}
}

// Dismiss, on rank 0, tells the other ranks to exit once the server has
// stopped (no rows are left); on other ranks and alone it does nothing.
func (r *MLXRunner) Dismiss() {
	rk := r.ranks
	if rk == nil || !rk.leader() || rk.failed {
		return
	}
	mlx.Do(func() error {
		rk.dismissed = true
		return rk.handOver(opExit)
	})
}
