package jinja

import (
	"fmt"
	"strings"
	"time"
)

// Tests (`x is name`), as jinja2 3.1 defines them.

type testFunc func(r *renderer, v Value, args []Value, kw *Dict) (bool, error)

var tests map[string]testFunc

func init() {
	cmpTest := func(op string) testFunc {
		return func(r *renderer, v Value, args []Value, kw *Dict) (bool, error) {
			a, err := bind(op, []string{"other"}, nil, args, kw)
			if err != nil {
				return false, err
			}
			return compareOp(op, v, a[0])
		}
	}
	is := func(f func(Value) bool) testFunc {
		return func(r *renderer, v Value, args []Value, kw *Dict) (bool, error) { return f(v), nil }
	}
	tests = map[string]testFunc{
		"defined":   is(func(v Value) bool { _, u := v.(Undefined); return !u }),
		"undefined": is(func(v Value) bool { _, u := v.(Undefined); return u }),
		"none":      is(func(v Value) bool { return v == nil }),
		"boolean":   is(func(v Value) bool { _, ok := v.(bool); return ok }),
		"true":      is(func(v Value) bool { b, ok := v.(bool); return ok && b }),
		"false":     is(func(v Value) bool { b, ok := v.(bool); return ok && !b }),
		"integer":   is(func(v Value) bool { _, ok := v.(int64); return ok }),
		"float":     is(func(v Value) bool { _, ok := v.(float64); return ok }),
		"number":    is(isNumber),
		"string":    is(func(v Value) bool { _, ok := v.(string); return ok }),
		"mapping":   is(func(v Value) bool { _, ok := v.(*Dict); return ok }),
		"sequence": is(func(v Value) bool {
			switch v.(type) {
			case string, *List, Tuple, *Dict:
				return true
			}
			return false
		}),
		"iterable": is(func(v Value) bool {
			switch v.(type) {
			case string, *List, Tuple, *Dict, Undefined:
				return true
			}
			return false
		}),
		"callable": is(func(v Value) bool {
			switch v.(type) {
			case *Macro, Func, method:
				return true
			}
			return false
		}),
		"escaped": is(func(v Value) bool { return false }),
		"lower":   is(func(v Value) bool { s := str(v); return s == pyLower(s) }),
		"upper":   is(func(v Value) bool { s := str(v); return s == pyUpper(s) }),
		"odd":     parity(1),
		"even":    parity(0),
		"divisibleby": func(r *renderer, v Value, args []Value, kw *Dict) (bool, error) {
			a, err := bind("divisibleby", []string{"num"}, nil, args, kw)
			if err != nil {
				return false, err
			}
			m, err := binary("%", v, a[0])
			if err != nil {
				return false, err
			}
			return equal(m, int64(0)), nil
		},
		"sameas": func(r *renderer, v Value, args []Value, kw *Dict) (bool, error) {
			a, err := bind("sameas", []string{"other"}, nil, args, kw)
			if err != nil {
				return false, err
			}
			return sameAs(v, a[0]), nil
		},
		"in": func(r *renderer, v Value, args []Value, kw *Dict) (bool, error) {
			a, err := bind("in", []string{"seq"}, nil, args, kw)
			if err != nil {
				return false, err
			}
			return contains(a[0], v)
		},
		"filter": func(r *renderer, v Value, args []Value, kw *Dict) (bool, error) {
			_, ok := filters[str(v)]
			return ok, nil
		},
		"test": func(r *renderer, v Value, args []Value, kw *Dict) (bool, error) {
			_, ok := tests[str(v)]
			return ok, nil
		},
	}
	for _, names := range [][]string{{"==", "eq", "equalto"}, {"!=", "ne"}, {"<", "lt", "lessthan"},
		{"<=", "le"}, {">", "gt", "greaterthan"}, {">=", "ge"}} {
		for _, n := range names {
			tests[n] = cmpTest(names[0])
		}
	}
}

func parity(want int64) testFunc {
	return func(r *renderer, v Value, args []Value, kw *Dict) (bool, error) {
		m, err := binary("%", v, int64(2))
		if err != nil {
			return false, err
		}
		return equal(m, want), nil
	}
}

// sameAs is Python's `is`: identity for containers, value for the
// singletons and small immutable values that CPython interns.
func sameAs(a, b Value) bool {
	switch x := a.(type) {
	case *List, *Dict, *Namespace, *Macro:
		return a == b
	case nil, bool:
		return a == b
	case Undefined:
		return false
	case int64:
		y, ok := b.(int64)
		return ok && x == y && x >= -5 && x <= 256
	case string:
		y, ok := b.(string)
		return ok && x == y
	}
	return false
}

