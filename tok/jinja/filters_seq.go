package jinja

import (
	"fmt"
	"math"
	"strconv"
)

// Filters over sequences, and tojson.

func fMap(r *renderer, v Value, args []Value, kw *Dict) (Value, error) {
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	out := make([]Value, 0, len(items))
	if len(args) == 0 {
		attr, ok := kw.Get("attribute")
		if !ok {
			return nil, fmt.Errorf("map requires a filter name or an attribute")
		}
		def, _ := kw.Get("default")
		for _, it := range items {
			x, err := attrPathDefault(it, attr, def)
			if err != nil {
				return nil, err
			}
			out = append(out, x)
		}
		return &List{Items: out}, nil
	}
	name, err := strArg("map", args[0])
	if err != nil {
		return nil, err
	}
	fn, ok := filters[name]
	if !ok {
		return nil, fmt.Errorf("no filter named '%s'", name)
	}
	for _, it := range items {
		x, err := fn(r, it, args[1:], kw)
		if err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return &List{Items: out}, nil
}

// fSelect builds select/reject (keep = true/false) and their attr forms.
func fSelect(keep, byAttr bool) filterFunc {
	return func(r *renderer, v Value, args []Value, kw *Dict) (Value, error) {
		items, err := iterate(v)
		if err != nil {
			return nil, err
		}
		var attr Value
		if byAttr {
			if len(args) == 0 {
				return nil, fmt.Errorf("missing parameter for attribute name")
			}
			attr, args = args[0], args[1:]
		}
		var test testFunc
		if len(args) > 0 {
			name, err := strArg("select", args[0])
			if err != nil {
				return nil, err
			}
			var ok bool
			if test, ok = tests[name]; !ok {
				return nil, fmt.Errorf("no test named '%s'", name)
			}
			args = args[1:]
		}
		var out []Value
		for _, it := range items {
			x := it
			if byAttr {
				if x, err = attrPath(it, attr); err != nil {
					return nil, err
				}
			}
			ok := truth(x)
			if test != nil {
				if ok, err = test(r, x, args, kw); err != nil {
					return nil, err
				}
			}
			if ok == keep {
				out = append(out, it)
			}
		}
		return &List{Items: out}, nil
	}
}

func fMinMax(sign int) filterFunc {
	return func(r *renderer, v Value, args []Value, kw *Dict) (Value, error) {
		a, err := bind("min", []string{"case_sensitive", "attribute"}, []Value{false, nil}, args, kw)
		if err != nil {
			return nil, err
		}
		items, err := iterate(v)
		if err != nil {
			return nil, err
		}
		if len(items) == 0 {
			return Undefined{Hint: "No aggregated item, sequence was empty."}, nil
		}
		key := func(x Value) (Value, error) {
			if a[1] != nil {
				var err error
				if x, err = attrPath(x, a[1]); err != nil {
					return nil, err
				}
			}
			return caseKey(x, truth(a[0])), nil
		}
		best := items[0]
		bk, err := key(best)
		if err != nil {
			return nil, err
		}
		for _, it := range items[1:] {
			k, err := key(it)
			if err != nil {
				return nil, err
			}
			c, err := compare(k, bk)
			if err != nil {
				return nil, err
			}
			if c == sign {
				best, bk = it, k
			}
		}
		return best, nil
	}
}

func fReverse(r *renderer, v Value, args []Value, kw *Dict) (Value, error) {
	if s, ok := v.(string); ok {
		rs := []rune(s)
		for i, j := 0, len(rs)-1; i < j; i, j = i+1, j-1 {
			rs[i], rs[j] = rs[j], rs[i]
		}
		return string(rs), nil
	}
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	for i, j := 0, len(items)-1; i < j; i, j = i+1, j-1 {
		items[i], items[j] = items[j], items[i]
	}
	return &List{Items: items}, nil
}

func fRound(r *renderer, v Value, args []Value, kw *Dict) (Value, error) {
	a, err := bind("round", []string{"precision", "method"}, []Value{int64(0), "common"}, args, kw)
	if err != nil {
		return nil, err
	}
	prec, ok := toInt(a[0])
	if !ok {
		return nil, fmt.Errorf("'%s' object cannot be interpreted as an integer", typeName(a[0]))
	}
	f, ok := toFloat(v)
	if !ok {
		return nil, fmt.Errorf("type %s doesn't define __round__ method", typeName(v))
	}
	switch a[1] {
	case "common":
		if n, isInt := toInt(v); isInt {
			if prec >= 0 {
				return n, nil // Python's round(int, n) stays an int
			}
			p := math.Pow(10, float64(-prec))
			return int64(math.RoundToEven(float64(n)/p) * p), nil
		}
		if math.IsInf(f, 0) || math.IsNaN(f) || prec > 300 {
			return f, nil
		}
		if prec < 0 {
			p := math.Pow(10, float64(-prec))
			return math.RoundToEven(f/p) * p, nil
		}
		// Python rounds the exact binary value half-to-even, as strconv does.
		out, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'f', int(prec), 64), 64)
		return out, nil
	case "ceil", "floor":
		p := math.Pow(10, float64(prec))
		if a[1] == "ceil" {
			return math.Ceil(f*p) / p, nil
		}
		return math.Floor(f*p) / p, nil
	}
	return nil, fmt.Errorf("method must be common, ceil or floor")
}

