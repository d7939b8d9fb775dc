package jinja

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The lexer mirrors jinja2's regex lexer with the settings transformers uses
// (trim_blocks, lstrip_blocks, keep_trailing_newline off): the whitespace
// rules are where byte parity is won or lost, so each one below names the
// jinja2 rule it reproduces.

type tokKind int

const (
	tEOF tokKind = iota
	tData
	tVarBegin
	tVarEnd
	tBlockBegin
	tBlockEnd
	tName
	tString
	tInt
	tFloat
	tOp
)

type token struct {
	kind tokKind
	val  string // text, name, operator or decoded string literal
	num  Value  // int64 or float64 for number tokens
	line int
}

// operators, longest first so that "**" wins over "*".
var operators = []string{"//", "**", "==", "!=", ">=", "<=",
	"+", "-", "/", "*", "%", "~", "[", "]", "(", ")", "{", "}", ">", "<", "=", ".", ":", "|", ",", ";"}

type lexer struct {
	src   string
	pos   int
	line  int
	toks  []token
	start bool // jinja2's line_starting: the previous match ended with "\n"
}

// SyntaxError is a template that cannot be parsed; Line is 1-based.
type SyntaxError struct {
	Line int
	Msg  string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

func (l *lexer) fail(format string, args ...any) error {
	return &SyntaxError{Line: l.line, Msg: fmt.Sprintf(format, args...)}
}

func (l *lexer) emit(k tokKind, val string) {
	l.toks = append(l.toks, token{kind: k, val: val, line: l.line})
}

// lex tokenizes a template source.
func lex(src string) ([]token, error) {
	// jinja2 normalizes every newline to "\n" and drops one trailing newline.
	src = strings.ReplaceAll(src, "\r\n", "\n")
	src = strings.ReplaceAll(src, "\r", "\n")
	src = strings.TrimSuffix(src, "\n")
	l := &lexer{src: src, line: 1, start: true}
	for l.pos < len(l.src) {
		if err := l.root(); err != nil {
			return nil, err
		}
	}
	l.emit(tEOF, "")
	return l.toks, nil
}

// root lexes data up to the next tag and then the tag itself.
func (l *lexer) root() error {
	rest := l.src[l.pos:]
	i := indexTag(rest)
	if i < 0 {
		l.emit(tData, rest)
		l.line += strings.Count(rest, "\n")
		l.pos = len(l.src)
		return nil
	}
	base := l.pos
	text := rest[:i]
	tag := rest[i : i+2]
	sign := byte(0)
	if i+2 < len(rest) && (rest[i+2] == '-' || rest[i+2] == '+') {
		sign = rest[i+2]
	}
	isRaw, rawEnd := matchRawBegin(rest[i:])
	stripped := 0
	switch {
	case sign == '-':
		t := strings.TrimRightFunc(text, isSpace)
		stripped = strings.Count(text[len(t):], "\n")
		text = t
	case sign != '+' && tag != "{{":
		// lstrip_blocks: drop the spaces between the line start and the tag.
		lpos := strings.LastIndexByte(text, '\n') + 1
		if (lpos > 0 || l.start) && lpos < len(text) && strings.IndexFunc(text[lpos:], func(r rune) bool { return !isSpace(r) }) < 0 {
			stripped = strings.Count(text[lpos:], "\n")
			text = text[:lpos]
		}
	}
	if text != "" {
		l.emit(tData, text)
	}
	l.line += strings.Count(text, "\n") + stripped
	l.pos += i + 2
	if sign != 0 {
		l.pos++
	}
	if isRaw {
		l.pos = base + i + rawEnd
		l.start = strings.HasSuffix(rest[i:i+rawEnd], "\n")
		return l.raw()
	}
	l.start = false
	switch tag {
	case "{#":
		return l.comment()
	case "{{":
		l.emit(tVarBegin, "")
		return l.inside(tVarEnd)
	}
	l.emit(tBlockBegin, "")
	return l.inside(tBlockEnd)
}

func indexTag(s string) int {
	for i := 0; i+1 < len(s); i++ {
		if s[i] == '{' && (s[i+1] == '%' || s[i+1] == '{' || s[i+1] == '#') {
			return i
		}
	}
	return -1
}

// matchRawBegin matches `{%[-+]?\s*raw\s*(-%}\s*|%})` and returns the
// length of the match.
func matchRawBegin(s string) (bool, int) {
	if !strings.HasPrefix(s, "{%") {
		return false, 0
	}
	i := 2
	if i < len(s) && (s[i] == '-' || s[i] == '+') {
		i++
	}
	i = skipSpace(s, i)
	if !strings.HasPrefix(s[i:], "raw") {
		return false, 0
	}
	i = skipSpace(s, i+3)
	switch {
	case strings.HasPrefix(s[i:], "-%}"):
		return true, skipSpace(s, i+3)
	case strings.HasPrefix(s[i:], "%}"):
		return true, i + 2
	}
	return false, 0
}

func skipSpace(s string, i int) int {
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !isSpace(r) {
			break
		}
		i += n
	}
	return i
}

