package mlx

import (
	"fmt"
	"unsafe"
)

// Array is a handle to an MLX array: a node of a lazy graph until Eval. An
// Array that carries an error (see Err) holds no native handle.
type Array struct {
	h     uintptr
	err   error
	owner *Scope

	// Shape and dtype never change for an MLX array; they are read once.
	shape []int
	dtype Dtype
	info  bool
}

// newArray wraps a fresh handle and gives it to the innermost scope.
func newArray(h uintptr) *Array {
	a := &Array{h: h}
	if top != nil {
		a.owner = top
		top.arrays = append(top.arrays, a)
	}
	return a
}

// errArray is the result of a failed op: it carries err to whatever uses it.
func errArray(err error) *Array { return &Array{err: err} }

// Err is the error this array carries, if an op that made it (or one of its
// inputs) failed; it is nil for a good array. Use after Free reports ErrFreed.
func (a *Array) Err() error {
	if a == nil {
		return &Error{Op: "array", Status: StatusArg, Msg: "nil array"}
	}
	if a.err != nil {
		return a.err
	}
	if a.h == 0 {
		return &Error{Op: "array", Status: StatusArg, Msg: ErrFreed.Error(), sentinel: ErrFreed}
	}
	return nil
}

// Free releases the native array now. It is safe to call twice and on an
// array that carries an error. Any goroutine may call it.
func (a *Array) Free() {
	if a == nil || a.h == 0 {
		return
	}
	fn.arrayFree(a.h)
	a.h = 0
}

// handle returns the native handle for use as op's input.
func (a *Array) handle(op string) (uintptr, error) {
	if a == nil {
		return 0, &Error{Op: op, Status: StatusArg, Msg: "nil array"}
	}
	if a.err != nil {
		return 0, a.err
	}
	if a.h == 0 {
		return 0, &Error{Op: op, Status: StatusArg, Msg: ErrFreed.Error(), sentinel: ErrFreed}
	}
	return a.h, nil
}

// optHandle is handle for an optional input: nil means absent (0).
func (a *Array) optHandle(op string) (uintptr, error) {
	if a == nil {
		return 0, nil
	}
	return a.handle(op)
}

func (a *Array) loadInfo() error {
	if a.info {
		return nil
	}
	h, err := a.handle("info")
	if err != nil {
		return err
	}
	var dt, ndim int32
	var buf [16]int32
	if err := check("info", fn.arrayInfo(h, &dt, &ndim, &buf[0], int32(len(buf)))); err != nil {
		return err
	}
	dims := buf[:]
	if int(ndim) > len(buf) {
		dims = make([]int32, ndim)
		if err := check("info", fn.arrayInfo(h, &dt, &ndim, &dims[0], ndim)); err != nil {
			return err
		}
	}
	a.shape = make([]int, ndim)
	for i := range a.shape {
		a.shape[i] = int(dims[i])
	}
	a.dtype = Dtype(dt)
	a.info = true
	return nil
}

// Shape is the array's shape, or nil if it carries an error.
func (a *Array) Shape() []int {
	if a.loadInfo() != nil {
		return nil
	}
	return append([]int(nil), a.shape...)
}

// Dim is the size of axis i (negative counts from the end); 0 if out of range
// or the array carries an error.
func (a *Array) Dim(i int) int {
	if a.loadInfo() != nil {
		return 0
	}
	if i < 0 {
		i += len(a.shape)
	}
	if i < 0 || i >= len(a.shape) {
		return 0
	}
	return a.shape[i]
}

// Ndim is the number of axes (0 for a scalar, or on error).
func (a *Array) Ndim() int {
	if a.loadInfo() != nil {
		return 0
	}
	return len(a.shape)
}

// Size is the number of elements (0 on error).
func (a *Array) Size() int {
	if a.loadInfo() != nil {
		return 0
	}
	n := 1
	for _, d := range a.shape {
		n *= d
	}
	return n
}

// Dtype is the element type (Bool on error; check Err).
func (a *Array) Dtype() Dtype {
	if a.loadInfo() != nil {
		return Bool
	}
	return a.dtype
}

// Itemsize is the size of one element in bytes.
func (a *Array) Itemsize() int { return a.Dtype().Size() }

// Nbytes is the size of the array's elements in bytes.
func (a *Array) Nbytes() int { return a.Size() * a.Itemsize() }

// String describes the array for logs: "array(bfloat16, [2 3])".
func (a *Array) String() string {
	if err := a.Err(); err != nil {
		return "array(error: " + err.Error() + ")"
	}
	return fmt.Sprintf("array(%s, %v)", a.Dtype(), a.Shape())
}

// Clone makes a second handle to the same array, with its own lifetime.
func (a *Array) Clone() *Array {
	h, err := a.handle("clone")
	if err != nil {
		return errArray(err)
	}
	var out uintptr
	if err := check("clone", fn.arrayClone(h, &out)); err != nil {
		return errArray(err)
	}
	return newArray(out)
}

