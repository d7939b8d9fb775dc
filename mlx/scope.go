package mlx

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
