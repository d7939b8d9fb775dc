package jinja

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Python's two string formatting languages: str.format (through the
// sandbox's formatter) and the % operator / format filter.

// strFormat is str.format(*args, **kwargs).
func strFormat(s string, args []Value, kw *Dict) (Value, error) {
	var b strings.Builder
	auto := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '}' {
			if i+1 < len(s) && s[i+1] == '}' {
				b.WriteByte('}')
				i++
				continue
			}
			return nil, fmt.Errorf("single '}' encountered in format string")
		}
		if c != '{' {
			b.WriteByte(c)
			continue
		}
		if i+1 < len(s) && s[i+1] == '{' {
			b.WriteByte('{')
			i++
			continue
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return nil, fmt.Errorf("single '{' encountered in format string")
		}
		field := s[i+1 : i+end]
		i += end
		name, spec, _ := strings.Cut(field, ":")
		name, conv, _ := strings.Cut(name, "!")
		// The first part names the argument; .attr and [key] follow.
		head := name
		if k := strings.IndexAny(name, ".["); k >= 0 {
			head = name[:k]
		}
		var v Value
		if head == "" {
			if auto >= len(args) {
				return nil, fmt.Errorf("replacement index %d out of range for positional args tuple", auto)
			}
			v = args[auto]
			auto++
		} else if n, err := strconv.Atoi(head); err == nil {
			if n >= len(args) {
				return nil, fmt.Errorf("replacement index %d out of range for positional args tuple", n)
			}
			v = args[n]
		} else {
			var ok bool
			if v, ok = kw.Get(head); !ok {
				return nil, fmt.Errorf("KeyError: %s", strRepr(head))
			}
		}
		rest := name[len(head):]
		for rest != "" {
			var err error
			if rest[0] == '.' {
				k := strings.IndexAny(rest[1:], ".[")
				if k < 0 {
					k = len(rest) - 1
				}
				if v, err = getAttr(v, rest[1:1+k]); err != nil {
					return nil, err
				}
				rest = rest[1+k:]
				continue
			}
			k := strings.IndexByte(rest, ']')
			if rest[0] != '[' || k < 0 {
				return nil, fmt.Errorf("invalid format field %q", field)
			}
			key := Value(rest[1:k])
			if n, err := strconv.Atoi(rest[1:k]); err == nil {
				key = int64(n)
			}
			if v, err = getItem(v, key); err != nil {
				return nil, err
			}
			rest = rest[k+1:]
		}
		switch conv {
		case "r", "a":
			v = repr(v)
		case "s":
			v = str(v)
		}
		out, err := formatSpec(v, spec)
		if err != nil {
			return nil, err
		}
		b.WriteString(out)
	}
	return b.String(), nil
}

// formatSpec is format(v, spec) for the parts of the mini-language that
// templates use: fill, align, sign, zero padding, width, precision and the
// s d f e g % x o b types.
func formatSpec(v Value, spec string) (string, error) {
	if spec == "" {
		return str(v), nil
	}
	fill, align := " ", byte(0)
	if r, n := utf8.DecodeRuneInString(spec); n < len(spec) && strings.IndexByte("<>^=", spec[n]) >= 0 {
		fill, align, spec = string(r), spec[n], spec[n+1:]
	} else if spec != "" && strings.IndexByte("<>^=", spec[0]) >= 0 {
		align, spec = spec[0], spec[1:]
	}
	sign := byte('-')
	if spec != "" && strings.IndexByte("+- ", spec[0]) >= 0 {
		sign, spec = spec[0], spec[1:]
	}
	if spec != "" && spec[0] == '0' {
		if align == 0 {
			fill, align = "0", '='
		}
		spec = spec[1:]
	}
	i := 0
	for i < len(spec) && spec[i] >= '0' && spec[i] <= '9' {
		i++
	}
	width, _ := strconv.Atoi(spec[:i])
	spec = spec[i:]
	prec := -1
	if strings.HasPrefix(spec, ".") {
		j := 1
		for j < len(spec) && spec[j] >= '0' && spec[j] <= '9' {
			j++
		}
		prec, _ = strconv.Atoi(spec[1:j])
		spec = spec[j:]
	}
	typ := byte(0)
	if len(spec) == 1 {
		typ = spec[0]
	} else if spec != "" {
		return "", fmt.Errorf("invalid format specifier")
	}
	var body string
	numeric := true
	switch x := v.(type) {
	case string:
		if typ != 0 && typ != 's' {
			return "", fmt.Errorf("unknown format code '%c' for object of type 'str'", typ)
		}
		numeric = false
		body = x
		if prec >= 0 && prec < len([]rune(x)) {
			body = string([]rune(x)[:prec])
		}
	case bool, int64:
		n, _ := toInt(x)
		switch typ {
		case 0, 'd', 'n':
			if _, isBool := x.(bool); isBool && typ == 0 {
				body = str(x)
			} else {
				body = strconv.FormatInt(n, 10)
			}
		case 'x', 'X', 'o', 'b':
			base := map[byte]int{'x': 16, 'X': 16, 'o': 8, 'b': 2}[typ]
			body = strconv.FormatInt(n, base)
			if typ == 'X' {
				body = strings.ToUpper(body)
			}
		case 'f', 'F', 'e', 'E', 'g', 'G', '%':
			return formatSpecFloat(float64(n), fill, align, sign, width, prec, typ)
		default:
			return "", fmt.Errorf("unknown format code '%c' for object of type 'int'", typ)
		}
	case float64:
		return formatSpecFloat(x, fill, align, sign, width, prec, typ)
	default:
		return "", fmt.Errorf("unsupported format string passed to %s.__format__", typeName(v))
	}
	return padField(body, fill, align, sign, width, numeric), nil
}

