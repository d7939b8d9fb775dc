package server

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/mlxgo/mlxgo/gen"
	"github.com/mlxgo/mlxgo/tok"
)

// Runner runs one completion execution to its end. The engine calls it from
// its one goroutine, one job at a time (the serial scheduling mechanism), so
// a Runner that wraps MLX never sees two generations at once. emit is called
// with each generated token; returning gen.ErrStop ends the generation.
type Runner interface {
	Run(ctx context.Context, prompt []int32, o gen.Options, seed *uint64, emit func(int32) error) (Result, error)
}

// Result is what a Runner reports about one completion execution.
type Result struct {
	Stats        gen.Stats
	CachedTokens int // prompt tokens served from the prompt cache
	// Figures for /metrics after the execution (0: not reported).
	ActiveMemory, PeakMemory uint64
	CacheBytes               int
}

// event is what the engine sends a request's handler: text as it becomes
// safe to show, then one final event with the result.
type event struct {
	text string
	done bool
	res  Result
	err  error
}

// job is one request waiting for, or holding, the engine.
type job struct {
	ctx     context.Context
	prompt  []int32
	opts    gen.Options
	seed    *uint64
	detok   *tok.Detokenizer
	stops   *gen.StopMatcher
	events  chan event
	queued  time.Time
	lastTok time.Time
	batch   int // rows decoding at admission (serial: 1)
	m       *metrics
}

// send hands an event to the handler unless the request is gone.
func (j *job) send(ev event) error {
	select {
	case j.events <- ev:
		return nil
	case <-j.ctx.Done():
		return j.ctx.Err()
	}
}

// next is the handler's side of send: the next event, or a final one with
// the context's error once the request is cancelled or timed out.
func (j *job) next() event {
	select {
	case ev := <-j.events:
		return ev
	case <-j.ctx.Done():
		return event{done: true, err: j.ctx.Err()}
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
	s, stop := j.stops.Push(j.detok.Next(id))
	if s != "" {
		if err := j.send(event{text: s}); err != nil {
			return err
		}
	}
	if stop {
		return gen.ErrStop
	}
	return nil
}

// engine owns the Runner: one goroutine takes jobs from a bounded queue.
type engine struct {
	runner Runner
	queue  chan *job
	m      *metrics
	once   sync.Once
	stop   chan struct{}
	done   chan struct{}
}

func newEngine(r Runner, maxQueue int, m *metrics) *engine {
	return &engine{runner: r, queue: make(chan *job, maxQueue), m: m, stop: make(chan struct{}), done: make(chan struct{})}
}

// submit queues j, or fails at once when the queue is full: a client told
// to retry is better off than one left hanging.
func (e *engine) submit(j *job) error {
	select {
	case <-e.stop:
		return ErrShuttingDown
	default:
	}
	select {
	case e.queue <- j:
		e.m.queueDepth.set(float64(len(e.queue)))
		return nil
	default:
		return ErrQueueFull
	}
}

// run is the engine goroutine; it returns after close, once the job in hand
// has ended, failing the jobs still queued.
func (e *engine) run() {
	defer close(e.done)
	for {
		select {
		case j := <-e.queue:
			e.m.queueDepth.set(float64(len(e.queue)))
			e.execute(j)
		case <-e.stop:
			for {
				select {
				case j := <-e.queue:
					j.send(event{done: true, err: ErrShuttingDown})
				default:
					e.m.queueDepth.set(0)
					return
				}
			}
		}
	}
}

func (e *engine) execute(j *job) {
	if err := j.ctx.Err(); err != nil {
		// The client left (or timed out) while waiting: nothing to run.
		j.send(event{done: true, err: err})
		return
	}
	j.batch = 1
	e.m.activeRows.set(1)
	defer e.m.activeRows.set(0)
	res, err := e.runner.Run(j.ctx, j.prompt, j.opts, j.seed, j.token)
	if err == nil && !j.stops.Stopped() {
		// The end without a stop string: what was held back is final text.
		s, _ := j.stops.Push(j.detok.Flush())
		if s += j.stops.Flush(); s != "" {
			if err := j.send(event{text: s}); err != nil {
				return
			}
		}
	}
	e.m.promptTokens.add(float64(res.Stats.PromptTokens + res.CachedTokens))
	e.m.generatedTokens.add(float64(res.Stats.GeneratedTokens))
	e.m.cacheHitTokens.add(float64(res.CachedTokens))
	if res.ActiveMemory > 0 || res.PeakMemory > 0 {
		e.m.activeMemory.set(float64(res.ActiveMemory))
		e.m.peakMemory.set(float64(res.PeakMemory))
	}
	e.m.cacheBytes.set(float64(res.CacheBytes))
	if errors.Is(err, context.DeadlineExceeded) {
		err = errTimeout
	}
	j.send(event{done: true, res: res, err: err})
}

// close stops taking jobs and waits for the engine goroutine to end.
func (e *engine) close() {
	e.once.Do(func() { close(e.stop) })
	<-e.done
}
