package jinja

import (
	"fmt"
	"strings"
)

// Expression evaluation.

func (r *renderer) eval(e expr, s *scope) (Value, error) {
	v, err := r.eval1(e, s)
	return v, errAt(e.lineNo(), err)
}

func (r *renderer) eval1(e expr, s *scope) (Value, error) {
	switch e := e.(type) {
	case *constExpr:
		return e.val, nil
	case *nameExpr:
		if v, ok := s.lookup(e.name); ok {
			return v, nil
		}
		return Undefined{Hint: fmt.Sprintf("'%s' is undefined", e.name)}, nil
	case *listExpr:
		items, err := r.evalAll(e.items, s)
		if err != nil {
			return nil, err
		}
		return &List{Items: items}, nil
	case *tupleExpr:
		items, err := r.evalAll(e.items, s)
		if err != nil {
			return nil, err
		}
		return Tuple(items), nil
	case *dictExpr:
		d := NewDict()
		for i := range e.keys {
			k, err := r.eval(e.keys[i], s)
			if err != nil {
				return nil, err
			}
			v, err := r.eval(e.vals[i], s)
			if err != nil {
				return nil, err
			}
			if err := d.Set(k, v); err != nil {
				return nil, err
			}
		}
		return d, nil
	case *getAttrExpr:
		obj, err := r.eval(e.obj, s)
		if err != nil {
			return nil, err
		}
		return getAttr(obj, e.attr)
	case *getItemExpr:
		obj, err := r.eval(e.obj, s)
		if err != nil {
			return nil, err
		}
		if sl, ok := e.key.(*sliceExpr); ok {
			return r.evalSlice(obj, sl, s)
		}
		k, err := r.eval(e.key, s)
		if err != nil {
			return nil, err
		}
		return getItem(obj, k)
	case *callExpr:
		return r.evalCall(e, s, nil)
	case *filterExpr:
		v, err := r.eval(e.node, s)
		if err != nil {
			return nil, err
		}
		return r.applyFilter(e, v, s)
	case *testExpr:
		return r.applyTest(e, s)
	case *unaryExpr:
		x, err := r.eval(e.x, s)
		if err != nil {
			return nil, err
		}
		return unary(e.op, x)
	case *binaryExpr:
		return r.evalBinary(e, s)
	case *concatExpr:
		var b strings.Builder
		for _, p := range e.parts {
			v, err := r.eval(p, s)
			if err != nil {
				return nil, err
			}
			b.WriteString(str(v))
			if b.Len() > r.limits.MaxOutput {
				return nil, fmt.Errorf("%w: string larger than %d bytes", ErrLimit, r.limits.MaxOutput)
			}
		}
		return b.String(), nil
	case *compareExpr:
		return r.evalCompare(e, s)
	case *condExpr:
		t, err := r.eval(e.test, s)
		if err != nil {
			return nil, err
		}
		if truth(t) {
			return r.eval(e.then, s)
		}
		if e.els == nil {
			return Undefined{Hint: "the inline if-expression evaluated to false and no else section was defined"}, nil
		}
		return r.eval(e.els, s)
	case *sliceExpr:
		return nil, fmt.Errorf("slice outside of a subscript")
	case *nsRefExpr:
		return nil, fmt.Errorf("namespace reference outside of a set")
	}
	return nil, fmt.Errorf("unknown expression %T", e)
}

