package tok

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A splitPattern finds the delimiters of a Split pre-tokenizer: it covers s
// with contiguous (start, end, isMatch) segments, as tokenizers'
// Pattern::find_matches does.
type splitPattern interface {
	find(s string, dst []segment) []segment
}

// anchoredMatcher returns the end of the match that starts at byte i, or -1;
// trying it at every position gives Oniguruma's leftmost-first find_iter.
type anchoredMatcher interface {
	matchAt(s string, i int) int
}

// The regexes that real tokenizers use. Go's regexp has no lookahead, so
// these are matched by gptPattern, which implements what they mean.
const (
	gpt2Regex   = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
	llama3Regex = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	qwen2Regex  = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// gptPattern is the family of GPT-2 / GPT-4 style pre-tokenizer regexes.
type gptPattern struct {
	gpt4 bool // (?i:) contractions, [^\r\n\p{L}\p{N}]? before letters, [\r\n]* after punctuation, \s*[\r\n]+
	// maxDigits bounds \p{N}{1,maxDigits}; 0 means ` ?\p{N}+` (GPT-2).
	maxDigits int
	// noFinalSpace drops the closing `|\s+` alternative.
	noFinalSpace bool
}

func (p gptPattern) find(s string, dst []segment) []segment { return scanMatches(p, s, dst) }

var knownPatterns = map[string]splitPattern{
	gpt2Regex:   gptPattern{},
	llama3Regex: gptPattern{gpt4: true, maxDigits: 3},
	qwen2Regex:  gptPattern{gpt4: true, maxDigits: 1},
	// The GPT-2 pattern without the trailing `|\s+`, as llama.cpp and some
	// configs spell it: a lone space before a digit is then left unmatched.
	strings.TrimSuffix(gpt2Regex, `|\s+`): gptPattern{noFinalSpace: true},
}

// charClass returns letter, number, whitespace or other for r, with an
// ASCII fast path (this runs on every byte of input).
const (
	clsOther = iota
	clsLetter
	clsNumber
	clsSpace
)

var asciiClass [128]uint8

func init() {
	for r := rune(0); r < 128; r++ {
		switch {
		case r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z':
			asciiClass[r] = clsLetter
		case r >= '0' && r <= '9':
			asciiClass[r] = clsNumber
		case r == ' ' || r >= '\t' && r <= '\r':
			asciiClass[r] = clsSpace
		}
	}
}

func classAt(s string, i int) (cls uint8, size int) {
	c := s[i]
	if c < utf8.RuneSelf {
		return asciiClass[c], 1
	}
	r, size := utf8.DecodeRuneInString(s[i:])
	switch {
	case unicode.IsLetter(r):
		return clsLetter, size
	case unicode.IsNumber(r):
		return clsNumber, size
	case unicode.IsSpace(r):
		return clsSpace, size
	}
	return clsOther, size
}

// run returns the end of the run of characters of class cls starting at i,
// taking at most max characters (max <= 0: unbounded).
func run(s string, i int, cls uint8, max int) int {
	n := 0
	for i < len(s) && (max <= 0 || n < max) {
		c, size := classAt(s, i)
		if c != cls {
			break
		}
		i += size
		n++
	}
	return i
}

func (p gptPattern) matchAt(s string, i int) int {
	// 'alternative 1: contractions.
	if s[i] == '\'' && i+1 < len(s) {
		if end := p.contraction(s, i+1); end > 0 {
			return end
		}
	}
	c0, size0 := classAt(s, i)
	// Alternative 2: letters, optionally after one prefix character.
	if c0 == clsLetter {
		return run(s, i, clsLetter, 0)
	}
	prefixOK := s[i] == ' '
	if p.gpt4 {
		prefixOK = c0 != clsLetter && c0 != clsNumber && s[i] != '\r' && s[i] != '\n'
	}
	if prefixOK && i+size0 < len(s) {
		if c1, _ := classAt(s, i+size0); c1 == clsLetter {
			return run(s, i+size0, clsLetter, 0)
		}
	}
	// Alternative 3: numbers.
	if p.maxDigits > 0 {
		if c0 == clsNumber {
			return run(s, i, clsNumber, p.maxDigits)
		}
	} else {
		if c0 == clsNumber {
			return run(s, i, clsNumber, 0)
		}
		if s[i] == ' ' && i+1 < len(s) {
			if c1, _ := classAt(s, i+1); c1 == clsNumber {
				return run(s, i+1, clsNumber, 0)
			}
		}
	}
	// Alternative 4: other symbols, optionally after one space (then CR/LF in GPT-4).
	start := -1
	if c0 == clsOther {
		start = i
	} else if s[i] == ' ' && i+1 < len(s) {
		if c1, _ := classAt(s, i+1); c1 == clsOther {
			start = i + 1
		}
	}
	if start >= 0 {
		end := run(s, start, clsOther, 0)
		if p.gpt4 {
			for end < len(s) && (s[end] == '\r' || s[end] == '\n') {
				end++
			}
		}
		return end
	}
	if c0 != clsSpace {
		return -1
	}
	// Whitespace: the run W of whitespace starting at i.
	wsEnd := run(s, i, clsSpace, 0)
	if p.gpt4 {
		// \s*[\r\n]+ ends just after the last CR or LF in W.
		for j := wsEnd - 1; j >= i; j-- {
			if s[j] == '\r' || s[j] == '\n' {
				return j + 1
			}
		}
	}
	// \s+(?!\S): all of W at the end of text, else W minus its last character.
	if wsEnd == len(s) {
		return wsEnd
	}
	_, lastSize := utf8.DecodeLastRuneInString(s[i:wsEnd])
	if wsEnd-lastSize > i {
		return wsEnd - lastSize
	}
	// \s+ (one whitespace character before a non-space).
	if p.noFinalSpace {
		return -1
	}
	return wsEnd
}

// contraction matches 's|'t|'re|'ve|'m|'ll|'d after the apostrophe at j-1,
// case-insensitively in GPT-4 patterns (where ſ folds to s, as in Oniguruma).
func (p gptPattern) contraction(s string, j int) int {
	fold := func(k int, want byte) int {
		if k >= len(s) {
			return 0
		}
		c := s[k]
		if c == want || p.gpt4 && c == want-'a'+'A' {
			return 1
		}
		if p.gpt4 && want == 's' && strings.HasPrefix(s[k:], "ſ") {
			return len("ſ")
		}
		return 0
	}
	for _, w := range []string{"s", "t", "re", "ve", "m", "ll", "d"} {
		k := j
		ok := true
		for x := 0; x < len(w); x++ {
			n := fold(k, w[x])
			if n == 0 {
				ok = false
				break
			}
			k += n
		}
		if ok {
			return k
		}
	}
	return -1
}

// literalPattern matches a fixed string.
type literalPattern string

func (p literalPattern) find(s string, dst []segment) []segment { return scanMatches(p, s, dst) }

func (p literalPattern) matchAt(s string, i int) int {
	if p != "" && strings.HasPrefix(s[i:], string(p)) {
		return i + len(p)
	}
	return -1
}

// regexpPattern is the fallback for other regexes: Go's regexp after the
// Oniguruma escapes whose meaning differs (\s, \d, \w are Unicode there) are
// translated, and only when the pattern uses nothing Go cannot express.
type regexpPattern struct{ re *regexp.Regexp }

func (p regexpPattern) find(s string, dst []segment) []segment {
	prev := 0
	for _, loc := range p.re.FindAllStringIndex(s, -1) {
		if loc[0] == loc[1] {
			continue
		}
		if prev != loc[0] {
			dst = append(dst, segment{prev, loc[0], false})
		}
		dst = append(dst, segment{loc[0], loc[1], true})
		prev = loc[1]
	}
	if prev != len(s) {
		dst = append(dst, segment{prev, len(s), false})
	}
	return dst
}

const onigSpace = `\t\n\v\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}`

func compileSplitRegex(pattern string) (splitPattern, error) {
	if p, ok := knownPatterns[pattern]; ok {
		return p, nil
	}
	if hasLineAnchor(pattern) {
		return nil, fmt.Errorf("unsupported split regex %q: ^ and $ are line anchors in Oniguruma", pattern)
	}
	for _, bad := range []string{`(?=`, `(?!`, `(?<`, `(?>`, `\b`, `\B`, `\G`, `\A`, `\Z`, `\z`, `\h`, `\X`, `\R`, `\k`, `++`, `*+`, `?+`} {
		if strings.Contains(pattern, bad) {
			return nil, fmt.Errorf("unsupported split regex %q: %s has no Go equivalent", pattern, bad)
		}
	}
	r := strings.NewReplacer(`\\`, `\\`, `\s`, `[`+onigSpace+`]`, `\S`, `[^`+onigSpace+`]`,
		`\d`, `\p{Nd}`, `\D`, `\P{Nd}`, `\w`, `[\p{L}\p{M}\p{Nd}\p{Pc}]`, `\W`, `[^\p{L}\p{M}\p{Nd}\p{Pc}]`)
	re, err := regexp.Compile(r.Replace(pattern))
	if err != nil {
		return nil, fmt.Errorf("unsupported split regex %q: %w", pattern, err)
	}
	return regexpPattern{re}, nil
}

// scanMatches runs an anchored matcher at each position from left to right.
func scanMatches(p anchoredMatcher, s string, dst []segment) []segment {
	prev := 0
	for i := 0; i < len(s); {
		end := p.matchAt(s, i)
		if end < 0 {
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
			continue
		}
		if prev != i {
			dst = append(dst, segment{prev, i, false})
		}
		dst = append(dst, segment{i, end, true})
		prev, i = end, end
	}
	if prev != len(s) {
		dst = append(dst, segment{prev, len(s), false})
	}
	return dst
}

type segment struct {
	start, end int
	match      bool
}

// hasLineAnchor reports a ^ or $ outside a character class and not escaped.
func hasLineAnchor(p string) bool {
	inClass := false
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '\\':
			i++
		case c == '[':
			if inClass {
				continue
			}
			inClass = true
			if i+1 < len(p) && p[i+1] == '^' {
				i++
			}
		case c == ']':
			inClass = false
		case !inClass && (c == '^' || c == '$'):
			return true
		}
	}
	return false
}
