package jinja

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Number and string literals, as jinja2's float_re, integer_re and string_re
// read them.
var (
	floatRe = regexp.MustCompile(`^(?i)(\d+_)*\d+((\.(\d+_)*\d+)?e[+\-]?(\d+_)*\d+|\.(\d+_)*\d+)`)
	intRe   = regexp.MustCompile(`^(?i)(0b(_?[0-1])+|0o(_?[0-7])+|0x(_?[\da-f])+|[1-9](_?\d)*|0(_?0)*)`)
)

func (l *lexer) number() error {
	s := l.src[l.pos:]
	// jinja2's float rule has a (?<!\.) look-behind so that x.0.1 is two
	// integer attribute lookups rather than a float.
	if !(l.pos > 0 && l.src[l.pos-1] == '.') {
		if m := floatRe.FindString(s); m != "" {
			f, err := strconv.ParseFloat(strings.ReplaceAll(m, "_", ""), 64)
			if err != nil && !strings.Contains(err.Error(), "range") {
				return l.fail("invalid float literal %q", m)
			}
			l.toks = append(l.toks, token{kind: tFloat, val: m, num: f, line: l.line})
			l.pos += len(m)
			return nil
		}
	}
	m := intRe.FindString(s)
	if m == "" {
		return l.fail("unexpected char %q", s[0])
	}
	n, err := strconv.ParseInt(strings.ReplaceAll(m, "_", ""), 0, 64)
	if err != nil {
		return l.fail("integer literal %s is out of range", m)
	}
	l.toks = append(l.toks, token{kind: tInt, val: m, num: n, line: l.line})
	l.pos += len(m)
	return nil
}

// str lexes a quoted string literal and decodes it as jinja2 does: newlines
// normalized, non-ASCII turned into backslash escapes, then Python's
// unicode-escape codec. The detour matters for a backslash before a
// non-ASCII character, which Python turns into a literal escape sequence.
func (l *lexer) str(q byte) error {
	s := l.src
	i := l.pos + 1
	for {
		if i >= len(s) {
			return l.fail("unexpected char %q", q)
		}
		c := s[i]
		if c == '\\' {
			if i+1 >= len(s) {
				return l.fail("unexpected char %q", q)
			}
			_, n := utf8.DecodeRuneInString(s[i+1:])
			i += 1 + n
			continue
		}
		if c == q {
			break
		}
		i++
	}
	raw := s[l.pos+1 : i]
	val, err := unicodeEscape(backslashReplace(raw))
	if err != nil {
		return l.fail("%v", err)
	}
	l.toks = append(l.toks, token{kind: tString, val: val, line: l.line})
	l.line += strings.Count(raw, "\n")
	l.pos = i + 1
	return nil
}

func backslashReplace(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r < 0x80:
			b.WriteRune(r)
		case r <= 0xff:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
	}
	return b.String()
}

// unicodeEscape is Python's "unicode-escape" decoding of ASCII text.
func unicodeEscape(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(s) {
			return "", fmt.Errorf("\\ at end of string")
		}
		switch c = s[i]; c {
		case '\n':
		case '\\', '\'', '"':
			b.WriteByte(c)
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case '0', '1', '2', '3', '4', '5', '6', '7':
			j := i
			for j < len(s) && j < i+3 && s[j] >= '0' && s[j] <= '7' {
				j++
			}
			n, _ := strconv.ParseUint(s[i:j], 8, 32)
			b.WriteRune(rune(n))
			i = j - 1
		case 'x', 'u', 'U':
			width := map[byte]int{'x': 2, 'u': 4, 'U': 8}[c]
			if i+1+width > len(s) {
				return "", fmt.Errorf("truncated \\%cXX escape", c)
			}
			hex := s[i+1 : i+1+width]
			n, err := strconv.ParseUint(hex, 16, 32)
			if err != nil || strings.ContainsAny(hex, "+-_") {
				return "", fmt.Errorf("truncated \\%cXX escape", c)
			}
			if n > utf8.MaxRune {
				return "", fmt.Errorf("illegal Unicode character")
			}
			b.WriteRune(rune(n))
			i += width
		default:
			// Python keeps unknown escapes (and \N{...}, which we do not
			// resolve) as written.
			if c == 'N' {
				return "", fmt.Errorf("named unicode escapes are not supported")
			}
			b.WriteByte('\\')
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}
