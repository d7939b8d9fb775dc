package jinja

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Filters, as jinja2 3.1 defines them, with transformers' tojson in place of
// jinja2's. Each takes the filtered value and the call's arguments.

type filterFunc func(r *renderer, v Value, args []Value, kw *Dict) (Value, error)

var filters map[string]filterFunc

func init() {
	filters = map[string]filterFunc{
		"abs": fAbs, "attr": fAttr, "batch": fBatch, "capitalize": strFilter(pyCapitalize),
		"center": fCenter, "count": fLength, "d": fDefault, "default": fDefault,
		"dictsort": fDictsort, "e": fEscape, "escape": fEscape, "first": fFirst, "float": fFloat,
		"forceescape": fEscape, "format": fFormat, "indent": fIndent, "int": fInt, "items": fItems,
		"join": fJoin, "last": fLast, "length": fLength, "list": fList, "lower": strFilter(pyLower),
		"map": fMap, "max": fMinMax(1), "min": fMinMax(-1), "reject": fSelect(false, false),
		"rejectattr": fSelect(false, true), "replace": fReplace, "reverse": fReverse, "round": fRound,
		"safe": fSafe, "select": fSelect(true, false), "selectattr": fSelect(true, true),
		"sort": fSort, "string": fString, "sum": fSum, "title": fTitle, "tojson": fToJSON,
		"trim": fTrim, "unique": fUnique, "upper": strFilter(pyUpper), "wordcount": fWordcount,
		"truncate": fTruncate,
	}
}

func (r *renderer) applyFilter(f *filterExpr, v Value, s *scope) (Value, error) {
	fn, ok := filters[f.name]
	if !ok {
		return nil, errAt(f.line, fmt.Errorf("no filter named '%s'", f.name))
	}
	args, err := r.evalAll(f.args, s)
	if err != nil {
		return nil, err
	}
	kw := NewDict()
	for i, n := range f.kwNames {
		kv, err := r.eval(f.kwVals[i], s)
		if err != nil {
			return nil, err
		}
		kw.SetString(n, kv)
	}
	out, err := fn(r, v, args, kw)
	return out, errAt(f.line, err)
}

func strFilter(fn func(string) string) filterFunc {
	return func(r *renderer, v Value, args []Value, kw *Dict) (Value, error) {
		if _, err := bind("filter", nil, nil, args, kw); err != nil {
			return nil, err
		}
		return fn(str(v)), nil
	}
}

func fAbs(r *renderer, v Value, args []Value, kw *Dict) (Value, error) {
	switch x := v.(type) {
	case bool, int64:
		n, _ := toInt(x)
		if n < 0 {
			n = -n
		}
		return n, nil
	case float64:
		return math.Abs(x), nil
	}
	return nil, fmt.Errorf("bad operand type for abs(): '%s'", typeName(v))
}

func fAttr(r *renderer, v Value, args []Value, kw *Dict) (Value, error) {
	a, err := bind("attr", []string{"name"}, nil, args, kw)
	if err != nil {
		return nil, err
	}
	name, err := strArg("attr", a[0])
	if err != nil {
		return nil, err
	}
	// Unlike obj.name, the attr filter never falls back to an item lookup.
	if u, ok := v.(Undefined); ok {
		return nil, u.err()
	}
	if x, ok := attribute(v, name); ok {
		return x, nil
	}
	if ns, ok := v.(*Namespace); ok {
		if x, ok := ns.attrs.Get(name); ok {
			return x, nil
		}
	}
	return Undefined{Hint: fmt.Sprintf("'%s' has no attribute '%s'", describeObj(v), name)}, nil
}

func fBatch(r *renderer, v Value, args []Value, kw *Dict) (Value, error) {
	a, err := bind("batch", []string{"linecount", "fill_with"}, []Value{nil}, args, kw)
	if err != nil {
		return nil, err
	}
	n, ok := toInt(a[0])
	if !ok || n <= 0 {
		return nil, fmt.Errorf("batch size must be a positive integer")
	}
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	var out []Value
	for i := 0; i < len(items); i += int(n) {
		chunk := append([]Value(nil), items[i:min(i+int(n), len(items))]...)
		for a[1] != nil && len(chunk) < int(n) {
			chunk = append(chunk, a[1])
		}
		out = append(out, &List{Items: chunk})
	}
	return &List{Items: out}, nil
}

