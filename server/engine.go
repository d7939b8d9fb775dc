package server

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/mlxgo/mlxgo/gen"
)

// Scheduling mechanisms (DESIGN.md §9), as the execution composition names
// them.
const (
	SchedulingSerial     = "serial"     // one request at a time (--batch 1)
	SchedulingContinuous = "continuous" // continuous batching (--batch N > 1)
)

// Runner runs completion executions as rows of a batch: the engine's one
// scheduler (gen.Batch behind MLXRunner). The engine calls every method from
// its one goroutine; an implementation over MLX enters the MLX executor
// itself. MaxRows 1 is the serial scheduling mechanism: a cap of one row,
// not another code path.
type Runner interface {
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

// Result is what a Runner reports about one completion execution.
type Result struct {
	Stats        gen.Stats
	CachedTokens int // prompt tokens served from the prompt cache
	// Figures for /metrics after the execution (0: not reported).
	ActiveMemory, PeakMemory uint64
	CacheBytes               int
	// Where the execution was scheduled, filled in by the engine: the
	// mechanism (SchedulingSerial at a cap of one row, else
	// SchedulingContinuous) and the rows in the batch when it was admitted,
	// itself included.
	Scheduling string
	BatchRows  int
}

// event is what the engine sends a request's handler: text as it becomes
// safe to show, then one final event with the result. Add fields here (per
// token log-probs, ...) rather than new channels: batched jobs queue events
// whole in job.backlog, so anything in an event keeps its order.
type event struct {
	text string
	done bool
	res  Result
	err  error
}

// job is one request waiting for, or holding, the engine: a completion
// execution (a row of the batch), or a task that needs no row.
type job struct {
	ctx     context.Context
	prompt  []int32
	opts    gen.Options
	seed    *uint64
	text    *gen.TextStream // detokenizer and stop strings, as generate streams
	events  chan event
	queued  time.Time
	lastTok time.Time
	batch   int // rows in the batch at admission, this one included (serial: 1)
	m       *metrics
	task    task // set: the job is this task, not a completion execution

	eng      *engine // set by submit
	released bool    // its place in the engine's bound is given back

	// A job never blocks the engine on its handler: events the channel
	// cannot take yet wait in backlog (see send).
	backlog  []event
	finished bool // the final event is sent or in the backlog
}

// send hands an event to the handler unless the request is gone. It never
// waits for the handler: one slow client would stall every row, so what the
// channel cannot take now waits in the backlog, in order, and the engine
// delivers it at its next step boundary (deliver).
func (j *job) send(ev event) error {
	if err := j.ctx.Err(); err != nil {
		j.backlog = nil
		return err
	}
	j.backlog = append(j.backlog, ev)
	return j.deliver()
}

// deliver moves as much of a job's backlog into its channel as fits
// without waiting; the backlog of a request that is gone is dropped.
func (j *job) deliver() error {
	if err := j.ctx.Err(); err != nil {
		j.backlog = nil
		return err
	}
	for len(j.backlog) > 0 {
		select {
		case j.events <- j.backlog[0]:
			j.backlog[0] = event{}
			j.backlog = j.backlog[1:]
		default:
			return nil
		}
	}
	return nil
}

// next is the handler's side of send: the next event, or a final one with
// the context's error (its cause: Server.Abandon's) once the request is
// cancelled or timed out.
func (j *job) next() event {
	select {
	case ev := <-j.events:
		return ev
	case <-j.ctx.Done():
		return event{done: true, err: context.Cause(j.ctx)}
	}
}

// token runs on the engine goroutine for each generated token: it turns the
// token into text and holds back anything that may still become a stop
// string, so the handler only ever sees text it may send.
func (j *job) token(id int32) error {
	now := time.Now()
	if j.lastTok.IsZero() {
		j.m.ttft.observe(now.Sub(j.queued).Seconds())
	} else {
		j.m.tokenLatency.observe(now.Sub(j.lastTok).Seconds())
	}
	j.lastTok = now
	s, stop := j.text.Token(id)
	if s != "" {
		if err := j.send(event{text: s}); err != nil {
			return err
		}
	}
	return stop
}

// engine owns the Runner: one goroutine takes jobs from one bounded queue
// and runs completions as rows of its batch and tasks (embeddings) between
// the batch's steps.
//
// The bound is on jobs held, not on the channel: running rows + running
// tasks + queued jobs <= the concurrency cap (MaxRows) + maxQueue. Jobs
// leave the channel only at step boundaries, so a bound on the channel
// alone would refuse requests that arrive during a long step while rows
// are free.
type engine struct {
	runner Runner
	// One bound, two lanes: completions wait in queue for a row, tasks in
	// tasksq only for the next step boundary, so an embedding never waits
	// behind a generation.
	queue  chan *job
	tasksq chan *job
	m      *metrics
	once   sync.Once
	stop   chan struct{}
	done   chan struct{}
	live   map[*job]struct{} // jobs admitted whose events are not all delivered
	tasks  []*job            // tasks admitted and not yet done

	mu    sync.Mutex
	held  int // jobs submitted whose final event is not yet sent
	limit int // the most jobs held: the concurrency cap + maxQueue
}

func newEngine(r Runner, maxQueue int, m *metrics) *engine {
	e := &engine{runner: r, m: m, stop: make(chan struct{}), done: make(chan struct{}), live: map[*job]struct{}{}}
	rows := max(1, r.MaxRows())
	m.maxRows.set(float64(rows))
	e.limit = rows + maxQueue
	e.queue = make(chan *job, e.limit)
	e.tasksq = make(chan *job, e.limit)
	return e
}

// capacity is the most jobs the engine holds at once, running and queued.
func (e *engine) capacity() int { return e.limit }

// scheduling names the engine's mechanism for the execution composition.
func (e *engine) scheduling() string {
	if e.runner.MaxRows() > 1 {
		return SchedulingContinuous
	}
	return SchedulingSerial
}

// submit queues jobs (the choices of one request: all or none), or fails at
// once when they would take the engine past its bound: a client told to
// retry is better off than one left hanging.
func (e *engine) submit(jobs ...*job) error {
	select {
	case <-e.stop:
		return ErrShuttingDown
	default:
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.held+len(jobs) > e.limit {
		return ErrQueueFull
	}
	e.held += len(jobs)
	for _, j := range jobs {
		j.eng = e
		if j.task != nil {
			e.tasksq <- j // never blocks: each channel holds limit jobs
		} else {
			e.queue <- j
		}
	}
	e.setDepth()
	return nil
}

// release gives back j's place in the bound, once, just before its final
// event is sent.
func (e *engine) release(j *job) {
	if j.released {
		return
	}
	j.released = true
	e.mu.Lock()
	e.held--
	e.mu.Unlock()
}

// end sends j's final event, releasing its place first so that a client
// that has its answer can send the next request at once.
func (j *job) end(ev event) {
	if j.eng != nil {
		j.eng.release(j)
	}
	j.send(ev)
}

// failQueued answers every job still waiting with ErrShuttingDown.
func (e *engine) failQueued() {
	for {
		var j *job
		select {
		case j = <-e.queue:
		case j = <-e.tasksq:
		default:
			e.setDepth()
			return
		}
		e.live[j] = struct{}{}
		j.finished = true
		j.end(event{done: true, err: ErrShuttingDown})
	}
}

// setDepth is the queue-depth gauge: jobs of either lane not yet admitted.
func (e *engine) setDepth() { e.m.queueDepth.set(float64(len(e.queue) + len(e.tasksq))) }

// finish ends a completion execution: the text held back for stop strings,
// the metrics, and the final event.
func (e *engine) finish(j *job, res Result, err error) {
	j.finished = true
	e.release(j) // also when the client is gone and nothing more is sent
	e.m.promptTokens.add(float64(res.Stats.PromptTokens + res.CachedTokens))
	e.m.generatedTokens.add(float64(res.Stats.GeneratedTokens))
	e.m.cacheHitTokens.add(float64(res.CachedTokens))
	e.m.spec.add(res.Stats)
	if res.ActiveMemory > 0 || res.PeakMemory > 0 {
		e.m.activeMemory.set(float64(res.ActiveMemory))
		e.m.peakMemory.set(float64(res.PeakMemory))
	}
	e.m.cacheBytes.set(float64(res.CacheBytes))
	if err == nil {
		// The end without a stop string: what was held back is final text.
		if s := j.text.Finish(); s != "" {
			if err := j.send(event{text: s}); err != nil {
				return
			}
		}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		err = errTimeout
	}
	res.Scheduling, res.BatchRows = e.scheduling(), j.batch
	j.end(event{done: true, res: res, err: err})
}

// close stops taking jobs and waits for the engine goroutine to end.
func (e *engine) close() {
	e.once.Do(func() { close(e.stop) })
	<-e.done
}
