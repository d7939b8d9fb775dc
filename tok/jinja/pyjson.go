package jinja

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// jsonOptions are the json.dumps arguments that transformers' tojson filter
// exposes. Its defaults differ from jinja2's own tojson: ensure_ascii=False,
// sort_keys=False, and no HTML escaping.
type jsonOptions struct {
	ensureASCII bool
	indent      *string // nil: single line
	itemSep     string
	keySep      string
	sortKeys    bool
}

// dumpJSON is Python's json.dumps(v, ...) for template values.
func dumpJSON(v Value, o jsonOptions) (string, error) {
	var b strings.Builder
	if err := o.write(&b, v, 0); err != nil {
		return "", err
	}
	return b.String(), nil
}

func (o *jsonOptions) newline(b *strings.Builder, level int) {
	b.WriteByte('\n')
	for i := 0; i < level; i++ {
		b.WriteString(*o.indent)
	}
}

func (o *jsonOptions) write(b *strings.Builder, v Value, level int) error {
	if level > maxDepth {
		return fmt.Errorf("cannot serialize to json: nesting deeper than %d", maxDepth)
	}
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		if v {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case int64:
		b.WriteString(strconv.FormatInt(v, 10))
	case float64:
		b.WriteString(jsonFloat(v))
	case string:
		o.writeString(b, v)
	case *List:
		return o.writeArray(b, v.Items, level)
	case Tuple:
		return o.writeArray(b, v, level)
	case *Dict:
		return o.writeObject(b, v, level)
	default:
		return fmt.Errorf("Object of type %s is not JSON serializable", typeName(v))
	}
	return nil
}

func jsonFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return floatRepr(f)
}

func (o *jsonOptions) writeArray(b *strings.Builder, items []Value, level int) error {
	if len(items) == 0 {
		b.WriteString("[]")
		return nil
	}
	b.WriteByte('[')
	for i, it := range items {
		if i > 0 {
			b.WriteString(o.itemSep)
		}
		if o.indent != nil {
			o.newline(b, level+1)
		}
		if err := o.write(b, it, level+1); err != nil {
			return err
		}
	}
	if o.indent != nil {
		o.newline(b, level)
	}
	b.WriteByte(']')
	return nil
}

func (o *jsonOptions) writeObject(b *strings.Builder, d *Dict, level int) error {
	if d.Len() == 0 {
		b.WriteString("{}")
		return nil
	}
	order := make([]int, d.Len())
	for i := range order {
		order[i] = i
	}
	if o.sortKeys {
		var err error
		sort.SliceStable(order, func(i, j int) bool {
			c, e := compare(d.keys[order[i]], d.keys[order[j]])
			if e != nil && err == nil {
				err = e
			}
			return c < 0
		})
		if err != nil {
			return err
		}
	}
	b.WriteByte('{')
	for n, i := range order {
		k, err := jsonKey(d.keys[i])
		if err != nil {
			return err
		}
		if n > 0 {
			b.WriteString(o.itemSep)
		}
		if o.indent != nil {
			o.newline(b, level+1)
		}
		o.writeString(b, k)
		b.WriteString(o.keySep)
		if err := o.write(b, d.vals[i], level+1); err != nil {
			return err
		}
	}
	if o.indent != nil {
		o.newline(b, level)
	}
	b.WriteByte('}')
	return nil
}

// jsonKey converts a dict key as json.dumps does: only str, int, float, bool
// and None keys are allowed.
func jsonKey(k Value) (string, error) {
	switch k := k.(type) {
	case string:
		return k, nil
	case bool, nil:
		s, _ := dumpJSON(k, jsonOptions{})
		return s, nil
	case int64:
		return strconv.FormatInt(k, 10), nil
	case float64:
		return jsonFloat(k), nil
	}
	return "", fmt.Errorf("keys must be str, int, float, bool or None, not %s", typeName(k))
}

func (o *jsonOptions) writeString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			switch {
			case r < 0x20:
				fmt.Fprintf(b, `\u%04x`, r)
			case o.ensureASCII && r > 0x7e:
				if r > 0xffff {
					// Python writes astral characters as a UTF-16 surrogate pair.
					r -= 0x10000
					fmt.Fprintf(b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
				} else {
					fmt.Fprintf(b, `\u%04x`, r)
				}
			default:
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}