func fCenter(r *renderer, v Value, args []Value, kw *Dict) (Value, error) {
	a, err := bind("center", []string{"width"}, []Value{int64(80)}, args, kw)
	if err != nil {
		return nil, err
	}
	return pad(str(v), "center", a[0], " ")
}

func fLength(r *renderer, v Value, args []Value, kw *Dict) (Value, error) {
	n, err := length(v)
	return int64(n), err
}

func fDefault(r *renderer, v Value, args []Value, kw *Dict) (Value, error) {
	a, err := bind("default", []string{"default_value", "boolean"}, []Value{"", false}, args, kw)
	if err != nil {
		return nil, err
	}
	if _, undef := v.(Undefined); undef || (truth(a[1]) && !truth(v)) {
		return a[0], nil
	}
	return v, nil
}

func fDictsort(r *renderer, v Value, args []Value, kw *Dict) (Value, error) {
	a, err := bind("dictsort", []string{"case_sensitive", "by", "reverse"}, []Value{false, "key", false}, args, kw)
	if err != nil {
		return nil, err
	}
	d, ok := v.(*Dict)
	if !ok {
		return nil, fmt.Errorf("dictsort requires a mapping")
	}
	pos := 0
	switch a[1] {
	case "key":
	case "value":
		pos = 1
	default:
		return nil, fmt.Errorf("you can only sort by either \"key\" or \"value\"")
	}
	items := make([]Value, d.Len())
	for i, k := range d.keys {
		items[i] = Tuple{k, d.vals[i]}
	}
	err = sortValues(items, func(x Value) Value { return caseKey(x.(Tuple)[pos], truth(a[0])) }, truth(a[2]))
	return &List{Items: items}, err
}

func caseKey(v Value, caseSensitive bool) Value {
	if s, ok := v.(string); ok && !caseSensitive {
		return pyLower(s)
	}
	return v
}

var htmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;")

func fEscape(r *renderer, v Value, args []Value, kw *Dict) (Value, error) {
	return htmlEscaper.Replace(str(v)), nil
}

func fSafe(r *renderer, v Value, args []Value, kw *Dict) (Value, error) {
	// Without autoescaping, Markup only differs from str in rare operator
	// cases; safe keeps strings as they are and converts other values.
	return str(v), nil
}

func fFirst(r *renderer, v Value, args []Value, kw *Dict) (Value, error) {
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return Undefined{Hint: "No first item, sequence was empty."}, nil
	}
	return items[0], nil
}

func fLast(r *renderer, v Value, args []Value, kw *Dict) (Value, error) {
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return Undefined{Hint: "No last item, sequence was empty."}, nil
	}
	return items[len(items)-1], nil
}

func fFloat(r *renderer, v Value, args []Value, kw *Dict) (Value, error) {
	a, err := bind("float", []string{"default"}, []Value{0.0}, args, kw)
	if err != nil {
		return nil, err
	}
	if f, ok := pyFloat(v); ok {
		return f, nil
	}
	return a[0], nil
}

// pyFloat is Python's float(v) for numbers and numeric strings.
func pyFloat(v Value) (float64, bool) {
	if f, ok := toFloat(v); ok {
		return f, true
	}
	s, ok := v.(string)
	if !ok {
		return 0, false
	}
	s = strings.TrimFunc(s, isSpace)
	switch strings.ToLower(strings.TrimLeft(s, "+-")) {
	case "inf", "infinity", "nan":
	default:
		if strings.ContainsAny(s, "xXpP") || strings.HasPrefix(strings.TrimLeft(s, "+-"), "_") || strings.HasSuffix(s, "_") || strings.Contains(s, "__") {
			return 0, false
		}
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(s, "_", ""), 64)
	if err != nil && !strings.Contains(err.Error(), "range") {
		return 0, false
	}
	return f, true
}

func fFormat(r *renderer, v Value, args []Value, kw *Dict) (Value, error) {
	if len(args) > 0 && kw.Len() > 0 {
		return nil, fmt.Errorf("can't handle positional and keyword arguments at the same time")
	}
	if kw.Len() > 0 {
		return percentFormat(str(v), kw)
	}
	return percentFormat(str(v), Tuple(args))
}

