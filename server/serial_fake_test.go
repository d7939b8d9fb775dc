package server

import (
	"context"
	"errors"
	"sync"

	"github.com/mlxgo/mlxgo/gen"
)

// runOne is what the fakes of one execution implement: Run generates every
// token of one execution (emit as gen.Batch calls Row.Emit) and returns its
// result.
type runOne interface {
	Run(ctx context.Context, prompt []int32, o gen.Options, seed *uint64, emit func(int32) error) (Result, error)
}

// serial makes a fake of one execution a Runner with a cap of one row (the
// serial mechanism): its Run goes on in a goroutine of its own, and each
// Step hands one of its tokens to the engine's emit, on the engine
// goroutine, as gen.Batch does.
func serial(r runOne) Runner { return &serialRows{r: r} }

type serialRows struct {
	r   runOne
	mu  sync.Mutex
	cur *serialRow
}

type serialRow struct {
	ctx     context.Context
	cancel  context.CancelFunc
	prompt  []int32
	o       gen.Options
	seed    *uint64
	emit    func(int32) error
	done    func(Result, error)
	started bool
	toks    chan int32 // from Run's goroutine
	errs    chan error // emit's answer back to it
	fin     chan serialEnd
}

type serialEnd struct {
	res Result
	err error
}

func (s *serialRows) MaxRows() int { return 1 }

func (s *serialRows) Add(ctx context.Context, prompt []int32, o gen.Options, seed *uint64, emit func(int32) error, done func(Result, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil {
		return errors.New("the engine added a second row past the cap of 1")
	}
	ctx, cancel := context.WithCancel(ctx)
	s.cur = &serialRow{ctx: ctx, cancel: cancel, prompt: prompt, o: o, seed: seed, emit: emit, done: done,
		toks: make(chan int32), errs: make(chan error), fin: make(chan serialEnd, 1)}
	return nil
}

func (s *serialRows) Step() error {
	s.mu.Lock()
	c := s.cur
	s.mu.Unlock()
	if c == nil {
		return nil
	}
	if !c.started {
		c.started = true
		go func() {
			res, err := s.r.Run(c.ctx, c.prompt, c.o, c.seed, func(t int32) error {
				c.toks <- t
				return <-c.errs
			})
			c.fin <- serialEnd{res, err}
		}()
	}
	select {
	case t := <-c.toks:
		c.errs <- c.emit(t)
	case f := <-c.fin:
		s.end(c, f.res, f.err)
	}
	return nil
}

func (s *serialRows) end(c *serialRow, res Result, err error) {
	s.mu.Lock()
	s.cur = nil
	s.mu.Unlock()
	c.cancel()
	c.done(res, err)
}

func (s *serialRows) Rows() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil {
		return 1
	}
	return 0
}

func (s *serialRows) Decoding() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil && s.cur.started {
		return 1
	}
	return 0
}

func (s *serialRows) Abort(err error) {
	s.mu.Lock()
	c := s.cur
	s.mu.Unlock()
	if c == nil {
		return
	}
	c.cancel()
	if c.started {
		go func() { // let Run see its cancelled context and return
			for {
				select {
				case <-c.toks:
					c.errs <- err
				case <-c.fin:
					return
				}
			}
		}()
	}
	s.end(c, Result{}, err)
}
