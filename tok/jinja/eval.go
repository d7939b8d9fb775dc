package jinja

import (
	"errors"
	"fmt"
	"strings"
)

// Statement evaluation.

func (r *renderer) block(nodes []node, s *scope) error {
	for _, n := range nodes {
		if err := r.exec(n, s); err != nil {
			return err
		}
	}
	return nil
}

func (r *renderer) exec(n node, s *scope) error {
	if err := r.step(n.lineNo()); err != nil {
		return err
	}
	switch n := n.(type) {
	case *dataNode:
		return r.write(n.line, n.text)
	case *outputNode:
		v, err := r.eval(n.expr, s)
		if err != nil {
			return err
		}
		return r.write(n.line, str(v))
	case *ifNode:
		v, err := r.eval(n.test, s)
		if err != nil {
			return err
		}
		if truth(v) {
			return r.block(n.body, s)
		}
		return r.block(n.elseBody, s)
	case *forNode:
		return r.execFor(n, s)
	case *setNode:
		v, err := r.eval(n.value, s)
		if err != nil {
			return err
		}
		return errAt(n.line, assign(n.target, v, s))
	case *setBlockNode:
		text, err := r.capture(n.body, s)
		if err != nil {
			return err
		}
		v, err := r.applyFilters(n.filters, text, s)
		if err != nil {
			return err
		}
		return errAt(n.line, assign(n.target, v, s))
	case *macroNode:
		s.vars[n.name] = &Macro{name: n.name, node: n, closure: s}
		return nil
	case *callBlockNode:
		caller := &Macro{name: "caller", node: n.caller, closure: s}
		v, err := r.evalCall(n.call, s, caller)
		if err != nil {
			return err
		}
		return r.write(n.line, str(v))
	case *filterBlockNode:
		text, err := r.capture(n.body, s)
		if err != nil {
			return err
		}
		v, err := r.applyFilters(n.filters, text, s)
		if err != nil {
			return err
		}
		return r.write(n.line, str(v))
	case *withNode:
		inner := newScope(s)
		for i, t := range n.targets {
			v, err := r.eval(n.values[i], s)
			if err != nil {
				return err
			}
			if err := assign(t, v, inner); err != nil {
				return errAt(n.line, err)
			}
		}
		return r.block(n.body, inner)
	case *loopControlNode:
		return &loopCtl{brk: n.brk, line: n.line}
	}
	return fmt.Errorf("line %d: unknown node %T", n.lineNo(), n)
}

// capture renders nodes into a string instead of the output.
func (r *renderer) capture(nodes []node, s *scope) (string, error) {
	saved := r.out
	var b strings.Builder
	r.out = &b
	err := r.block(nodes, s)
	r.out = saved
	if err != nil {
		return "", err
	}
	if saved.Len()+b.Len() > r.limits.MaxOutput {
		return "", &RenderError{Line: 0, Err: fmt.Errorf("%w: output larger than %d bytes", ErrLimit, r.limits.MaxOutput)}
	}
	return b.String(), nil
}

func (r *renderer) applyFilters(fs []*filterExpr, v Value, s *scope) (Value, error) {
	for _, f := range fs {
		var err error
		if v, err = r.applyFilter(f, v, s); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// assign binds a set/for/with target in scope s.
func assign(target expr, v Value, s *scope) error {
	switch t := target.(type) {
	case *nameExpr:
		s.vars[t.name] = v
		return nil
	case *tupleExpr:
		items, err := iterate(v)
		if err != nil {
			return fmt.Errorf("cannot unpack non-iterable %s object", typeName(v))
		}
		if len(items) != len(t.items) {
			if len(items) > len(t.items) {
				return fmt.Errorf("too many values to unpack (expected %d)", len(t.items))
			}
			return fmt.Errorf("not enough values to unpack (expected %d, got %d)", len(t.items), len(items))
		}
		for i, it := range t.items {
			if err := assign(it, items[i], s); err != nil {
				return err
			}
		}
		return nil
	case *nsRefExpr:
		obj, _ := s.lookup(t.name)
		ns, ok := obj.(*Namespace)
		if !ok {
			return fmt.Errorf("cannot assign attribute on non-namespace object")
		}
		if strings.HasPrefix(t.attr, "_") {
			return fmt.Errorf("chat templates cannot store underscore-prefixed attributes on a namespace, but got '%s'", t.attr)
		}
		ns.attrs.SetString(t.attr, v)
		return nil
	}
	return fmt.Errorf("cannot assign to %T", target)
}

func (r *renderer) execFor(n *forNode, s *scope) error {
	iv, err := r.eval(n.iter, s)
	if err != nil {
		return err
	}
	items, err := iterate(iv)
	if err != nil {
		return errAt(n.line, err)
	}
	if n.filter != nil {
		// jinja2 filters before counting, so loop.length and loop.last see
		// only the items that pass.
		kept := items[:0:0]
		for _, it := range items {
			fs := newScope(s)
			if err := assign(n.target, it, fs); err != nil {
				return errAt(n.line, err)
			}
			ok, err := r.eval(n.filter, fs)
			if err != nil {
				return err
			}
			if truth(ok) {
				kept = append(kept, it)
			}
		}
		items = kept
	}
	if len(items) == 0 {
		return r.block(n.elseBody, newScope(s))
	}
	loop := &loopState{items: items}
	if outer, ok := s.lookup("loop"); ok {
		if ol, ok := outer.(*loopState); ok {
			loop.depth0 = ol.depth0 + 1
		}
	}
	for i, it := range items {
		if err := r.step(n.line); err != nil {
			return err
		}
		loop.index = i
		// Each iteration gets a fresh scope: jinja2 re-reads outer names at
		// the top of every iteration, so a `set` never survives into the next.
		body := newScope(s)
		body.vars["loop"] = loop
		if err := assign(n.target, it, body); err != nil {
			return errAt(n.line, err)
		}
		err := r.block(n.body, body)
		var lc *loopCtl
		if errors.As(err, &lc) {
			if lc.brk {
				break
			}
			continue
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// loopState is the `loop` variable.
type loopState struct {
	items   []Value
	index   int
	depth0  int
	changed *Value
}

func (l *loopState) attr(name string) (Value, bool) {
	n := len(l.items)
	switch name {
	case "index":
		return int64(l.index + 1), true
	case "index0":
		return int64(l.index), true
	case "revindex":
		return int64(n - l.index), true
	case "revindex0":
		return int64(n - l.index - 1), true
	case "first":
		return l.index == 0, true
	case "last":
		return l.index == n-1, true
	case "length":
		return int64(n), true
	case "depth":
		return int64(l.depth0 + 1), true
	case "depth0":
		return int64(l.depth0), true
	case "previtem":
		if l.index == 0 {
			return Undefined{Hint: "there is no previous item"}, true
		}
		return l.items[l.index-1], true
	case "nextitem":
		if l.index >= n-1 {
			return Undefined{Hint: "there is no next item"}, true
		}
		return l.items[l.index+1], true
	case "cycle":
		return Func(func(args []Value, kw *Dict) (Value, error) {
			if len(args) == 0 {
				return nil, fmt.Errorf("no items for cycling given")
			}
			return args[l.index%len(args)], nil
		}), true
	case "changed":
		return Func(func(args []Value, kw *Dict) (Value, error) {
			v := Value(Tuple(args))
			if l.changed != nil && equal(*l.changed, v) {
				return false, nil
			}
			l.changed = &v
			return true, nil
		}), true
	}
	return nil, false
}
