package jinja

import (
	"fmt"
	"math"
	"strings"
)

// Operators and lookups with Python's semantics.

func unary(op string, x Value) (Value, error) {
	if op == "not" {
		return !truth(x), nil
	}
	if u, ok := x.(Undefined); ok {
		return nil, u.err()
	}
	switch x := x.(type) {
	case bool:
		i, _ := toInt(x)
		if op == "-" {
			return -i, nil
		}
		return i, nil
	case int64:
		if op == "-" {
			return -x, nil
		}
		return x, nil
	case float64:
		if op == "-" {
			return -x, nil
		}
		return x, nil
	}
	return nil, fmt.Errorf("bad operand type for unary %s: '%s'", op, typeName(x))
}

func binary(op string, l, r Value) (Value, error) {
	if u, ok := l.(Undefined); ok {
		return nil, u.err()
	}
	if u, ok := r.(Undefined); ok {
		return nil, u.err()
	}
	li, lInt := toInt(l)
	ri, rInt := toInt(r)
	lf, lNum := toFloat(l)
	rf, rNum := toFloat(r)
	if lNum && rNum {
		if lInt && rInt {
			return intOp(op, li, ri)
		}
		return floatOp(op, lf, rf)
	}
	switch op {
	case "+":
		switch a := l.(type) {
		case string:
			if b, ok := r.(string); ok {
				return a + b, nil
			}
		case *List:
			if b, ok := r.(*List); ok {
				return &List{Items: append(append([]Value{}, a.Items...), b.Items...)}, nil
			}
		case Tuple:
			if b, ok := r.(Tuple); ok {
				return append(append(Tuple{}, a...), b...), nil
			}
		}
	case "*":
		if rInt {
			if out, ok := repeat(l, ri); ok {
				return out, nil
			}
		}
		if lInt {
			if out, ok := repeat(r, li); ok {
				return out, nil
			}
		}
	case "%":
		if s, ok := l.(string); ok {
			return percentFormat(s, r)
		}
	}
	return nil, fmt.Errorf("unsupported operand type(s) for %s: '%s' and '%s'", op, typeName(l), typeName(r))
}

const maxRepeat = 1 << 24

func repeat(v Value, n int64) (Value, bool) {
	if n < 0 {
		n = 0
	}
	switch v := v.(type) {
	case string:
		if int64(len(v))*n > maxRepeat {
			n = maxRepeat/int64(max(len(v), 1)) + 1
		}
		return strings.Repeat(v, int(n)), true
	case *List:
		if int64(len(v.Items))*n > maxRepeat {
			n = maxRepeat/int64(max(len(v.Items), 1)) + 1
		}
		out := make([]Value, 0, len(v.Items)*int(n))
		for i := int64(0); i < n; i++ {
			out = append(out, v.Items...)
		}
		return &List{Items: out}, true
	}
	return nil, false
}

