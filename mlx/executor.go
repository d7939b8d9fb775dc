package mlx

import (
	"fmt"
	"runtime"
)

// job is one unit of work for the executor; done receives its result.
type job struct {
	f    func() error
	done chan result
}

type result struct {
	err      error
	panicked bool
	panicVal any
}

var jobs chan job

// startExecutor starts the goroutine that owns MLX and binds its OS thread
// in the shim. It runs for the life of the process: MLX's per-thread state
// would be lost with the thread.
func startExecutor() error {
	jobs = make(chan job)
	ready := make(chan error)
	go func() {
		runtime.LockOSThread() // never unlocked: this thread is MLX's
		if st := fn.bindThread(); st != 0 {
			ready <- fmt.Errorf("cannot bind executor thread: status %d", st)
			return
		}
		ready <- nil
		for j := range jobs {
			j.done <- run(j.f)
		}
	}()
	return <-ready
}

// run calls f and catches a panic so that the executor survives it; Do
// re-raises the panic in the caller's goroutine, where it belongs.
func run(f func() error) (r result) {
	defer func() {
		if v := recover(); v != nil {
			r = result{panicked: true, panicVal: v}
		}
	}()
	return result{err: f()}
}

// Do runs f on the executor and returns its error. It blocks until f has
// run. Called from inside a Do function (on the executor itself) it runs f
// inline, so helpers may call Do without knowing where they run.
func Do(f func() error) error {
	if !loaded.Load() {
		return ErrNotLoaded
	}
	if fn.threadBound() == 1 {
		return f()
	}
	done := make(chan result, 1)
	jobs <- job{f: f, done: done}
	r := <-done
	if r.panicked {
		panic(r.panicVal)
	}
	return r.err
}