// raw lexes the body of {% raw %} up to {% endraw %} as data.
func (l *lexer) raw() error {
	rest := l.src[l.pos:]
	for j := 0; ; {
		k := strings.Index(rest[j:], "{%")
		if k < 0 {
			return l.fail("missing end of raw directive")
		}
		k += j
		i := k + 2
		sign := byte(0)
		if i < len(rest) && (rest[i] == '-' || rest[i] == '+') {
			sign = rest[i]
			i++
		}
		i = skipSpace(rest, i)
		if !strings.HasPrefix(rest[i:], "endraw") {
			j = k + 2
			continue
		}
		i = skipSpace(rest, i+6)
		end, ok := l.tagEnd(rest, i, "%}", true)
		if !ok {
			j = k + 2
			continue
		}
		text := rest[:k]
		if sign == '-' {
			text = strings.TrimRightFunc(text, isSpace)
		} else if sign != '+' {
			lpos := strings.LastIndexByte(text, '\n') + 1
			if (lpos > 0 || l.start) && lpos < len(text) && strings.IndexFunc(text[lpos:], func(r rune) bool { return !isSpace(r) }) < 0 {
				text = text[:lpos]
			}
		}
		if text != "" {
			l.emit(tData, text)
		}
		l.line += strings.Count(rest[:end], "\n")
		l.start = strings.HasSuffix(rest[:end], "\n")
		l.pos += end
		return nil
	}
}

// tagEnd matches a closing delimiter at s[i:]: "+%}", "-%}" followed by any
// whitespace, or the bare delimiter followed by one optional newline when
// trim applies (trim_blocks).
func (l *lexer) tagEnd(s string, i int, delim string, trim bool) (int, bool) {
	switch {
	case strings.HasPrefix(s[i:], "+"+delim) && delim != "}}":
		return i + 1 + len(delim), true
	case strings.HasPrefix(s[i:], "-"+delim):
		return skipSpace(s, i+1+len(delim)), true
	case strings.HasPrefix(s[i:], delim):
		i += len(delim)
		if trim && i < len(s) && s[i] == '\n' {
			i++
		}
		return i, true
	}
	return 0, false
}

// comment skips a {# ... #} comment; trim_blocks applies to its end too.
func (l *lexer) comment() error {
	rest := l.src[l.pos:]
	k := strings.Index(rest, "#}")
	if k < 0 {
		return l.fail("missing end of comment tag")
	}
	i := k
	if k > 0 && (rest[k-1] == '-' || rest[k-1] == '+') {
		i = k - 1
	}
	end, _ := l.tagEnd(rest, i, "#}", true)
	l.line += strings.Count(rest[:end], "\n")
	l.start = strings.HasSuffix(rest[:end], "\n")
	l.pos += end
	return nil
}

// inside lexes the expression tokens of a {{ }} or {% %} tag.
func (l *lexer) inside(endKind tokKind) error {
	delim, trim := "%}", true
	if endKind == tVarEnd {
		delim, trim = "}}", false
	}
	var balance []byte
	for {
		if l.pos >= len(l.src) {
			return l.fail("unexpected end of template")
		}
		s := l.src
		if len(balance) == 0 {
			if end, ok := l.tagEnd(s, l.pos, delim, trim); ok {
				l.emit(endKind, "")
				l.line += strings.Count(s[l.pos:end], "\n")
				l.start = strings.HasSuffix(s[l.pos:end], "\n")
				l.pos = end
				return nil
			}
		}
		r, n := utf8.DecodeRuneInString(s[l.pos:])
		switch {
		case isSpace(r):
			j := skipSpace(s, l.pos)
			l.line += strings.Count(s[l.pos:j], "\n")
			l.pos = j
		case r >= '0' && r <= '9':
			if err := l.number(); err != nil {
				return err
			}
		case r == '_' || unicode.IsLetter(r):
			j := l.pos + n
			for j < len(s) {
				r, n := utf8.DecodeRuneInString(s[j:])
				if r != '_' && !unicode.IsLetter(r) && !unicode.IsDigit(r) && !unicode.Is(unicode.Mn, r) && !unicode.Is(unicode.Mc, r) {
					break
				}
				j += n
			}
			l.emit(tName, s[l.pos:j])
			l.pos = j
		case r == '\'' || r == '"':
			if err := l.str(byte(r)); err != nil {
				return err
			}
		default:
			op := ""
			for _, o := range operators {
				if strings.HasPrefix(s[l.pos:], o) {
					op = o
					break
				}
			}
			if op == "" {
				return l.fail("unexpected char %q", r)
			}
			switch op {
			case "(", "[", "{":
				balance = append(balance, map[string]byte{"(": ')', "[": ']', "{": '}'}[op])
			case ")", "]", "}":
				if len(balance) == 0 {
					return l.fail("unexpected '%s'", op)
				}
				if want := balance[len(balance)-1]; want != op[0] {
					return l.fail("unexpected '%s', expected '%c'", op, want)
				}
				balance = balance[:len(balance)-1]
			}
			l.emit(tOp, op)
			l.pos += len(op)
		}
	}
}