func (r *renderer) evalAll(es []expr, s *scope) ([]Value, error) {
	out := make([]Value, len(es))
	for i, e := range es {
		v, err := r.eval(e, s)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

func (r *renderer) evalBinary(e *binaryExpr, s *scope) (Value, error) {
	l, err := r.eval(e.l, s)
	if err != nil {
		return nil, err
	}
	switch e.op {
	case "and":
		if !truth(l) {
			return l, nil
		}
		return r.eval(e.r, s)
	case "or":
		if truth(l) {
			return l, nil
		}
		return r.eval(e.r, s)
	}
	rv, err := r.eval(e.r, s)
	if err != nil {
		return nil, err
	}
	v, err := binary(e.op, l, rv)
	if err != nil {
		return nil, err
	}
	if sv, ok := v.(string); ok && len(sv) > r.limits.MaxOutput {
		return nil, fmt.Errorf("%w: string larger than %d bytes", ErrLimit, r.limits.MaxOutput)
	}
	if lv, ok := v.(*List); ok && len(lv.Items) > r.limits.MaxOutput {
		return nil, fmt.Errorf("%w: list longer than %d items", ErrLimit, r.limits.MaxOutput)
	}
	return v, nil
}

func (r *renderer) evalCompare(e *compareExpr, s *scope) (Value, error) {
	l, err := r.eval(e.first, s)
	if err != nil {
		return nil, err
	}
	for i, op := range e.ops {
		rv, err := r.eval(e.rest[i], s)
		if err != nil {
			return nil, err
		}
		ok, err := compareOp(op, l, rv)
		if err != nil {
			return nil, err
		}
		if !ok {
			return false, nil
		}
		l = rv
	}
	return true, nil
}

func compareOp(op string, l, r Value) (bool, error) {
	switch op {
	case "==":
		return equal(l, r), nil
	case "!=":
		return !equal(l, r), nil
	case "in":
		return contains(r, l)
	case "notin":
		ok, err := contains(r, l)
		return !ok, err
	}
	if u, ok := l.(Undefined); ok {
		return false, u.err()
	}
	if u, ok := r.(Undefined); ok {
		return false, u.err()
	}
	c, err := compare(l, r)
	if err != nil {
		return false, fmt.Errorf("'%s' not supported between instances of '%s' and '%s'", op, typeName(l), typeName(r))
	}
	switch op {
	case "<":
		return c == -1, nil
	case "<=":
		return c == -1 || c == 0, nil
	case ">":
		return c == 1, nil
	case ">=":
		return c == 1 || c == 0, nil
	}
	return false, fmt.Errorf("unknown comparison %s", op)
}

// contains is Python's `item in container`.
func contains(container, item Value) (bool, error) {
	switch c := container.(type) {
	case Undefined:
		return false, nil
	case string:
		s, ok := item.(string)
		if !ok {
			return false, fmt.Errorf("'in <string>' requires string as left operand, not %s", typeName(item))
		}
		return strings.Contains(c, s), nil
	case *List:
		for _, it := range c.Items {
			if equal(it, item) {
				return true, nil
			}
		}
		return false, nil
	case Tuple:
		for _, it := range c {
			if equal(it, item) {
				return true, nil
			}
		}
		return false, nil
	case *Dict:
		if _, ok := keyOf(item); !ok {
			return false, fmt.Errorf("unhashable type: '%s'", typeName(item))
		}
		_, ok := c.Get(item)
		return ok, nil
	}
	return false, fmt.Errorf("argument of type '%s' is not iterable", typeName(container))
}

func (r *renderer) evalSlice(obj Value, sl *sliceExpr, s *scope) (Value, error) {
	var parts [3]Value
	for i, e := range []expr{sl.start, sl.stop, sl.step} {
		if e == nil {
			continue
		}
		v, err := r.eval(e, s)
		if err != nil {
			return nil, err
		}
		parts[i] = v
	}
	if u, ok := obj.(Undefined); ok {
		return nil, u.err()
	}
	return slice(obj, parts[0], parts[1], parts[2])
}

// slice is Python's obj[start:stop:step]; a type that cannot be sliced
// gives Undefined, as jinja2's getitem does.
func slice(obj, start, stop, step Value) (Value, error) {
	var n int
	switch o := obj.(type) {
	case string:
		n = len([]rune(o))
	case *List:
		n = len(o.Items)
	case Tuple:
		n = len(o)
	default:
		return Undefined{Hint: fmt.Sprintf("'%s' object is not subscriptable", typeName(obj))}, nil
	}
	idx := func(v Value) (int, bool, error) {
		if v == nil {
			return 0, false, nil
		}
		i, ok := toInt(v)
		if !ok {
			return 0, false, fmt.Errorf("slice indices must be integers or None")
		}
		return clampInt(i), true, nil
	}
	st, hasStep, err := idx(step)
	if err != nil {
		return nil, err
	}
	if !hasStep {
		st = 1
	}
	if st == 0 {
		return nil, fmt.Errorf("slice step cannot be zero")
	}
	lower, upper := 0, n
	if st < 0 {
		lower, upper = -1, n-1
	}
	bound := func(v Value, def int) (int, error) {
		i, ok, err := idx(v)
		if err != nil || !ok {
			return def, err
		}
		if i < 0 {
			i += n
			if i < lower {
				i = lower
			}
		} else if i > upper {
			i = upper
		}
		return i, nil
	}
	var a, b int
	if st > 0 {
		a, err = bound(start, lower)
		if err == nil {
			b, err = bound(stop, upper)
		}
	} else {
		a, err = bound(start, upper)
		if err == nil {
			b, err = bound(stop, lower)
		}
	}
	if err != nil {
		return nil, err
	}
	var picks []int
	for i := a; (st > 0 && i < b) || (st < 0 && i > b); i += st {
		picks = append(picks, i)
	}
	switch o := obj.(type) {
	case string:
		rs := []rune(o)
		out := make([]rune, len(picks))
		for j, i := range picks {
			out[j] = rs[i]
		}
		return string(out), nil
	case *List:
		out := make([]Value, len(picks))
		for j, i := range picks {
			out[j] = o.Items[i]
		}
		return &List{Items: out}, nil
	case Tuple:
		out := make(Tuple, len(picks))
		for j, i := range picks {
			out[j] = o[i]
		}
		return out, nil
	}
	return nil, nil
}

func clampInt(i int64) int {
	const lim = 1 << 40
	if i > lim {
		return lim
	}
	if i < -lim {
		return -lim
	}
	return int(i)
}
