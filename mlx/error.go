package mlx

import (
	"errors"
	"fmt"
)

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