// Eval computes the arrays and waits for them. It reports the first error
// any of them carries.
func Eval(arrs ...*Array) error { return evalWith("eval", fn.eval, arrs) }

// AsyncEval schedules the arrays' computation and returns at once; a later
// Eval or data access waits for it.
func AsyncEval(arrs ...*Array) error { return evalWith("async_eval", fn.asyncEval, arrs) }

func evalWith(op string, f func(*uintptr, int32) int32, arrs []*Array) error {
	if !loaded.Load() {
		return ErrNotLoaded
	}
	hs := make([]uintptr, len(arrs))
	for i, a := range arrs {
		h, err := a.handle(op)
		if err != nil {
			return err
		}
		hs[i] = h
	}
	if len(hs) == 0 {
		return nil
	}
	return check(op, f(&hs[0], int32(len(hs))))
}

// i32s converts Go ints to the shim's int; values past int32 are the
// caller's bug and MLX would reject them anyway, so they saturate.
func i32s(xs []int) []int32 {
	out := make([]int32, len(xs))
	for i, x := range xs {
		switch {
		case x > 1<<31-1:
			out[i] = 1<<31 - 1
		case x < -1<<31:
			out[i] = -1 << 31
		default:
			out[i] = int32(x)
		}
	}
	return out
}

// ptr32 is a pointer to the first element, or nil for an empty slice.
func ptr32(xs []int32) *int32 {
	if len(xs) == 0 {
		return nil
	}
	return &xs[0]
}

func flag(b bool) int32 {
	if b {
		return 1
	}
	return 0
}

// sliceBytes views a slice's memory as bytes (no copy).
func sliceBytes[T Element](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(z)))
}

// Scope frees, when closed, every array made while it was the innermost
// scope, except those passed to Keep. Scopes nest; like arrays they belong
// to the executor and must be made and closed inside Do.
//
//	s := mlx.NewScope()
//	defer s.Close()
//	h := mlx.Add(x, y)        // freed by Close
//	out := mlx.Multiply(h, h) // kept: moves to the enclosing scope
//	s.Keep(out)
type Scope struct {
	arrays []*Array
	parent *Scope
	closed bool
	// detached scopes were made off the executor: they track nothing, since
	// no array can be made there either.
	detached bool
}

// top is the innermost open scope. Only the executor goroutine touches it.
var top *Scope

// NewScope opens a scope inside the current one.
func NewScope() *Scope {
	if !loaded.Load() || fn.threadBound() != 1 {
		return &Scope{detached: true, closed: true}
	}
	s := &Scope{parent: top}
	top = s
	return s
}

// Keep moves arrays out of s to the enclosing scope (or to the caller, who
// must then Free them, when s is outermost). Arrays s does not own are left
// alone.
func (s *Scope) Keep(arrs ...*Array) {
	for _, a := range arrs {
		if a == nil || a.owner != s || s.closed {
			continue
		}
		a.owner = s.parent
		if s.parent != nil {
			s.parent.arrays = append(s.parent.arrays, a)
		}
	}
}

// Close frees the arrays s still owns. Scopes opened inside s and not yet
// closed are closed first, so a missed Close in a callee cannot leak past
// its caller's scope. Closing twice is a no-op.
func (s *Scope) Close() {
	if s.closed {
		return
	}
	for top != nil && top != s {
		top.Close()
	}
	for _, a := range s.arrays {
		if a.owner == s {
			a.Free()
			a.owner = nil
		}
	}
	s.arrays = nil
	s.closed = true
	if top == s {
		top = s.parent
	}
}

// Detach takes arrays out of the scope that owns them, so that no Close
// frees them: state that outlives the step that made it (model weights, KV
// cache buffers) is built inside per-step scopes and detached, and its owner
// releases it with Free. Like scopes, it belongs to the executor.
func Detach(arrs ...*Array) {
	for _, a := range arrs {
		if a != nil {
			a.owner = nil
		}
	}
}

// ErrorArray is an array carrying err, for functions that return *Array and
// find a misuse before calling MLX (a model given the wrong number of
// caches): the error travels through later ops like an MLX failure does.
func ErrorArray(err error) *Array {
	if err == nil {
		err = &Error{Op: "array", Status: StatusArg, Msg: "nil error"}
	}
	return errArray(err)
}

// OpName is the name of the op whose node makes a (MLX's primitive name,
// e.g. "Add", or one of the shim's "Mlxgo..." nodes), "" once a is evaluated
// and detached or when it was made from data. For tests that check which
// nodes a graph is built of.
func (a *Array) OpName() (string, error) {
	h, err := a.handle("op_name")
	if err != nil {
		return "", err
	}
	var p *byte
	if err := check("op_name", fn.arrayOpName(h, &p)); err != nil {
		return "", err
	}
	return cString(p), nil
}
