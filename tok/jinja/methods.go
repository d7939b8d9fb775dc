package jinja

import (
	"fmt"
	"strings"
	"unicode"
)

// Methods of str, list, tuple and dict values that templates call, with
// Python's argument conventions. Mutating list and dict methods are not here:
// the immutable sandbox refuses them (see attribute).

var strMethods = map[string]bool{
	"startswith": true, "endswith": true, "strip": true, "lstrip": true, "rstrip": true,
	"split": true, "rsplit": true, "splitlines": true, "replace": true, "upper": true, "lower": true,
	"title": true, "capitalize": true, "swapcase": true, "casefold": true, "find": true, "rfind": true,
	"index": true, "rindex": true, "count": true, "join": true, "format": true, "zfill": true,
	"center": true, "ljust": true, "rjust": true, "isdigit": true, "isalpha": true, "isalnum": true,
	"isspace": true, "islower": true, "isupper": true, "isnumeric": true, "isdecimal": true,
	"removeprefix": true, "removesuffix": true, "partition": true, "rpartition": true,
}

func callMethod(m method, args []Value, kw *Dict) (Value, error) {
	switch recv := m.recv.(type) {
	case string:
		return strMethod(recv, m.name, args, kw)
	case *List:
		return seqMethod(recv.Items, m.name, args, kw, func(items []Value) Value { return &List{Items: items} })
	case Tuple:
		return seqMethod(recv, m.name, args, kw, func(items []Value) Value { return Tuple(items) })
	case *Dict:
		return dictMethod(recv, m.name, args, kw)
	}
	return nil, fmt.Errorf("'%s' object has no method '%s'", typeName(m.recv), m.name)
}

func seqMethod(items []Value, name string, args []Value, kw *Dict, mk func([]Value) Value) (Value, error) {
	switch name {
	case "count":
		a, err := bind(name, []string{"value"}, nil, args, kw)
		if err != nil {
			return nil, err
		}
		n := int64(0)
		for _, it := range items {
			if equal(it, a[0]) {
				n++
			}
		}
		return n, nil
	case "index":
		a, err := bind(name, []string{"value"}, nil, args, kw)
		if err != nil {
			return nil, err
		}
		for i, it := range items {
			if equal(it, a[0]) {
				return int64(i), nil
			}
		}
		return nil, fmt.Errorf("%s is not in list", repr(a[0]))
	case "copy":
		return mk(append([]Value(nil), items...)), nil
	}
	return nil, fmt.Errorf("unknown method %s", name)
}

func dictMethod(d *Dict, name string, args []Value, kw *Dict) (Value, error) {
	switch name {
	case "items":
		if _, err := bind(name, nil, nil, args, kw); err != nil {
			return nil, err
		}
		out := make([]Value, d.Len())
		for i, k := range d.keys {
			out[i] = Tuple{k, d.vals[i]}
		}
		return &List{Items: out}, nil
	case "keys":
		if _, err := bind(name, nil, nil, args, kw); err != nil {
			return nil, err
		}
		return &List{Items: append([]Value(nil), d.keys...)}, nil
	case "values":
		if _, err := bind(name, nil, nil, args, kw); err != nil {
			return nil, err
		}
		return &List{Items: append([]Value(nil), d.vals...)}, nil
	case "get":
		if kw.Len() > 0 {
			return nil, fmt.Errorf("get() takes no keyword arguments")
		}
		a, err := bind(name, []string{"key", "default"}, []Value{nil}, args, kw)
		if err != nil {
			return nil, err
		}
		if _, ok := keyOf(a[0]); !ok {
			return nil, fmt.Errorf("unhashable type: '%s'", typeName(a[0]))
		}
		if v, ok := d.Get(a[0]); ok {
			return v, nil
		}
		return a[1], nil
	case "copy":
		out := NewDict()
		for i, k := range d.keys {
			out.Set(k, d.vals[i])
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown method %s", name)
}

// strArg converts an argument that Python requires to be a str.
func strArg(fname string, v Value) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%s() argument must be str, not %s", fname, typeName(v))
	}
	return s, nil
}

// stripSet returns the predicate for strip's chars argument (None: whitespace).
func stripSet(fname string, v Value) (func(rune) bool, error) {
	if v == nil {
		return isSpace, nil
	}
	chars, err := strArg(fname, v)
	if err != nil {
		return nil, err
	}
	return func(r rune) bool { return strings.ContainsRune(chars, r) }, nil
}

// span resolves Python's optional start/end arguments over the runes of s.
func span(rs []rune, start, end Value) (int, int, error) {
	n := len(rs)
	a, b := 0, n
	for i, v := range []Value{start, end} {
		if v == nil {
			continue
		}
		x, ok := toInt(v)
		if !ok {
			return 0, 0, fmt.Errorf("slice indices must be integers or None")
		}
		j := clampInt(x)
		if j < 0 {
			j = max(j+n, 0)
		}
		j = min(j, n)
		if i == 0 {
			a = j
		} else {
			b = j
		}
	}
	return a, b, nil
}