func fSort(r *renderer, v Value, args []Value, kw *Dict) (Value, error) {
	a, err := bind("sort", []string{"reverse", "case_sensitive", "attribute"}, []Value{false, false, nil}, args, kw)
	if err != nil {
		return nil, err
	}
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	var keyErr error
	key := func(x Value) Value {
		if a[2] != nil {
			k, err := attrPath(x, a[2])
			if err != nil && keyErr == nil {
				keyErr = err
			}
			x = k
		}
		return caseKey(x, truth(a[1]))
	}
	if err := sortValues(items, key, truth(a[0])); err != nil {
		return nil, err
	}
	return &List{Items: items}, keyErr
}

func fSum(r *renderer, v Value, args []Value, kw *Dict) (Value, error) {
	a, err := bind("sum", []string{"attribute", "start"}, []Value{nil, int64(0)}, args, kw)
	if err != nil {
		return nil, err
	}
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	total := a[1]
	for _, it := range items {
		if a[0] != nil {
			if it, err = attrPath(it, a[0]); err != nil {
				return nil, err
			}
		}
		if total, err = binary("+", total, it); err != nil {
			return nil, err
		}
	}
	return total, nil
}

func fUnique(r *renderer, v Value, args []Value, kw *Dict) (Value, error) {
	a, err := bind("unique", []string{"case_sensitive", "attribute"}, []Value{false, nil}, args, kw)
	if err != nil {
		return nil, err
	}
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	seen := NewDict()
	var out []Value
	for _, it := range items {
		k := it
		if a[1] != nil {
			if k, err = attrPath(it, a[1]); err != nil {
				return nil, err
			}
		}
		k = caseKey(k, truth(a[0]))
		if _, dup := seen.Get(k); dup {
			continue
		}
		if err := seen.Set(k, true); err != nil {
			return nil, err
		}
		out = append(out, it)
	}
	return &List{Items: out}, nil
}

// fToJSON is transformers' tojson: json.dumps(x, ensure_ascii=False,
// indent=None, separators=None, sort_keys=False).
func fToJSON(r *renderer, v Value, args []Value, kw *Dict) (Value, error) {
	a, err := bind("tojson", []string{"ensure_ascii", "indent", "separators", "sort_keys"}, []Value{false, nil, nil, false}, args, kw)
	if err != nil {
		return nil, err
	}
	o := jsonOptions{ensureASCII: truth(a[0]), sortKeys: truth(a[3]), itemSep: ", ", keySep: ": "}
	switch ind := a[1].(type) {
	case nil:
	case string:
		o.indent = &ind
	default:
		n, ok := toInt(ind)
		if !ok {
			return nil, fmt.Errorf("cannot use %s as a json indent", typeName(ind))
		}
		s := ""
		for i := int64(0); i < min(n, 1000); i++ {
			s += " "
		}
		o.indent = &s
		o.itemSep = ","
	}
	if _, isStr := a[1].(string); isStr {
		o.itemSep = ","
	}
	if a[2] != nil {
		seps, err := iterate(a[2])
		if err != nil || len(seps) != 2 {
			return nil, fmt.Errorf("separators must be a pair of strings")
		}
		is, ok1 := seps[0].(string)
		ks, ok2 := seps[1].(string)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("separators must be a pair of strings")
		}
		o.itemSep, o.keySep = is, ks
	}
	return dumpJSON(v, o)
}