func (r *renderer) applyTest(t *testExpr, s *scope) (Value, error) {
	fn, ok := tests[t.name]
	if !ok {
		return nil, errAt(t.line, fmt.Errorf("no test named '%s'", t.name))
	}
	v, err := r.eval(t.node, s)
	if err != nil {
		return nil, err
	}
	args, err := r.evalAll(t.args, s)
	if err != nil {
		return nil, err
	}
	kw := NewDict()
	for i, n := range t.kwNames {
		kv, err := r.eval(t.kwVals[i], s)
		if err != nil {
			return nil, err
		}
		kw.SetString(n, kv)
	}
	ok, err = fn(r, v, args, kw)
	return ok, errAt(t.line, err)
}

// builtinGlobals are the names transformers' environment defines.
func builtinGlobals(t *Template) map[string]Value {
	now := t.Now
	if now == nil {
		now = time.Now
	}
	return map[string]Value{
		"raise_exception": Func(func(args []Value, kw *Dict) (Value, error) {
			a, err := bind("raise_exception", []string{"message"}, nil, args, kw)
			if err != nil {
				return nil, err
			}
			return nil, &RaiseError{Msg: str(a[0])}
		}),
		"strftime_now": Func(func(args []Value, kw *Dict) (Value, error) {
			a, err := bind("strftime_now", []string{"format"}, nil, args, kw)
			if err != nil {
				return nil, err
			}
			f, err := strArg("strftime_now", a[0])
			if err != nil {
				return nil, err
			}
			return strftime(now(), f), nil
		}),
		"range": Func(pyRange),
		"dict": Func(func(args []Value, kw *Dict) (Value, error) {
			return dictFrom("dict", args, kw)
		}),
		"namespace": Func(func(args []Value, kw *Dict) (Value, error) {
			d, err := dictFrom("namespace", args, kw)
			if err != nil {
				return nil, err
			}
			for _, k := range d.keys {
				if s, ok := k.(string); ok && strings.HasPrefix(s, "_") {
					return nil, fmt.Errorf("chat templates cannot store underscore-prefixed attributes on a namespace, but got %s", strRepr(s))
				}
			}
			return &Namespace{attrs: d}, nil
		}),
		"joiner": Func(func(args []Value, kw *Dict) (Value, error) {
			a, err := bind("joiner", []string{"sep"}, []Value{", "}, args, kw)
			if err != nil {
				return nil, err
			}
			used := false
			return Func(func([]Value, *Dict) (Value, error) {
				if !used {
					used = true
					return "", nil
				}
				return a[0], nil
			}), nil
		}),
	}
}

// dictFrom is dict(*args, **kwargs).
func dictFrom(name string, args []Value, kw *Dict) (*Dict, error) {
	d := NewDict()
	if len(args) > 1 {
		return nil, fmt.Errorf("%s expected at most 1 argument, got %d", name, len(args))
	}
	if len(args) == 1 {
		switch src := args[0].(type) {
		case *Dict:
			for i, k := range src.keys {
				d.Set(k, src.vals[i])
			}
		default:
			pairs, err := iterate(src)
			if err != nil {
				return nil, err
			}
			for _, p := range pairs {
				kv, err := iterate(p)
				if err != nil || len(kv) != 2 {
					return nil, fmt.Errorf("dictionary update sequence element has wrong length")
				}
				if err := d.Set(kv[0], kv[1]); err != nil {
					return nil, err
				}
			}
		}
	}
	for i, k := range kw.keys {
		d.Set(k, kw.vals[i])
	}
	return d, nil
}

// maxRange is jinja2's sandbox limit on range().
const maxRange = 100000

func pyRange(args []Value, kw *Dict) (Value, error) {
	if kw.Len() > 0 {
		return nil, fmt.Errorf("range() takes no keyword arguments")
	}
	ints := make([]int64, len(args))
	for i, a := range args {
		n, ok := toInt(a)
		if !ok {
			return nil, fmt.Errorf("'%s' object cannot be interpreted as an integer", typeName(a))
		}
		ints[i] = n
	}
	start, stop, step := int64(0), int64(0), int64(1)
	switch len(ints) {
	case 1:
		stop = ints[0]
	case 2:
		start, stop = ints[0], ints[1]
	case 3:
		start, stop, step = ints[0], ints[1], ints[2]
	default:
		return nil, fmt.Errorf("range expected 1 to 3 arguments, got %d", len(ints))
	}
	if step == 0 {
		return nil, fmt.Errorf("range() arg 3 must not be zero")
	}
	var out []Value
	for i := start; (step > 0 && i < stop) || (step < 0 && i > stop); i += step {
		if len(out) >= maxRange {
			return nil, fmt.Errorf("range too big, maximum size for range is %d", maxRange)
		}
		out = append(out, i)
	}
	return &List{Items: out}, nil
}
