package jinja

import (
	"fmt"
	"strings"
	"unicode"
)

// Python string operations whose Go counterparts differ in edge cases.

func pySplit(s string, sepV Value, maxsplit int, fromRight bool) (Value, error) {
	var parts []string
	if sepV == nil {
		parts = splitWhitespace(s, maxsplit, fromRight)
	} else {
		sep, err := strArg("split", sepV)
		if err != nil {
			return nil, err
		}
		if sep == "" {
			return nil, fmt.Errorf("empty separator")
		}
		switch {
		case maxsplit < 0:
			parts = strings.Split(s, sep)
		case !fromRight:
			parts = strings.SplitN(s, sep, maxsplit+1)
		default:
			rest := s
			for len(parts) < maxsplit {
				i := strings.LastIndex(rest, sep)
				if i < 0 {
					break
				}
				parts = append([]string{rest[i+len(sep):]}, parts...)
				rest = rest[:i]
			}
			parts = append([]string{rest}, parts...)
		}
	}
	out := make([]Value, len(parts))
	for i, p := range parts {
		out[i] = p
	}
	return &List{Items: out}, nil
}

// splitWhitespace is str.split() without a separator: runs of whitespace
// separate, and leading/trailing whitespace yields no empty strings.
func splitWhitespace(s string, maxsplit int, fromRight bool) []string {
	if fromRight {
		rs := []rune(s)
		var parts []string
		end := len(rs)
		for {
			for end > 0 && isSpace(rs[end-1]) {
				end--
			}
			if end == 0 {
				break
			}
			if maxsplit >= 0 && len(parts) == maxsplit {
				parts = append(parts, string(rs[:end]))
				break
			}
			start := end
			for start > 0 && !isSpace(rs[start-1]) {
				start--
			}
			parts = append(parts, string(rs[start:end]))
			end = start
		}
		for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
			parts[i], parts[j] = parts[j], parts[i]
		}
		return parts
	}
	rs := []rune(s)
	var parts []string
	i := 0
	for {
		for i < len(rs) && isSpace(rs[i]) {
			i++
		}
		if i == len(rs) {
			break
		}
		if maxsplit >= 0 && len(parts) == maxsplit {
			parts = append(parts, string(rs[i:]))
			break
		}
		j := i
		for j < len(rs) && !isSpace(rs[j]) {
			j++
		}
		parts = append(parts, string(rs[i:j]))
		i = j
	}
	return parts
}

func splitLines(s string, keep bool) Value {
	rs := []rune(s)
	var out []Value
	start := 0
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch r {
		case '\n', '\r', '\v', '\f', 0x1c, 0x1d, 0x1e, 0x85, 0x2028, 0x2029:
		default:
			continue
		}
		end := i + 1
		if r == '\r' && i+1 < len(rs) && rs[i+1] == '\n' {
			end++
		}
		line := rs[start:i]
		if keep {
			line = rs[start:end]
		}
		out = append(out, string(line))
		start = end
		i = end - 1
	}
	if start < len(rs) {
		out = append(out, string(rs[start:]))
	}
	return &List{Items: out}
}

func pyReplace(s string, oldV, newV, countV Value) (Value, error) {
	old, err := strArg("replace", oldV)
	if err != nil {
		return nil, err
	}
	nw, err := strArg("replace", newV)
	if err != nil {
		return nil, err
	}
	n, ok := toInt(countV)
	if !ok {
		return nil, fmt.Errorf("'%s' object cannot be interpreted as an integer", typeName(countV))
	}
	if n < 0 {
		n = -1
	}
	if old == "" && n != 0 {
		// Python inserts between every character; cap the work.
		if len(s)*len(nw) > maxRepeat {
			return nil, fmt.Errorf("%w: replace result too large", ErrLimit)
		}
	}
	return strings.Replace(s, old, nw, int(min(n, 1<<30))), nil
}

// Python's full case mappings that Go's simple ones miss.
var upperSpecial = map[rune]string{'ß': "SS", 'ŉ': "ʼN", 'ﬀ': "FF", 'ﬁ': "FI", 'ﬂ': "FL", 'ﬃ': "FFI", 'ﬄ': "FFL", 'ﬅ': "ST", 'ﬆ': "ST"}

