package jinja

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// Values are plain Go values that stand for Python objects, because the
// templates we render were written against Python semantics:
//
//	nil        None
//	Undefined  jinja2's default Undefined
//	bool       bool
//	int64      int (64-bit; templates never need more)
//	float64    float
//	string     str (indexed and sliced by code point, as Python does)
//	*List      list (mutable, shared by reference)
//	Tuple      tuple
//	*Dict      dict (insertion-ordered, as Python's is)
//	*Namespace jinja2's namespace()
//	callable   *Macro, Func, method
//	*loopState the loop variable of a for block
type Value = any

// Undefined is what a missing variable, key or attribute evaluates to. As in
// jinja2's default Undefined it prints as "", is false, iterates as empty, and
// only fails when used further (attribute access, arithmetic, calls).
type Undefined struct {
	Hint string // what was missing, for the error when it is used
}

func (u Undefined) err() error {
	if u.Hint == "" {
		return fmt.Errorf("value is undefined")
	}
	return fmt.Errorf("%s", u.Hint)
}

// List is a Python list. It is a pointer so that aliasing behaves as in Python.
type List struct{ Items []Value }

// NewList wraps items as a list value.
func NewList(items ...Value) *List { return &List{Items: items} }

// Tuple is a Python tuple.
type Tuple []Value

// Dict is an insertion-ordered Python dict. Keys are Values; equal numbers
// (1, 1.0, True) share a slot, as they do in Python.
type Dict struct {
	keys  []Value
	vals  []Value
	index map[hashKey]int
}

type hashKey struct {
	kind byte // 's' string, 'n' number, 'z' None, 'o' other (by repr)
	s    string
	n    float64
}

// NewDict makes an empty dict.
func NewDict() *Dict { return &Dict{index: map[hashKey]int{}} }

func keyOf(k Value) (hashKey, bool) {
	switch k := k.(type) {
	case string:
		return hashKey{kind: 's', s: k}, true
	case bool:
		if k {
			return hashKey{kind: 'n', n: 1}, true
		}
		return hashKey{kind: 'n', n: 0}, true
	case int64:
		return hashKey{kind: 'n', n: float64(k)}, true
	case float64:
		return hashKey{kind: 'n', n: k}, true
	case nil:
		return hashKey{kind: 'z'}, true
	case Tuple:
		return hashKey{kind: 'o', s: repr(k)}, true
	}
	return hashKey{}, false
}

// Set stores v under k, keeping k's first insertion position.
func (d *Dict) Set(k, v Value) error {
	hk, ok := keyOf(k)
	if !ok {
		return fmt.Errorf("unhashable type: '%s'", typeName(k))
	}
	if i, ok := d.index[hk]; ok {
		d.vals[i] = v
		return nil
	}
	d.index[hk] = len(d.keys)
	d.keys = append(d.keys, k)
	d.vals = append(d.vals, v)
	return nil
}

// SetString is Set for the common string key; it cannot fail.
func (d *Dict) SetString(k string, v Value) { _ = d.Set(k, v) }

// Get returns the value stored under k.
func (d *Dict) Get(k Value) (Value, bool) {
	hk, ok := keyOf(k)
	if !ok {
		return nil, false
	}
	i, ok := d.index[hk]
	if !ok {
		return nil, false
	}
	return d.vals[i], true
}

// Len is the number of entries.
func (d *Dict) Len() int { return len(d.keys) }

// Keys returns the keys in insertion order.
func (d *Dict) Keys() []Value { return d.keys }

// Values returns the values in insertion order.
func (d *Dict) Values() []Value { return d.vals }

// Namespace is jinja2's namespace(): the one object templates may assign
// attributes to from inside loops.
type Namespace struct{ attrs *Dict }

func typeName(v Value) string {
	switch v.(type) {
	case nil:
		return "NoneType"
	case Undefined:
		return "Undefined"
	case bool:
		return "bool"
	case int64:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case *List:
		return "list"
	case Tuple:
		return "tuple"
	case *Dict:
		return "dict"
	case *Namespace:
		return "Namespace"
	case *loopState:
		return "LoopContext"
	case *Macro:
		return "Macro"
	}
	return "function"
}

// truth is Python's bool(v).
func truth(v Value) bool {
	switch v := v.(type) {
	case nil, Undefined:
		return false
	case bool:
		return v
	case int64:
		return v != 0
	case float64:
		return v != 0
	case string:
		return v != ""
	case *List:
		return len(v.Items) > 0
	case Tuple:
		return len(v) > 0
	case *Dict:
		return v.Len() > 0
	}
	return true
}

