package jinja

import (
	"regexp"
	"strings"
)

// Filters over strings.

var wordRe = regexp.MustCompile(`[\p{L}\p{N}_]+`)

func fWordcount(r *renderer, v Value, args []Value, kw *Dict) (Value, error) {
	return int64(len(wordRe.FindAllString(str(v), -1))), nil
}

var titleSplitRe = regexp.MustCompile(`[-\s({\[<]+`)

// fTitle is jinja2's title filter, which differs from str.title: words start
// after whitespace, dashes and opening brackets only.
func fTitle(r *renderer, v Value, args []Value, kw *Dict) (Value, error) {
	s := str(v)
	var b strings.Builder
	last := 0
	word := func(w string) {
		if w == "" {
			return
		}
		rs := []rune(w)
		b.WriteString(pyUpper(string(rs[0])))
		b.WriteString(pyLower(string(rs[1:])))
	}
	for _, m := range titleSplitRe.FindAllStringIndex(s, -1) {
		word(s[last:m[0]])
		b.WriteString(s[m[0]:m[1]])
		last = m[1]
	}
	word(s[last:])
	return b.String(), nil
}

func fTrim(r *renderer, v Value, args []Value, kw *Dict) (Value, error) {
	a, err := bind("trim", []string{"chars"}, []Value{nil}, args, kw)
	if err != nil {
		return nil, err
	}
	f, err := stripSet("trim", a[0])
	if err != nil {
		return nil, err
	}
	return strings.TrimFunc(str(v), f), nil
}

func fString(r *renderer, v Value, args []Value, kw *Dict) (Value, error) { return str(v), nil }

func fReplace(r *renderer, v Value, args []Value, kw *Dict) (Value, error) {
	a, err := bind("replace", []string{"old", "new", "count"}, []Value{nil}, args, kw)
	if err != nil {
		return nil, err
	}
	if a[2] == nil {
		a[2] = int64(-1)
	}
	return pyReplace(str(v), str(a[0]), str(a[1]), a[2])
}

func fTruncate(r *renderer, v Value, args []Value, kw *Dict) (Value, error) {
	a, err := bind("truncate", []string{"length", "killwords", "end", "leeway"}, []Value{int64(255), false, "...", int64(5)}, args, kw)
	if err != nil {
		return nil, err
	}
	rs := []rune(str(v))
	n, _ := toInt(a[0])
	lee, _ := toInt(a[3])
	end := str(a[2])
	if int64(len(rs)) <= n+lee {
		return string(rs), nil
	}
	cut := int(max(n-int64(len([]rune(end))), 0))
	if truth(a[1]) {
		return string(rs[:cut]) + end, nil
	}
	head := string(rs[:cut])
	if i := strings.LastIndex(head, " "); i >= 0 {
		head = head[:i]
	}
	return head + end, nil
}