func strMethod(s, name string, args []Value, kw *Dict) (Value, error) {
	switch name {
	case "startswith", "endswith":
		a, err := bind(name, []string{"prefix", "start", "end"}, []Value{nil, nil}, args, kw)
		if err != nil {
			return nil, err
		}
		rs := []rune(s)
		i, j, err := span(rs, a[1], a[2])
		if err != nil {
			return nil, err
		}
		sub := ""
		if i <= j {
			sub = string(rs[i:j])
		} else if i > len(rs) {
			return false, nil
		}
		var cands []Value
		if t, ok := a[0].(Tuple); ok {
			cands = t
		} else {
			cands = []Value{a[0]}
		}
		for _, c := range cands {
			p, err := strArg(name, c)
			if err != nil {
				return nil, err
			}
			if (name == "startswith" && strings.HasPrefix(sub, p)) || (name == "endswith" && strings.HasSuffix(sub, p)) {
				return true, nil
			}
		}
		return false, nil
	case "strip", "lstrip", "rstrip":
		a, err := bind(name, []string{"chars"}, []Value{nil}, args, kw)
		if err != nil {
			return nil, err
		}
		f, err := stripSet(name, a[0])
		if err != nil {
			return nil, err
		}
		switch name {
		case "strip":
			return strings.TrimFunc(s, f), nil
		case "lstrip":
			return strings.TrimLeftFunc(s, f), nil
		}
		return strings.TrimRightFunc(s, f), nil
	case "split", "rsplit":
		a, err := bind(name, []string{"sep", "maxsplit"}, []Value{nil, int64(-1)}, args, kw)
		if err != nil {
			return nil, err
		}
		maxsplit, ok := toInt(a[1])
		if !ok {
			return nil, fmt.Errorf("'%s' object cannot be interpreted as an integer", typeName(a[1]))
		}
		return pySplit(s, a[0], int(max(min(maxsplit, 1<<30), -1)), name == "rsplit")
	case "splitlines":
		a, err := bind(name, []string{"keepends"}, []Value{false}, args, kw)
		if err != nil {
			return nil, err
		}
		return splitLines(s, truth(a[0])), nil
	case "replace":
		a, err := bind(name, []string{"old", "new", "count"}, []Value{int64(-1)}, args, kw)
		if err != nil {
			return nil, err
		}
		return pyReplace(s, a[0], a[1], a[2])
	case "upper":
		return pyUpper(s), nil
	case "lower", "casefold":
		return pyLower(s), nil
	case "title":
		return pyTitle(s), nil
	case "capitalize":
		return pyCapitalize(s), nil
	case "swapcase":
		return strings.Map(func(r rune) rune {
			if unicode.IsUpper(r) {
				return unicode.ToLower(r)
			}
			return unicode.ToUpper(r)
		}, s), nil
	case "find", "rfind", "index", "rindex", "count":
		a, err := bind(name, []string{"sub", "start", "end"}, []Value{nil, nil}, args, kw)
		if err != nil {
			return nil, err
		}
		sub, err := strArg(name, a[0])
		if err != nil {
			return nil, err
		}
		return pyFind(s, sub, a[1], a[2], name)
	case "join":
		a, err := bind(name, []string{"iterable"}, nil, args, kw)
		if err != nil {
			return nil, err
		}
		items, err := iterate(a[0])
		if err != nil {
			return nil, err
		}
		parts := make([]string, len(items))
		for i, it := range items {
			if parts[i], err = strArg("join", it); err != nil {
				return nil, fmt.Errorf("sequence item %d: expected str instance, %s found", i, typeName(it))
			}
		}
		return strings.Join(parts, s), nil
	case "format":
		return strFormat(s, args, kw)
	case "zfill", "center", "ljust", "rjust":
		a, err := bind(name, []string{"width", "fillchar"}, []Value{" "}, args, kw)
		if err != nil {
			return nil, err
		}
		return pad(s, name, a[0], a[1])
	case "isdigit", "isalpha", "isalnum", "isspace", "islower", "isupper", "isnumeric", "isdecimal":
		if _, err := bind(name, nil, nil, args, kw); err != nil {
			return nil, err
		}
		return strPredicate(s, name), nil
	case "removeprefix", "removesuffix":
		a, err := bind(name, []string{"fix"}, nil, args, kw)
		if err != nil {
			return nil, err
		}
		fix, err := strArg(name, a[0])
		if err != nil {
			return nil, err
		}
		if name == "removeprefix" {
			return strings.TrimPrefix(s, fix), nil
		}
		return strings.TrimSuffix(s, fix), nil
	case "partition", "rpartition":
		a, err := bind(name, []string{"sep"}, nil, args, kw)
		if err != nil {
			return nil, err
		}
		sep, err := strArg(name, a[0])
		if err != nil {
			return nil, err
		}
		if sep == "" {
			return nil, fmt.Errorf("empty separator")
		}
		i := strings.Index(s, sep)
		if name == "rpartition" {
			i = strings.LastIndex(s, sep)
		}
		switch {
		case i >= 0:
			return Tuple{s[:i], sep, s[i+len(sep):]}, nil
		case name == "partition":
			return Tuple{s, "", ""}, nil
		}
		return Tuple{"", "", s}, nil
	}
	return nil, fmt.Errorf("'str' object has no attribute '%s'", name)
}
