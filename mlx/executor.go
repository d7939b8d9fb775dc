// Package mlx binds Apple's MLX array framework through libmlxgo, the
// project's C ABI shim (native/shim), loaded at run time with purego: no cgo.
//
// # One thread
//
// MLX keeps default streams, random state and caches per OS thread. A model
// whose arrays were built on one thread and evaluated on another would use two
// streams and two random key sequences, and its results would depend on the
// Go scheduler. So every MLX call runs on one goroutine, locked to its OS
// thread with runtime.LockOSThread: the executor. The rest of the program
// sends work to it with Do:
//
//	err := mlx.Do(func() error {
//		s := mlx.NewScope()
//		defer s.Close()
//		y := mlx.Matmul(x, w)
//		return mlx.Eval(y)
//	})
//
// The shim enforces this: the executor's thread is bound at Load, and an op
// called on any other thread fails with ErrWrongThread instead of quietly
// creating a second set of per-thread state. The check is a thread-local load
// inside the shim, so it costs nothing measurable. Do called from inside a Do
// function runs inline.
//
// # Errors
//
// Ops return *Array without an error so that model code reads like the
// math. A failed op (MLX threw, or an input was nil or freed) returns an
// Array that carries the error; ops given such an Array pass the error on
// without calling MLX, and Eval, the data accessors and Err report it, as an
// *Error holding MLX's own message.
//
// Graph-building errors (shapes, dtypes, arguments) are all caught. Errors
// inside MLX's kernels are not always catchable: on the CPU backend an
// allocation the system refuses (say, a 2 TiB array) crashes the process in
// MLX's worker thread, exactly as it does under Python mlx. Keep sizes within
// the machine's memory before evaluating.
//
// # Releasing arrays
//
// Arrays hold native memory and are released deterministically: by Free, or
// by closing the Scope that was innermost when they were made (Keep moves an
// array out to the enclosing scope). There are no finalizers: a finalizer
// runs on an arbitrary goroutine, which would be the wrong thread.
//
// This package must never import the native package: the pack resolver has to
// stay loadable without MLX, and callers pass the shim's path to Load.
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