func fIndent(r *renderer, v Value, args []Value, kw *Dict) (Value, error) {
	a, err := bind("indent", []string{"width", "first", "blank"}, []Value{int64(4), false, false}, args, kw)
	if err != nil {
		return nil, err
	}
	ind := ""
	if s, ok := a[0].(string); ok {
		ind = s
	} else if n, ok := toInt(a[0]); ok {
		ind = strings.Repeat(" ", int(max(min(n, maxRepeat), 0)))
	} else {
		return nil, fmt.Errorf("can't multiply sequence by non-int of type '%s'", typeName(a[0]))
	}
	s := str(v) + "\n" // jinja2's quirk so that splitlines keeps a trailing blank line
	lines := splitLines(s, false).(*List).Items
	var rv string
	if truth(a[2]) {
		parts := make([]string, len(lines))
		for i, l := range lines {
			parts[i] = l.(string)
		}
		rv = strings.Join(parts, "\n"+ind)
	} else {
		rv = lines[0].(string)
		for _, l := range lines[1:] {
			rv += "\n"
			if l.(string) != "" {
				rv += ind
			}
			rv += l.(string)
		}
	}
	if truth(a[1]) {
		rv = ind + rv
	}
	return rv, nil
}

func fInt(r *renderer, v Value, args []Value, kw *Dict) (Value, error) {
	a, err := bind("int", []string{"default", "base"}, []Value{int64(0), int64(10)}, args, kw)
	if err != nil {
		return nil, err
	}
	switch x := v.(type) {
	case bool, int64:
		n, _ := toInt(x)
		return n, nil
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) || math.Abs(x) > 9.2e18 {
			return a[0], nil
		}
		return int64(x), nil
	case string:
		base, _ := toInt(a[1])
		if n, ok := pyInt(x, base); ok {
			return n, nil
		}
		if f, ok := pyFloat(x); ok && !math.IsInf(f, 0) && !math.IsNaN(f) && math.Abs(f) < 9.2e18 {
			return int64(f), nil
		}
	}
	return a[0], nil
}

func fItems(r *renderer, v Value, args []Value, kw *Dict) (Value, error) {
	switch d := v.(type) {
	case Undefined:
		return &List{}, nil
	case *Dict:
		return dictMethod(d, "items", nil, NewDict())
	}
	return nil, fmt.Errorf("can only get item pairs from a mapping")
}

func fJoin(r *renderer, v Value, args []Value, kw *Dict) (Value, error) {
	a, err := bind("join", []string{"d", "attribute"}, []Value{"", nil}, args, kw)
	if err != nil {
		return nil, err
	}
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	parts := make([]string, len(items))
	for i, it := range items {
		if a[1] != nil {
			if it, err = attrPath(it, a[1]); err != nil {
				return nil, err
			}
		}
		parts[i] = str(it)
	}
	return strings.Join(parts, str(a[0])), nil
}

func fList(r *renderer, v Value, args []Value, kw *Dict) (Value, error) {
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	return &List{Items: items}, nil
}

// pyInt is Python's int(s, base) for the bases templates use.
func pyInt(s string, base int64) (int64, bool) {
	t := strings.TrimFunc(s, isSpace)
	neg := false
	if strings.HasPrefix(t, "-") || strings.HasPrefix(t, "+") {
		neg, t = t[0] == '-', t[1:]
	}
	lower := strings.ToLower(t)
	for _, p := range []struct {
		prefix string
		base   int64
	}{{"0x", 16}, {"0o", 8}, {"0b", 2}} {
		if strings.HasPrefix(lower, p.prefix) && (base == p.base || base == 0) {
			t, base = t[2:], p.base
			break
		}
	}
	if base == 0 {
		base = 10
	}
	if base < 2 || base > 36 || t == "" || strings.HasPrefix(t, "_") || strings.HasSuffix(t, "_") || strings.Contains(t, "__") {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.ReplaceAll(t, "_", ""), int(base), 64)
	if err != nil {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}

// attrPath resolves jinja2's attribute= argument: dotted names, with
// integer parts as indexes.
func attrPath(v Value, attr Value) (Value, error) { return attrPathDefault(v, attr, nil) }

// attrPathDefault is attrPath where, as in jinja2's make_attrgetter, an
// undefined step is replaced by def (when def is not None) before the next.
func attrPathDefault(v Value, attr Value, def Value) (Value, error) {
	parts := []Value{attr}
	if s, ok := attr.(string); ok {
		parts = parts[:0]
		for _, p := range strings.Split(s, ".") {
			if n, e := strconv.Atoi(p); e == nil {
				parts = append(parts, int64(n))
			} else {
				parts = append(parts, p)
			}
		}
	}
	for _, p := range parts {
		var err error
		if v, err = getItem(v, p); err != nil {
			return nil, err
		}
		if _, undef := v.(Undefined); undef && def != nil {
			v = def
		}
	}
	return v, nil
}
