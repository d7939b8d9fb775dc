// Package jinja is a Jinja2 template engine in pure Go, written for chat
// templates: it reproduces jinja2 3.1 as transformers configures it
// (ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and the
// loopcontrols extension) byte for byte, with Python's semantics for
// truthiness, equality, str()/repr() and json.dumps.
//
// It is hand-rolled rather than borrowed because parity is the point:
// whitespace control, float printing, tojson's key order and the sandbox's
// refusal to mutate lists all have to match the Python oracle exactly, and
// they are easier to get right, and to keep right, in code we own.
//
// Templates come from model files and are untrusted: rendering never panics
// on any input, never touches the host beyond the injected clock, and is
// bounded in recursion depth, loop iterations and output size (Limits).
package jinja

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Limits bound the work one Render may do. Zero fields take the defaults.
type Limits struct {
	MaxOutput int // bytes of rendered text (default 64 MiB)
	MaxSteps  int // evaluated nodes and loop iterations (default 50 million)
	MaxDepth  int // nested macro calls (default 200)
}

const maxDepth = 500 // nesting bound for repr/json of containers

func (l Limits) withDefaults() Limits {
	if l.MaxOutput <= 0 {
		l.MaxOutput = 64 << 20
	}
	if l.MaxSteps <= 0 {
		l.MaxSteps = 50_000_000
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = 200
	}
	return l
}

// Template is a parsed template, safe to render from several goroutines.
type Template struct {
	body   []node
	Limits Limits
	// Now is the clock behind strftime_now; nil means time.Now.
	Now func() time.Time
}

// Parse parses template source. Syntax errors are *SyntaxError and name the line.
func Parse(source string) (*Template, error) {
	toks, err := lex(source)
	if err != nil {
		return nil, err
	}
	body, err := parse(toks)
	if err != nil {
		return nil, err
	}
	return &Template{body: body}, nil
}

// RenderError is a failure while rendering; Line is the template line.
type RenderError struct {
	Line int
	Err  error
}

func (e *RenderError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }
func (e *RenderError) Unwrap() error { return e.Err }

// RaiseError is what the template's raise_exception(msg) produces.
type RaiseError struct{ Msg string }

func (e *RaiseError) Error() string { return e.Msg }

// ErrLimit is wrapped by errors from exceeding Limits.
var ErrLimit = errors.New("template exceeded a rendering limit")

// Render renders the template with the given variables. Values may be the
// package's own (see Value) or plain Go data, converted with FromGo.
func (t *Template) Render(vars map[string]any) (string, error) {
	globals := newScope(nil)
	for k, v := range builtinGlobals(t) {
		globals.vars[k] = v
	}
	for k, v := range vars {
		cv, err := FromGo(v)
		if err != nil {
			return "", fmt.Errorf("cannot use variable %q: %w", k, err)
		}
		globals.vars[k] = cv
	}
	r := &renderer{limits: t.Limits.withDefaults()}
	var out strings.Builder
	r.out = &out
	err := r.block(t.body, newScope(globals))
	if err != nil {
		var lc *loopCtl
		if errors.As(err, &lc) {
			err = &RenderError{Line: lc.line, Err: errors.New("loop control outside of a loop")}
		}
		return "", err
	}
	return out.String(), nil
}

// scope is one level of variables: the globals, the template, a loop body,
// a macro call or a with block. Assignments go to the innermost scope, as
// jinja2's `set` does, which is why templates need namespace() to carry
// values out of loops.
type scope struct {
	vars   map[string]Value
	parent *scope
}

func newScope(parent *scope) *scope { return &scope{vars: map[string]Value{}, parent: parent} }

func (s *scope) lookup(name string) (Value, bool) {
	for c := s; c != nil; c = c.parent {
		if v, ok := c.vars[name]; ok {
			return v, true
		}
	}
	return nil, false
}

type renderer struct {
	out    *strings.Builder
	limits Limits
	steps  int
	depth  int
}

// step counts work against MaxSteps.
func (r *renderer) step(line int) error {
	r.steps++
	if r.steps > r.limits.MaxSteps {
		return &RenderError{Line: line, Err: fmt.Errorf("%w: more than %d steps", ErrLimit, r.limits.MaxSteps)}
	}
	return nil
}

func (r *renderer) write(line int, s string) error {
	if r.out.Len()+len(s) > r.limits.MaxOutput {
		return &RenderError{Line: line, Err: fmt.Errorf("%w: output larger than %d bytes", ErrLimit, r.limits.MaxOutput)}
	}
	r.out.WriteString(s)
	return nil
}

// errAt attaches a line to an error unless it already has one.
func errAt(line int, err error) error {
	if err == nil {
		return nil
	}
	var re *RenderError
	if errors.As(err, &re) {
		return err
	}
	var lc *loopCtl
	if errors.As(err, &lc) {
		return err
	}
	return &RenderError{Line: line, Err: err}
}

// loopCtl carries break/continue up to the enclosing for loop.
type loopCtl struct {
	brk  bool
	line int
}

func (l *loopCtl) Error() string { return "loop control" }