func pyUpper(s string) string {
	var b strings.Builder
	for _, r := range s {
		if sp, ok := upperSpecial[r]; ok {
			b.WriteString(sp)
			continue
		}
		b.WriteRune(unicode.ToUpper(r))
	}
	return b.String()
}

func pyLower(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r == 'İ' {
			b.WriteString("i̇")
			continue
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

func isCased(r rune) bool { return unicode.IsUpper(r) || unicode.IsLower(r) || unicode.IsTitle(r) }

// pyTitle is str.title(): a cased character after an uncased one starts a word.
func pyTitle(s string) string {
	var b strings.Builder
	prevCased := false
	for _, r := range s {
		if prevCased {
			b.WriteRune(unicode.ToLower(r))
		} else {
			b.WriteRune(unicode.ToTitle(r))
		}
		prevCased = isCased(r)
	}
	return b.String()
}

func pyCapitalize(s string) string {
	var b strings.Builder
	for i, r := range []rune(s) {
		if i == 0 {
			b.WriteRune(unicode.ToTitle(r))
		} else {
			b.WriteString(pyLower(string(r)))
		}
	}
	return b.String()
}

func pyFind(s, sub string, start, end Value, name string) (Value, error) {
	rs := []rune(s)
	a, b, err := span(rs, start, end)
	if err != nil {
		return nil, err
	}
	if a > b {
		if name == "count" {
			return int64(0), nil
		}
		if name == "index" || name == "rindex" {
			return nil, fmt.Errorf("substring not found")
		}
		return int64(-1), nil
	}
	hay := string(rs[a:b])
	runeIdx := func(byteIdx int) int64 { return int64(a + len([]rune(hay[:byteIdx]))) }
	switch name {
	case "count":
		if sub == "" {
			return int64(b - a + 1), nil
		}
		return int64(strings.Count(hay, sub)), nil
	case "find", "index":
		if i := strings.Index(hay, sub); i >= 0 {
			return runeIdx(i), nil
		}
	default:
		if i := strings.LastIndex(hay, sub); i >= 0 {
			return runeIdx(i), nil
		}
	}
	if name == "index" || name == "rindex" {
		return nil, fmt.Errorf("substring not found")
	}
	return int64(-1), nil
}

func pad(s, name string, widthV, fillV Value) (Value, error) {
	w, ok := toInt(widthV)
	if !ok {
		return nil, fmt.Errorf("'%s' object cannot be interpreted as an integer", typeName(widthV))
	}
	w = min(w, maxRepeat)
	fill, err := strArg(name, fillV)
	if err != nil || len([]rune(fill)) != 1 {
		return nil, fmt.Errorf("the fill character must be exactly one character long")
	}
	n := len([]rune(s))
	if int64(n) >= w {
		return s, nil
	}
	total := int(w) - n
	switch name {
	case "ljust":
		return s + strings.Repeat(fill, total), nil
	case "rjust":
		return strings.Repeat(fill, total) + s, nil
	case "zfill":
		sign := ""
		if strings.HasPrefix(s, "-") || strings.HasPrefix(s, "+") {
			sign, s = s[:1], s[1:]
		}
		return sign + strings.Repeat("0", total) + s, nil
	}
	// center: Python puts the extra fill on the left when both the
	// padding and the width are odd.
	left := total / 2
	if total%2 == 1 && w%2 == 1 {
		left++
	}
	return strings.Repeat(fill, left) + s + strings.Repeat(fill, total-left), nil
}

func strPredicate(s, name string) bool {
	if s == "" {
		return false
	}
	hasCased := false
	for _, r := range s {
		switch name {
		case "isdigit", "isdecimal", "isnumeric":
			if !unicode.IsDigit(r) && !(name != "isdecimal" && unicode.IsNumber(r)) {
				return false
			}
		case "isalpha":
			if !unicode.IsLetter(r) {
				return false
			}
		case "isalnum":
			if !unicode.IsLetter(r) && !unicode.IsNumber(r) {
				return false
			}
		case "isspace":
			if !isSpace(r) {
				return false
			}
		case "islower":
			if unicode.IsUpper(r) || unicode.IsTitle(r) {
				return false
			}
			hasCased = hasCased || unicode.IsLower(r)
		case "isupper":
			if unicode.IsLower(r) || unicode.IsTitle(r) {
				return false
			}
			hasCased = hasCased || unicode.IsUpper(r)
		}
	}
	if name == "islower" || name == "isupper" {
		return hasCased
	}
	return true
}
