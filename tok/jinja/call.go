package jinja

import (
	"fmt"
)

// Func is a callable exposed to templates (raise_exception, range, ...).
// kwargs holds keyword arguments in call order; it is never nil.
type Func func(args []Value, kwargs *Dict) (Value, error)

// Macro is a {% macro %} (or a call block's caller) bound to the scope it
// was defined in.
type Macro struct {
	name    string
	node    *macroNode
	closure *scope
}

// method is a bound method of a str, list or dict value.
type method struct {
	recv Value
	name string
}

func (r *renderer) evalCall(c *callExpr, s *scope, caller *Macro) (Value, error) {
	fn, err := r.eval(c.fn, s)
	if err != nil {
		return nil, err
	}
	args, err := r.evalAll(c.args, s)
	if err != nil {
		return nil, err
	}
	kw := NewDict()
	for i, name := range c.kwNames {
		v, err := r.eval(c.kwVals[i], s)
		if err != nil {
			return nil, err
		}
		kw.SetString(name, v)
	}
	if c.dynArgs != nil {
		v, err := r.eval(c.dynArgs, s)
		if err != nil {
			return nil, err
		}
		more, err := iterate(v)
		if err != nil {
			return nil, err
		}
		args = append(args, more...)
	}
	if c.dynKwargs != nil {
		v, err := r.eval(c.dynKwargs, s)
		if err != nil {
			return nil, err
		}
		d, ok := v.(*Dict)
		if !ok {
			return nil, fmt.Errorf("argument after ** must be a mapping, not %s", typeName(v))
		}
		for i, k := range d.keys {
			ks, ok := k.(string)
			if !ok {
				return nil, fmt.Errorf("keywords must be strings")
			}
			kw.SetString(ks, d.vals[i])
		}
	}
	if caller != nil {
		kw.SetString("caller", caller)
	}
	return r.callValue(c.line, fn, args, kw)
}

func (r *renderer) callValue(line int, fn Value, args []Value, kw *Dict) (Value, error) {
	switch f := fn.(type) {
	case *Macro:
		return r.callMacro(line, f, args, kw)
	case Func:
		return f(args, kw)
	case method:
		return callMethod(f, args, kw)
	case Undefined:
		return nil, f.err()
	}
	return nil, fmt.Errorf("'%s' object is not callable", typeName(fn))
}

func (r *renderer) callMacro(line int, m *Macro, args []Value, kw *Dict) (Value, error) {
	r.depth++
	defer func() { r.depth-- }()
	if r.depth > r.limits.MaxDepth {
		return nil, fmt.Errorf("%w: macro calls nested deeper than %d", ErrLimit, r.limits.MaxDepth)
	}
	n := m.node
	s := newScope(m.closure)
	// Remaining keyword arguments, in call order, after parameters take theirs.
	rest := NewDict()
	for i, k := range kw.keys {
		rest.SetString(k.(string), kw.vals[i])
	}
	firstDefault := len(n.params) - len(n.defaults)
	for i, p := range n.params {
		if i < len(args) {
			if _, dup := rest.Get(p); dup {
				return nil, fmt.Errorf("macro '%s' got multiple values for argument '%s'", m.name, p)
			}
			s.vars[p] = args[i]
			continue
		}
		if v, ok := rest.Get(p); ok {
			s.vars[p] = v
			rest = without(rest, p)
			continue
		}
		if i >= firstDefault {
			v, err := r.eval(n.defaults[i-firstDefault], s)
			if err != nil {
				return nil, err
			}
			s.vars[p] = v
			continue
		}
		s.vars[p] = Undefined{Hint: fmt.Sprintf("parameter '%s' was not provided", p)}
	}
	usesVarargs, usesKwargs, usesCaller := macroUses(n)
	if c, ok := rest.Get("caller"); ok && usesCaller {
		s.vars["caller"] = c
		rest = without(rest, "caller")
	}
	if len(args) > len(n.params) {
		if !usesVarargs {
			return nil, fmt.Errorf("macro '%s' takes not more than %d argument(s)", m.name, len(n.params))
		}
		s.vars["varargs"] = Tuple(args[len(n.params):])
	} else if usesVarargs {
		s.vars["varargs"] = Tuple{}
	}
	if rest.Len() > 0 && !usesKwargs {
		return nil, fmt.Errorf("macro '%s' takes no keyword argument '%s'", m.name, rest.keys[0])
	}
	if usesKwargs {
		s.vars["kwargs"] = rest
	}
	text, err := r.capture(n.body, s)
	if err != nil {
		return nil, err
	}
	return text, nil
}

