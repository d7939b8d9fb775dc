package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mlxgo/mlxgo/gen"
)

// fakeBatch stands in for the MLX batch runner: every row "generates" the
// tokens of a fixed script, one per Step, with gen.Batch's rules: MaxTokens,
// gen.ErrStop from emit, and a cancelled row ending at the next Step. It
// records what the engine did to it (admissions, ends, the most rows held).
type fakeBatch struct {
	script []int32
	max    int
	delay  time.Duration // per Step
	hold   chan struct{} // when set, rows make no progress until it is closed

	mu   sync.Mutex
	rows []*fakeRow
	log  []string // "add N" and "end N err", in order; N is the prompt's first token
	peak int
}

type fakeRow struct {
	ctx    context.Context
	id     int32
	o      gen.Options
	emit   func(int32) error
	done   func(Result, error)
	n      int
	prompt int
}

func (f *fakeBatch) MaxRows() int { return f.max }

func (f *fakeBatch) Add(ctx context.Context, prompt []int32, o gen.Options, seed *uint64, emit func(int32) error, done func(Result, error)) error {
	if len(prompt) == 0 {
		return errors.New("cannot add a row with an empty prompt")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.rows) >= f.max {
		return fmt.Errorf("the engine added row %d past the cap of %d", len(f.rows)+1, f.max)
	}
	f.rows = append(f.rows, &fakeRow{ctx: ctx, id: prompt[0], o: o, emit: emit, done: done, prompt: len(prompt)})
	f.peak = max(f.peak, len(f.rows))
	f.log = append(f.log, fmt.Sprintf("add %d", prompt[0]))
	return nil
}

func (f *fakeBatch) Step() error {
	held := false
	if f.hold != nil {
		select {
		case <-f.hold:
		default:
			// Held: only cancellations go on, so that the engine can still
			// admit, queue and end rows.
			held = true
			time.Sleep(time.Millisecond)
		}
	}
	if f.delay > 0 {
		time.Sleep(f.delay)
	}
	f.mu.Lock()
	rows := append([]*fakeRow(nil), f.rows...)
	f.mu.Unlock()
	for _, r := range rows {
		st := gen.Stats{PromptTokens: r.prompt, GeneratedTokens: r.n}
		switch {
		case r.ctx.Err() != nil:
			st.FinishReason = gen.FinishCancelled
			f.end(r, st, r.ctx.Err())
		case held:
		case r.n == r.o.MaxTokens && r.o.MaxTokens > 0:
			st.FinishReason = gen.FinishLength
			f.end(r, st, nil)
		case r.n == len(f.script):
			st.FinishReason = gen.FinishStop
			f.end(r, st, nil)
		default:
			err := r.emit(f.script[r.n])
			r.n++
			st.GeneratedTokens = r.n
			if errors.Is(err, gen.ErrStop) {
				st.FinishReason = gen.FinishStop
				f.end(r, st, nil)
			} else if err != nil {
				st.FinishReason = gen.FinishCancelled
				f.end(r, st, err)
			}
		}
	}
	return nil
}

// end removes r and calls its done, as gen.Batch calls Row.Done.
func (f *fakeBatch) end(r *fakeRow, st gen.Stats, err error) {
	f.mu.Lock()
	for i, o := range f.rows {
		if o == r {
			f.rows = append(f.rows[:i], f.rows[i+1:]...)
			break
		}
	}
	f.log = append(f.log, fmt.Sprintf("end %d %v", r.id, err))
	f.mu.Unlock()
	r.done(Result{Stats: st}, err)
}

func (f *fakeBatch) Rows() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.rows)
}

// Decoding counts the rows that have emitted a token: a fresh row is
// "prefilling" until its first Step.
func (f *fakeBatch) Decoding() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, r := range f.rows {
		if r.n > 0 {
			n++
		}
	}
	return n
}

func (f *fakeBatch) Abort(err error) {
	f.mu.Lock()
	rows := append([]*fakeRow(nil), f.rows...)
	f.mu.Unlock()
	for _, r := range rows {
		f.end(r, gen.Stats{FinishReason: gen.FinishCancelled}, err)
	}
}

func (f *fakeBatch) events() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.log...)
}

func (f *fakeBatch) peakRows() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.peak
}