// toFloat returns v as a float when it is a Python number (bool included).
func toFloat(v Value) (float64, bool) {
	switch v := v.(type) {
	case bool:
		if v {
			return 1, true
		}
		return 0, true
	case int64:
		return float64(v), true
	case float64:
		return v, true
	}
	return 0, false
}

// toInt returns v as an int when it is a Python int (bool included).
func toInt(v Value) (int64, bool) {
	switch v := v.(type) {
	case bool:
		if v {
			return 1, true
		}
		return 0, true
	case int64:
		return v, true
	}
	return 0, false
}

func isNumber(v Value) bool { _, ok := toFloat(v); return ok }

// equal is Python's ==.
func equal(a, b Value) bool {
	if fa, ok := toFloat(a); ok {
		if fb, ok := toFloat(b); ok {
			ia, aInt := toInt(a)
			ib, bInt := toInt(b)
			if aInt && bInt {
				return ia == ib
			}
			return fa == fb
		}
		return false
	}
	switch a := a.(type) {
	case nil:
		return b == nil
	case Undefined:
		_, ok := b.(Undefined)
		return ok
	case string:
		s, ok := b.(string)
		return ok && a == s
	case *List:
		bl, ok := b.(*List)
		return ok && seqEqual(a.Items, bl.Items)
	case Tuple:
		bt, ok := b.(Tuple)
		return ok && seqEqual(a, bt)
	case *Dict:
		bd, ok := b.(*Dict)
		if !ok || a.Len() != bd.Len() {
			return false
		}
		for i, k := range a.keys {
			v, ok := bd.Get(k)
			if !ok || !equal(a.vals[i], v) {
				return false
			}
		}
		return true
	case *Namespace:
		return a == b
	}
	return false
}

func seqEqual(a, b []Value) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// compare is Python's ordering for <, <=, >, >=; mixed types are an error.
func compare(a, b Value) (int, error) {
	if fa, ok := toFloat(a); ok {
		if fb, ok := toFloat(b); ok {
			ia, aInt := toInt(a)
			ib, bInt := toInt(b)
			switch {
			case aInt && bInt:
				return cmp3(ia < ib, ia > ib), nil
			case math.IsNaN(fa) || math.IsNaN(fb):
				return 2, nil // unordered: every comparison is false
			}
			return cmp3(fa < fb, fa > fb), nil
		}
	}
	switch a := a.(type) {
	case string:
		if s, ok := b.(string); ok {
			return strings.Compare(a, s), nil
		}
	case *List:
		if bl, ok := b.(*List); ok {
			return compareSeq(a.Items, bl.Items)
		}
	case Tuple:
		if bt, ok := b.(Tuple); ok {
			return compareSeq(a, bt)
		}
	}
	return 0, fmt.Errorf("'<' not supported between instances of '%s' and '%s'", typeName(a), typeName(b))
}

func cmp3(lt, gt bool) int {
	switch {
	case lt:
		return -1
	case gt:
		return 1
	}
	return 0
}

func compareSeq(a, b []Value) (int, error) {
	for i := 0; i < len(a) && i < len(b); i++ {
		if equal(a[i], b[i]) {
			continue
		}
		return compare(a[i], b[i])
	}
	return cmp3(len(a) < len(b), len(a) > len(b)), nil
}

// sortValues sorts in place with Python's stable sort, reporting the first
// comparison error.
func sortValues(items []Value, key func(Value) Value, reverse bool) error {
	var err error
	sort.SliceStable(items, func(i, j int) bool {
		a, b := key(items[i]), key(items[j])
		if reverse {
			a, b = b, a
		}
		c, e := compare(a, b)
		if e != nil && err == nil {
			err = e
		}
		return c == -1
	})
	return err
}

// iterate returns the items a Python for loop would see.
func iterate(v Value) ([]Value, error) {
	switch v := v.(type) {
	case Undefined:
		return nil, nil
	case *List:
		return append([]Value(nil), v.Items...), nil
	case Tuple:
		return append([]Value(nil), v...), nil
	case *Dict:
		return append([]Value(nil), v.keys...), nil
	case string:
		rs := []rune(v)
		out := make([]Value, len(rs))
		for i, r := range rs {
			out[i] = string(r)
		}
		return out, nil
	}
	return nil, fmt.Errorf("'%s' object is not iterable", typeName(v))
}

// length is Python's len().
func length(v Value) (int, error) {
	switch v := v.(type) {
	case Undefined:
		return 0, nil
	case string:
		return len([]rune(v)), nil
	case *List:
		return len(v.Items), nil
	case Tuple:
		return len(v), nil
	case *Dict:
		return v.Len(), nil
	}
	return 0, fmt.Errorf("object of type '%s' has no len()", typeName(v))
}