func formatSpecFloat(f float64, fill string, align, sign byte, width, prec int, typ byte) (string, error) {
	var body string
	switch typ {
	case 0:
		if prec < 0 {
			body = floatRepr(f)
		} else {
			body = strconv.FormatFloat(f, 'g', max(prec, 1), 64)
		}
	case 'f', 'F', 'e', 'E', 'g', 'G':
		if prec < 0 {
			prec = 6
		}
		body = strconv.FormatFloat(f, typ|0x20, prec, 64)
		if typ == 'E' || typ == 'G' {
			body = strings.ToUpper(body)
		}
	case '%':
		if prec < 0 {
			prec = 6
		}
		body = strconv.FormatFloat(f*100, 'f', prec, 64) + "%"
	default:
		return "", fmt.Errorf("unknown format code '%c' for object of type 'float'", typ)
	}
	return padField(body, fill, align, sign, width, true), nil
}

func padField(body, fill string, align, sign byte, width int, numeric bool) string {
	prefix := ""
	if numeric {
		if strings.HasPrefix(body, "-") {
			prefix, body = "-", body[1:]
		} else if sign == '+' || sign == ' ' {
			prefix = string(sign)
		}
	}
	if align == 0 {
		align = '<'
		if numeric {
			align = '>'
		}
	}
	n := width - utf8.RuneCountInString(prefix+body)
	if n <= 0 {
		return prefix + body
	}
	n = min(n, maxRepeat)
	switch align {
	case '<':
		return prefix + body + strings.Repeat(fill, n)
	case '^':
		return strings.Repeat(fill, n/2) + prefix + body + strings.Repeat(fill, n-n/2)
	case '=':
		return prefix + strings.Repeat(fill, n) + body
	}
	return strings.Repeat(fill, n) + prefix + body
}

// percentFormat is Python's `fmt % args`.
func percentFormat(f string, args Value) (Value, error) {
	var list []Value
	var mapping *Dict
	switch a := args.(type) {
	case Tuple:
		list = a
	case *Dict:
		mapping = a
		list = []Value{a}
	default:
		list = []Value{a}
	}
	var b strings.Builder
	next := 0
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			b.WriteByte(f[i])
			continue
		}
		i++
		if i >= len(f) {
			return nil, fmt.Errorf("incomplete format")
		}
		var v Value
		haveV := false
		if f[i] == '(' {
			end := strings.IndexByte(f[i:], ')')
			if end < 0 || mapping == nil {
				return nil, fmt.Errorf("format requires a mapping")
			}
			key := f[i+1 : i+end]
			var ok bool
			if v, ok = mapping.Get(key); !ok {
				return nil, fmt.Errorf("KeyError: %s", strRepr(key))
			}
			haveV = true
			i += end + 1
		}
		j := i
		for j < len(f) && strings.IndexByte("-+ #0123456789.", f[j]) >= 0 {
			j++
		}
		if j >= len(f) {
			return nil, fmt.Errorf("incomplete format")
		}
		flags, conv := f[i:j], f[j]
		i = j
		if conv == '%' {
			b.WriteByte('%')
			continue
		}
		if !haveV {
			if next >= len(list) {
				return nil, fmt.Errorf("not enough arguments for format string")
			}
			v = list[next]
			next++
		}
		// Translate printf flags into a format spec: "-" left-aligns, "0"
		// zero-pads numbers (never strings), "+" and " " are signs.
		left := strings.Contains(flags, "-")
		flags = strings.ReplaceAll(flags, "-", "")
		sign := ""
		for strings.HasPrefix(flags, "+") || strings.HasPrefix(flags, " ") || strings.HasPrefix(flags, "#") {
			if flags[0] != '#' && sign != "+" {
				sign = flags[:1]
			}
			flags = flags[1:]
		}
		zero := strings.HasPrefix(flags, "0")
		flags = strings.TrimLeft(flags, "0")
		var spec string
		switch {
		case left:
			spec = "<" + sign + flags
		case zero && conv != 's' && conv != 'r' && conv != 'a':
			spec = sign + "0" + flags
		default:
			spec = ">" + sign + flags
		}
		var out string
		var err error
		switch conv {
		case 's':
			out, err = formatSpec(str(v), spec)
		case 'r', 'a':
			out, err = formatSpec(repr(v), spec)
		case 'd', 'i', 'u':
			fv, ok := toFloat(v)
			if !ok {
				return nil, fmt.Errorf("%%%c format: a real number is required, not %s", conv, typeName(v))
			}
			n, isInt := toInt(v)
			if !isInt {
				n = int64(fv)
			}
			out, err = formatSpec(n, spec)
		case 'f', 'F', 'e', 'E', 'g', 'G', 'x', 'X', 'o':
			if !isNumber(v) {
				return nil, fmt.Errorf("%%%c format: a real number is required, not %s", conv, typeName(v))
			}
			if strings.IndexByte("fFeEgG", conv) >= 0 {
				fv, _ := toFloat(v)
				v = fv
			}
			out, err = formatSpec(v, spec+string(conv))
		default:
			return nil, fmt.Errorf("unsupported format character '%c'", conv)
		}
		if err != nil {
			return nil, err
		}
		b.WriteString(out)
	}
	if next < len(list) && mapping == nil {
		return nil, fmt.Errorf("not all arguments converted during string formatting")
	}
	return b.String(), nil
}
