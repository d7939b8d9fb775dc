package server

import (
	"context"
	"time"
)

// idlePoll is how often an engine with no rows but undelivered events
// retries delivering them.
const idlePoll = 5 * time.Millisecond

// task is a job that needs no row of the batch: an embeddings request now,
// a transcription later. The engine runs it one unit at a time (an embedding
// batch, say) between the batch's steps, so neither waits for the other to
// finish.
type task interface {
	// step runs the next unit on the engine goroutine and reports whether
	// the task is done; an error ends it. ctx is the job's.
	step(ctx context.Context) (done bool, err error)
}

// run is the engine goroutine: it admits queued jobs at step boundaries
// (completions while rows are under the cap, tasks whenever they come), steps the
// batch while it has rows and the tasks while there are any, and blocks on
// the queue only when idle. After close it admits nothing more, fails the
// queued jobs, and returns once the rows and tasks have ended (Serve
// cancels them when the shutdown grace is over).
func (e *engine) run() {
	defer close(e.done)
	b := e.runner
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
		e.stepTasks()
		e.deliver()
		e.m.activeRows.set(float64(b.Rows()))
		e.m.decodingRows.set(float64(b.Decoding()))
		if stopping && b.Rows() == 0 && len(e.tasks) == 0 {
			if len(e.live) == 0 {
				return
			}
			time.Sleep(idlePoll)
		}
	}
}

// busy reports whether the engine has work of its own to do this iteration.
func (e *engine) busy(b Runner) bool { return b.Rows() > 0 || len(e.tasks) > 0 }

// admit takes the queued tasks, and queued completions while the batch has
// room for their rows. Busy, it takes only what is already queued, so the
// rows and tasks keep stepping; idle, it waits for a job (or, while events
// are undelivered, at most idlePoll). It reports whether the engine was
// closed.
func (e *engine) admit(b Runner) (stopping bool) {
	for {
		rows := e.queue
		if b.Rows() >= max(1, b.MaxRows()) {
			rows = nil // a nil channel is never ready
		}
		var j *job
		switch {
		case e.busy(b):
			select {
			case j = <-rows:
			case j = <-e.tasksq:
			case <-e.stop:
				return true
			default:
				return false
			}
		case len(e.live) > 0:
			select {
			case j = <-rows:
			case j = <-e.tasksq:
			case <-e.stop:
				return true
			case <-time.After(idlePoll):
				return false
			}
		default:
			select {
			case j = <-rows:
			case j = <-e.tasksq:
			case <-e.stop:
				return true
			}
		}
		e.setDepth()
		e.start(b, j)
	}
}

// start makes j a row of the batch or a running task (or answers it at once
// if it cannot be either).
func (e *engine) start(b Runner, j *job) {
	e.live[j] = struct{}{}
	if err := j.ctx.Err(); err != nil {
		// The client left (or timed out) while waiting: nothing to run.
		j.finished = true
		j.end(event{done: true, err: err})
		return
	}
	if j.task != nil {
		e.tasks = append(e.tasks, j)
		return
	}
	j.batch = b.Rows() + 1
	done := func(res Result, err error) { e.finish(j, res, err) }
	if err := b.Add(j.ctx, j.prompt, j.opts, j.seed, j.token, done); err != nil {
		e.finish(j, Result{}, err)
	}
}

// stepTasks runs one unit of every task and ends those that are done.
func (e *engine) stepTasks() {
	kept := e.tasks[:0]
	for _, j := range e.tasks {
		done, err := j.task.step(j.ctx)
		if err == nil && !done {
			kept = append(kept, j)
			continue
		}
		j.finished = true
		j.end(event{done: true, err: err})
	}
	clear(e.tasks[len(kept):])
	e.tasks = kept
}

// deliver moves the backlogged events of jobs to their handlers and forgets
// jobs that are finished and fully delivered (or gone).
func (e *engine) deliver() {
	for j := range e.live {
		if j.deliver() != nil || (j.finished && len(j.backlog) == 0) {
			delete(e.live, j)
		}
	}
}
