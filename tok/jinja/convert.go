package jinja

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
)

// FromGo converts Go data into template values. Besides the package's own
// values it accepts nil, bools, Go integers and floats, strings, slices,
// maps with string keys, json.Number (an int when it has no fraction or
// exponent, as Python's json reads it) and json.RawMessage (decoded with
// DecodeJSON, keeping key order). Go maps have no order: their keys are
// sorted, so callers that need an object's original key order (tojson of
// tool schemas!) should pass json.RawMessage or *Dict.
func FromGo(v any) (Value, error) { return fromGo(v, 0) }

func fromGo(v any, depth int) (Value, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("cannot convert value: nesting deeper than %d", maxDepth)
	}
	switch x := v.(type) {
	case nil, bool, int64, float64, string, *List, Tuple, *Dict, *Namespace, Undefined, Func, *Macro:
		return x, nil
	case int:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case float32:
		return float64(x), nil
	case json.Number:
		return jsonNumber(string(x))
	case json.RawMessage:
		return DecodeJSON(x)
	case []any:
		items := make([]Value, len(x))
		for i, it := range x {
			c, err := fromGo(it, depth+1)
			if err != nil {
				return nil, err
			}
			items[i] = c
		}
		return &List{Items: items}, nil
	case map[string]any:
		d := NewDict()
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			c, err := fromGo(x[k], depth+1)
			if err != nil {
				return nil, err
			}
			d.SetString(k, c)
		}
		return d, nil
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int(), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if rv.Uint() > math.MaxInt64 {
			return nil, fmt.Errorf("cannot convert %d: integer too large", rv.Uint())
		}
		return int64(rv.Uint()), nil
	case reflect.Float32, reflect.Float64:
		return rv.Float(), nil
	case reflect.String:
		return rv.String(), nil
	case reflect.Bool:
		return rv.Bool(), nil
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.IsNil() {
			return nil, nil
		}
		items := make([]Value, rv.Len())
		for i := range items {
			c, err := fromGo(rv.Index(i).Interface(), depth+1)
			if err != nil {
				return nil, err
			}
			items[i] = c
		}
		return &List{Items: items}, nil
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			return nil, fmt.Errorf("cannot convert a map with %s keys", rv.Type().Key())
		}
		if rv.IsNil() {
			return nil, nil
		}
		m := make(map[string]any, rv.Len())
		for it := rv.MapRange(); it.Next(); {
			m[it.Key().String()] = it.Value().Interface()
		}
		return fromGo(m, depth)
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return nil, nil
		}
		return fromGo(rv.Elem().Interface(), depth)
	}
	return nil, fmt.Errorf("cannot convert a value of type %T", v)
}

func jsonNumber(s string) (Value, error) {
	if !strings.ContainsAny(s, ".eE") {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n, nil
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !strings.Contains(err.Error(), "range") {
		return nil, fmt.Errorf("cannot parse number %q: %w", s, err)
	}
	return f, nil
}

// DecodeJSON decodes JSON the way Python's json.loads does: objects become
// insertion-ordered *Dict, integers int64 and other numbers float64.
func DecodeJSON(data []byte) (Value, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return nil, fmt.Errorf("cannot decode json: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("cannot decode json: trailing data")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder, depth int) (Value, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("nesting deeper than %d", maxDepth)
	}
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch x := t.(type) {
	case json.Delim:
		switch x {
		case '[':
			l := &List{}
			for dec.More() {
				it, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				l.Items = append(l.Items, it)
			}
			_, err := dec.Token()
			return l, err
		case '{':
			d := NewDict()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				it, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				d.SetString(kt.(string), it)
			}
			_, err := dec.Token()
			return d, err
		}
		return nil, fmt.Errorf("unexpected %v", x)
	case json.Number:
		return jsonNumber(string(x))
	}
	return t, nil // string, bool, nil
}

var (
	weekdays = []string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"}
	months   = []string{"January", "February", "March", "April", "May", "June", "July",
		"August", "September", "October", "November", "December"}
)

// strftime is Python's datetime.strftime for a naive local time (so %z and
// %Z are empty), with glibc's "-" flag for unpadded numbers.
func strftime(t time.Time, f string) string {
	var b strings.Builder
	for i := 0; i < len(f); i++ {
		if f[i] != '%' || i+1 >= len(f) {
			b.WriteByte(f[i])
			continue
		}
		i++
		pad := true
		if f[i] == '-' && i+1 < len(f) {
			pad = false
			i++
		}
		num := func(n, width int) {
			if pad {
				fmt.Fprintf(&b, "%0*d", width, n)
			} else {
				fmt.Fprintf(&b, "%d", n)
			}
		}
		switch f[i] {
		case 'Y':
			fmt.Fprintf(&b, "%d", t.Year())
		case 'y':
			num(t.Year()%100, 2)
		case 'm':
			num(int(t.Month()), 2)
		case 'd':
			num(t.Day(), 2)
		case 'e':
			fmt.Fprintf(&b, "%2d", t.Day())
		case 'H':
			num(t.Hour(), 2)
		case 'I':
			num((t.Hour()+11)%12+1, 2)
		case 'M':
			num(t.Minute(), 2)
		case 'S':
			num(t.Second(), 2)
		case 'f':
			fmt.Fprintf(&b, "%06d", t.Nanosecond()/1000)
		case 'j':
			num(t.YearDay(), 3)
		case 'p':
			if t.Hour() < 12 {
				b.WriteString("AM")
			} else {
				b.WriteString("PM")
			}
		case 'a':
			b.WriteString(weekdays[t.Weekday()][:3])
		case 'A':
			b.WriteString(weekdays[t.Weekday()])
		case 'b', 'h':
			b.WriteString(months[t.Month()-1][:3])
		case 'B':
			b.WriteString(months[t.Month()-1])
		case 'w':
			fmt.Fprintf(&b, "%d", int(t.Weekday()))
		case 'z', 'Z':
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			if !pad {
				b.WriteByte('-')
			}
			b.WriteByte(f[i])
		}
	}
	return b.String()
}