func intOp(op string, a, b int64) (Value, error) {
	switch op {
	case "+":
		return a + b, nil
	case "-":
		return a - b, nil
	case "*":
		return a * b, nil
	case "/":
		if b == 0 {
			return nil, fmt.Errorf("division by zero")
		}
		return float64(a) / float64(b), nil
	case "//":
		if b == 0 {
			return nil, fmt.Errorf("integer division or modulo by zero")
		}
		q := a / b
		if (a%b != 0) && ((a < 0) != (b < 0)) {
			q--
		}
		return q, nil
	case "%":
		if b == 0 {
			return nil, fmt.Errorf("integer division or modulo by zero")
		}
		m := a % b
		if m != 0 && ((m < 0) != (b < 0)) {
			m += b
		}
		return m, nil
	case "**":
		if b < 0 {
			if a == 0 {
				return nil, fmt.Errorf("0.0 cannot be raised to a negative power")
			}
			return math.Pow(float64(a), float64(b)), nil
		}
		out := int64(1)
		for i := int64(0); i < b && i < 128; i++ {
			out *= a
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown operator %s", op)
}

func floatOp(op string, a, b float64) (Value, error) {
	switch op {
	case "+":
		return a + b, nil
	case "-":
		return a - b, nil
	case "*":
		return a * b, nil
	case "/":
		if b == 0 {
			return nil, fmt.Errorf("float division by zero")
		}
		return a / b, nil
	case "//":
		if b == 0 {
			return nil, fmt.Errorf("float floor division by zero")
		}
		return math.Floor(a / b), nil
	case "%":
		if b == 0 {
			return nil, fmt.Errorf("float modulo")
		}
		m := math.Mod(a, b)
		if m != 0 && ((m < 0) != (b < 0)) {
			m += b
		}
		return m, nil
	case "**":
		if a == 0 && b < 0 {
			return nil, fmt.Errorf("0.0 cannot be raised to a negative power")
		}
		return math.Pow(a, b), nil
	}
	return nil, fmt.Errorf("unknown operator %s", op)
}

// unsafe is what the immutable sandbox returns for attributes that would
// mutate a list or dict, or reach Python internals: an Undefined whose use
// fails with the sandbox's message.
func unsafe(obj Value, name string) Value {
	return Undefined{Hint: fmt.Sprintf("access to attribute '%s' of '%s' object is unsafe.", name, typeName(obj))}
}

// getAttr is the sandbox's getattr: a real attribute (method) first, then
// an item with that name.
func getAttr(obj Value, name string) (Value, error) {
	if u, ok := obj.(Undefined); ok {
		return nil, u.err()
	}
	if v, ok := attribute(obj, name); ok {
		return v, nil
	}
	switch o := obj.(type) {
	case *Dict:
		if v, ok := o.Get(name); ok {
			return v, nil
		}
	case *Namespace:
		if v, ok := o.attrs.Get(name); ok {
			return v, nil
		}
	}
	return Undefined{Hint: fmt.Sprintf("'%s' has no attribute '%s'", describeObj(obj), name)}, nil
}

func describeObj(v Value) string {
	if v == nil {
		return "None"
	}
	return typeName(v) + " object"
}

// getItem is the sandbox's getitem: an item first, then for string keys an
// attribute with that name.
func getItem(obj Value, key Value) (Value, error) {
	switch o := obj.(type) {
	case Undefined:
		return nil, o.err()
	case *Dict:
		if v, ok := o.Get(key); ok {
			return v, nil
		}
	case *List:
		if v, ok := index(o.Items, key); ok {
			return v, nil
		}
	case Tuple:
		if v, ok := index(o, key); ok {
			return v, nil
		}
	case string:
		if i, ok := toInt(key); ok {
			rs := []rune(o)
			if i < 0 {
				i += int64(len(rs))
			}
			if i >= 0 && i < int64(len(rs)) {
				return string(rs[i]), nil
			}
		}
	}
	if name, ok := key.(string); ok {
		if v, ok := attribute(obj, name); ok {
			return v, nil
		}
		if ns, ok := obj.(*Namespace); ok {
			if v, ok := ns.attrs.Get(name); ok {
				return v, nil
			}
		}
	}
	return Undefined{Hint: fmt.Sprintf("'%s' has no attribute %s", describeObj(obj), repr(key))}, nil
}

func index(items []Value, key Value) (Value, bool) {
	i, ok := toInt(key)
	if !ok {
		return nil, false
	}
	if i < 0 {
		i += int64(len(items))
	}
	if i < 0 || i >= int64(len(items)) {
		return nil, false
	}
	return items[i], true
}

// attribute returns obj's Python attribute name, if it has one.
func attribute(obj Value, name string) (Value, bool) {
	switch o := obj.(type) {
	case *loopState:
		return o.attr(name)
	case *Namespace:
		return nil, false
	case string:
		if strMethods[name] {
			return method{o, name}, true
		}
	case *List:
		if listMethods[name] {
			return method{o, name}, true
		}
		if listMutators[name] {
			return unsafe(o, name), true
		}
	case Tuple:
		if name == "count" || name == "index" {
			return method{o, name}, true
		}
	case *Dict:
		if dictMethods[name] {
			return method{o, name}, true
		}
		if dictMutators[name] {
			return unsafe(o, name), true
		}
	}
	if strings.HasPrefix(name, "__") && strings.HasSuffix(name, "__") {
		return unsafe(obj, name), true
	}
	return nil, false
}

var (
	listMethods  = map[string]bool{"count": true, "index": true, "copy": true}
	listMutators = map[string]bool{"append": true, "extend": true, "insert": true, "pop": true,
		"remove": true, "reverse": true, "sort": true, "clear": true}
	dictMethods  = map[string]bool{"items": true, "keys": true, "values": true, "get": true, "copy": true}
	dictMutators = map[string]bool{"clear": true, "pop": true, "popitem": true, "setdefault": true, "update": true}
)
