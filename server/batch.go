package server

import (
	"context"
	"time"

	"github.com/mlxgo/mlxgo/gen"
)

// BatchRunner runs many completion executions together: the continuous
// scheduling mechanism. The engine calls every method from its one
// goroutine; an implementation over MLX enters the MLX executor itself.
type BatchRunner interface {
	// MaxRows is the concurrency cap: the most rows the engine admits.
	MaxRows() int
	// Add admits one execution as a new row. emit is called with each of
	// its tokens during a later Step (gen.ErrStop or any other error from
	// emit ends the row), and done exactly once when the row ends, during
	// a Step or an Abort. When Add returns an error, done is never called.
	Add(ctx context.Context, prompt []int32, o gen.Options, seed *uint64, emit func(int32) error, done func(Result, error)) error
	// Step advances every row by one step: a prefill chunk of one waiting
	// row, then one token of every decoding row. A row whose ctx is
	// cancelled ends at the next Step.
	Step() error
	// Rows is the number of rows admitted and not yet done; Decoding those
	// past their prefill.
	Rows() int
	Decoding() int
	// Abort ends every row with err, calling each one's done.
	Abort(err error)
}

// idlePoll is how often an engine with no rows but undelivered events
// retries delivering them.
const idlePoll = 5 * time.Millisecond

// runContinuous is the engine goroutine of continuous batching: it admits
// queued jobs at step boundaries while rows are under the cap, steps the
// batch while it has rows, and blocks on the queue only when idle. After
// close it admits nothing more, fails the queued jobs, and returns once the
// rows have ended (Serve cancels them when the shutdown grace is over).
func (e *engine) runContinuous() {
	b := e.batch
	stopping := false
	for {
		if !stopping {
			stopping = e.admit(b)
		}
		if stopping {
			e.failQueued()
		}
		if b.Rows() > 0 {
			if err := b.Step(); err != nil {
				// The batch is in an unknown state: end its rows with the
				// error rather than step them again.
				b.Abort(err)
			}
		}
		e.deliver()
		e.m.activeRows.set(float64(b.Rows()))
		e.m.decodingRows.set(float64(b.Decoding()))
		if stopping && b.Rows() == 0 {
			if len(e.live) == 0 {
				return
			}
			time.Sleep(idlePoll)
		}
	}
}

// admit takes queued jobs into the batch while it has room. With no rows it
// waits for a job (or, while events are undelivered, at most idlePoll); with
// rows it takes only what is already queued, so the rows keep stepping. It
// reports whether the engine was closed.
func (e *engine) admit(b BatchRunner) (stopping bool) {
	for b.Rows() < b.MaxRows() {
		var j *job
		switch {
		case b.Rows() > 0:
			select {
			case j = <-e.queue:
			case <-e.stop:
				return true
			default:
				return false
			}
		case len(e.live) > 0:
			select {
			case j = <-e.queue:
			case <-e.stop:
				return true
			case <-time.After(idlePoll):
				return false
			}
		default:
			select {
			case j = <-e.queue:
			case <-e.stop:
				return true
			}
		}
		e.m.queueDepth.set(float64(len(e.queue)))
		e.start(b, j)
	}
	return false
}

// start makes j a row of the batch (or answers it at once if it cannot be).
func (e *engine) start(b BatchRunner, j *job) {
	j.batched = true
	e.live[j] = struct{}{}
	if err := j.ctx.Err(); err != nil {
		// The client left (or timed out) while waiting: nothing to run.
		j.finished = true
		j.end(event{done: true, err: err})
		return
	}
	j.batch = b.Rows() + 1
	done := func(res Result, err error) { e.finish(j, res, err) }
	if err := b.Add(j.ctx, j.prompt, j.opts, j.seed, j.token, done); err != nil {
		e.finish(j, Result{}, err)
	}
}

// deliver moves the backlogged events of batched jobs to their handlers and
// forgets jobs that are finished and fully delivered (or gone).
func (e *engine) deliver() {
	for j := range e.live {
		if j.deliver() != nil || (j.finished && len(j.backlog) == 0) {
			delete(e.live, j)
		}
	}
}
