package mlx

import (
	"errors"
	"fmt"
)

// call gathers an op's input handles, stopping at the first input that is
// nil, freed or carries an error, and then makes the one shim call:
//
//	c := begin("add")
//	ha, hb := c.in(a), c.in(b)
//	return c.do(func(out *uintptr) int32 { return f(ha, hb, out) })
type call struct {
	op  string
	err error
}

func begin(op string) *call {
	c := &call{op: op}
	if !loaded.Load() {
		c.err = ErrNotLoaded
	}
	return c
}

// in is a required input.
func (c *call) in(a *Array) uintptr {
	if c.err != nil {
		return 0
	}
	h, err := a.handle(c.op)
	c.err = err
	return h
}

// opt is an optional input: nil is passed as a NULL handle.
func (c *call) opt(a *Array) uintptr {
	if c.err != nil {
		return 0
	}
	h, err := a.optHandle(c.op)
	c.err = err
	return h
}

// ins is a list of required inputs.
func (c *call) ins(arrs []*Array) []uintptr {
	hs := make([]uintptr, len(arrs))
	for i, a := range arrs {
		hs[i] = c.in(a)
	}
	return hs
}

// fail records an argument error found on the Go side.
func (c *call) fail(format string, args ...any) {
	if c.err == nil {
		c.err = argError(c.op, format, args...)
	}
}

// do makes the call unless an input failed, and wraps the result.
func (c *call) do(f func(out *uintptr) int32) *Array {
	if c.err != nil {
		return errArray(c.err)
	}
	var out uintptr
	if err := check(c.op, f(&out)); err != nil {
		return errArray(err)
	}
	return newArray(out)
}

// many is do for ops with n results written to an array of handles.
func (c *call) many(n int, f func(out *uintptr) int32) []*Array {
	res := make([]*Array, n)
	if c.err == nil && n <= 0 {
		c.fail("no results requested")
	}
	if c.err == nil {
		hs := make([]uintptr, n)
		if err := check(c.op, f(&hs[0])); err != nil {
			c.err = err
		} else {
			for i, h := range hs {
				res[i] = newArray(h)
			}
			return res
		}
	}
	for i := range res {
		res[i] = errArray(c.err)
	}
	return res
}

// hptr is a pointer to the first handle, or nil for none.
func hptr(hs []uintptr) *uintptr {
	if len(hs) == 0 {
		return nil
	}
	return &hs[0]
}

// allAxes spells out every axis of a, for ops whose "all axes" form the ABI
// leaves to the caller.
func allAxes(a *Array) []int {
	n := a.Ndim()
	axes := make([]int, n)
	for i := range axes {
		axes[i] = i
	}
	return axes
}

// Status is a shim status code (native/shim/mlxgo.h).
type Status int32

const (
	StatusOK     Status = 0
	StatusMLX    Status = 1 // MLX threw; Msg is its message
	StatusArg    Status = 2 // misuse caught by the shim (NULL handle, bad dtype)
	StatusThread Status = 3 // called off the executor thread
)

// Error is a failed MLX call: the op, the shim status, and MLX's message.
type Error struct {
	Op     string
	Status Status
	Msg    string

	sentinel error // ErrFreed and the like, for errors.Is
}

func (e *Error) Error() string { return "mlx: " + e.Op + ": " + e.Msg }

// Is lets errors.Is(err, ErrWrongThread) match a shim thread refusal.
func (e *Error) Is(target error) bool {
	return (target == ErrWrongThread && e.Status == StatusThread) || (e.sentinel != nil && target == e.sentinel)
}

var (
	// ErrNotLoaded is returned by everything before Load succeeds.
	ErrNotLoaded = errors.New("mlx: native library not loaded (call mlx.Load)")
	// ErrWrongThread marks an MLX call made off the executor (use mlx.Do).
	ErrWrongThread = errors.New("mlx: call off the executor thread (use mlx.Do)")
	// ErrFreed marks the use of an array after Free or after its scope closed.
	ErrFreed = errors.New("mlx: array used after it was freed")
)

// check turns a shim status into an error, reading the thread-local message
// on the same OS thread that made the call. Off the executor the calling
// goroutine may have moved threads, so the message is fixed text there.
func check(op string, st int32) error {
	if st == 0 {
		return nil
	}
	if Status(st) == StatusThread {
		return &Error{Op: op, Status: StatusThread, Msg: ErrWrongThread.Error()}
	}
	return &Error{Op: op, Status: Status(st), Msg: fn.lastError()}
}

// argError is an error found on the Go side before calling the shim.
func argError(op, format string, args ...any) error {
	return &Error{Op: op, Status: StatusArg, Msg: fmt.Sprintf(format, args...)}
}