func without(d *Dict, key string) *Dict {
	out := NewDict()
	for i, k := range d.keys {
		if k != key {
			out.Set(k, d.vals[i])
		}
	}
	return out
}

// macroUses reports whether a macro body mentions varargs, kwargs or caller,
// which is how jinja2 decides that a macro accepts extra arguments.
func macroUses(n *macroNode) (varargs, kwargs, caller bool) {
	var walkE func(e expr)
	var walk func(ns []node)
	walkE = func(e expr) {
		if e == nil {
			return
		}
		switch e := e.(type) {
		case *nameExpr:
			switch e.name {
			case "varargs":
				varargs = true
			case "kwargs":
				kwargs = true
			case "caller":
				caller = true
			}
		case *listExpr:
			for _, x := range e.items {
				walkE(x)
			}
		case *tupleExpr:
			for _, x := range e.items {
				walkE(x)
			}
		case *dictExpr:
			for i := range e.keys {
				walkE(e.keys[i])
				walkE(e.vals[i])
			}
		case *getAttrExpr:
			walkE(e.obj)
		case *getItemExpr:
			walkE(e.obj)
			walkE(e.key)
		case *sliceExpr:
			walkE(e.start)
			walkE(e.stop)
			walkE(e.step)
		case *callExpr:
			walkE(e.fn)
			for _, x := range append(append(e.args, e.kwVals...), e.dynArgs, e.dynKwargs) {
				walkE(x)
			}
		case *filterExpr:
			walkE(e.node)
			for _, x := range append(e.args, e.kwVals...) {
				walkE(x)
			}
		case *testExpr:
			walkE(e.node)
			for _, x := range append(e.args, e.kwVals...) {
				walkE(x)
			}
		case *unaryExpr:
			walkE(e.x)
		case *binaryExpr:
			walkE(e.l)
			walkE(e.r)
		case *concatExpr:
			for _, x := range e.parts {
				walkE(x)
			}
		case *compareExpr:
			walkE(e.first)
			for _, x := range e.rest {
				walkE(x)
			}
		case *condExpr:
			walkE(e.test)
			walkE(e.then)
			walkE(e.els)
		}
	}
	walk = func(ns []node) {
		for _, n := range ns {
			switch n := n.(type) {
			case *outputNode:
				walkE(n.expr)
			case *forNode:
				walkE(n.iter)
				walkE(n.filter)
				walk(n.body)
				walk(n.elseBody)
			case *ifNode:
				walkE(n.test)
				walk(n.body)
				walk(n.elseBody)
			case *setNode:
				walkE(n.value)
			case *setBlockNode:
				walk(n.body)
			case *callBlockNode:
				walkE(n.call)
				walk(n.caller.body)
			case *filterBlockNode:
				walk(n.body)
			case *withNode:
				for _, v := range n.values {
					walkE(v)
				}
				walk(n.body)
			}
		}
	}
	walk(n.body)
	for _, d := range n.defaults {
		walkE(d)
	}
	return
}

// bind matches positional and keyword arguments to named parameters the way
// Python does for a builtin filter or method: defs holds the defaults of the
// trailing parameters (nil entries mean required).
func bind(fname string, params []string, defs []Value, args []Value, kw *Dict) ([]Value, error) {
	if len(args) > len(params) {
		return nil, fmt.Errorf("%s() takes at most %d arguments (%d given)", fname, len(params), len(args))
	}
	out := make([]Value, len(params))
	set := make([]bool, len(params))
	copy(out, args)
	for i := range args {
		set[i] = true
	}
	for i, k := range kw.keys {
		found := false
		for j, p := range params {
			if p == k {
				if set[j] {
					return nil, fmt.Errorf("%s() got multiple values for argument '%s'", fname, p)
				}
				out[j], set[j], found = kw.vals[i], true, true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("%s() got an unexpected keyword argument '%v'", fname, k)
		}
	}
	first := len(params) - len(defs)
	for j := range params {
		if set[j] {
			continue
		}
		if j < first {
			return nil, fmt.Errorf("%s() missing required argument '%s'", fname, params[j])
		}
		out[j] = defs[j-first]
	}
	return out, nil
}
