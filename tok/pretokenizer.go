package tok

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A piece is one pre-token: text the model tokenizes on its own. atStart
// records whether it begins at offset 0 of the original input (Metaspace's
// prepend_scheme "first" depends on it).
type piece struct {
	text    string
	atStart bool
}

// A preTokenizer splits each piece further. Empty pieces are dropped, as in
// tokenizers' PreTokenizedString::split.
type preTokenizer interface {
	preTokenize(in []piece) []piece
}

// splitBehavior is tokenizers' SplitDelimiterBehavior.
type splitBehavior int

const (
	behRemoved splitBehavior = iota
	behIsolated
	behMergedWithPrevious
	behMergedWithNext
	behContiguous
)

func parseBehavior(s string) (splitBehavior, error) {
	switch s {
	case "Removed":
		return behRemoved, nil
	case "Isolated":
		return behIsolated, nil
	case "MergedWithPrevious":
		return behMergedWithPrevious, nil
	case "MergedWithNext":
		return behMergedWithNext, nil
	case "Contiguous":
		return behContiguous, nil
	}
	return 0, fmt.Errorf("unsupported split behavior %q", s)
}

// applyBehavior turns find_matches segments into the pieces to keep, as
// NormalizedString::split does.
func applyBehavior(segs []segment, b splitBehavior) []segment {
	switch b {
	case behIsolated:
		return segs
	case behRemoved:
		out := segs[:0]
		for _, s := range segs {
			if !s.match {
				out = append(out, s)
			}
		}
		return out
	case behContiguous, behMergedWithPrevious:
		var out []segment
		prevMatch := false
		for _, s := range segs {
			merge := s.match && !prevMatch
			if b == behContiguous {
				merge = s.match == prevMatch
			}
			if merge && len(out) > 0 {
				out[len(out)-1].end = s.end
			} else {
				out = append(out, segment{s.start, s.end, false})
			}
			prevMatch = s.match
		}
		return out
	case behMergedWithNext:
		var rev []segment
		prevMatch := false
		for i := len(segs) - 1; i >= 0; i-- {
			s := segs[i]
			if s.match && !prevMatch && len(rev) > 0 {
				rev[len(rev)-1].start = s.start
			} else {
				rev = append(rev, segment{s.start, s.end, false})
			}
			prevMatch = s.match
		}
		for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
			rev[i], rev[j] = rev[j], rev[i]
		}
		return rev
	}
	return segs
}

// splitPieces splits every piece with find and behavior b.
func splitPieces(in []piece, find func(s string, dst []segment) []segment, b splitBehavior, invert bool) []piece {
	out := make([]piece, 0, len(in)*2)
	var segs []segment
	for _, p := range in {
		segs = find(p.text, segs[:0])
		if invert {
			for i := range segs {
				segs[i].match = !segs[i].match
			}
		}
		for _, s := range applyBehavior(segs, b) {
			if s.end > s.start {
				out = append(out, piece{p.text[s.start:s.end], p.atStart && s.start == 0})
			}
		}
	}
	return out
}

// charFinder makes a find function from a character predicate.
func charFinder(pred func(rune) bool) func(string, []segment) []segment {
	return func(s string, dst []segment) []segment {
		last := 0
		for i, r := range s {
			if pred(r) {
				if last < i {
					dst = append(dst, segment{last, i, false})
				}
				n := utf8.RuneLen(r)
				if r == utf8.RuneError {
					n = 1
				}
				dst = append(dst, segment{i, i + n, true})
				last = i + n
			}
		}
		if last < len(s) {
			dst = append(dst, segment{last, len(s), false})
		}
		return dst
	}
}

type splitPreTokenizer struct {
	pattern  splitPattern
	behavior splitBehavior
	invert   bool
}

func (p splitPreTokenizer) preTokenize(in []piece) []piece {
	return splitPieces(in, p.pattern.find, p.behavior, p.invert)
}

// byteLevelPreTokenizer optionally adds a leading space and splits with the
// GPT-2 regex; the byte-to-character mapping itself happens in the BPE model
// (byteLevel is set there) so that text is mapped once, right before merging.
type byteLevelPreTokenizer struct {
	addPrefixSpace, useRegex bool
}

var gpt2Pattern = gptPattern{}

func (p byteLevelPreTokenizer) preTokenize(in []piece) []piece {
	if p.addPrefixSpace {
		for i := range in {
			if !strings.HasPrefix(in[i].text, " ") {
				in[i].text = " " + in[i].text
			}
		}
	}
	if !p.useRegex {
		return in
	}
	return splitPieces(in, gpt2Pattern.find, behIsolated, false)
}

// metaspacePreTokenizer replaces spaces with the replacement character,
// prepends one per prepend_scheme, and splits before each replacement.
type metaspacePreTokenizer struct {
	replacement string
	prepend     string // "always", "first" or "never"
	split       bool
}

func (p metaspacePreTokenizer) preTokenize(in []piece) []piece {
	repl, _ := utf8.DecodeRuneInString(p.replacement)
	for i := range in {
		t := strings.ReplaceAll(in[i].text, " ", p.replacement)
		if !strings.HasPrefix(t, p.replacement) && (p.prepend == "always" || p.prepend == "first" && in[i].atStart) {
			t = p.replacement + t
		}
		in[i].text = t
	}
	if !p.split {
		return in
	}
	return splitPieces(in, charFinder(func(r rune) bool { return r == repl }), behMergedWithNext, false)
}

// bertPreTokenizer splits on whitespace and isolates punctuation.
type bertPreTokenizer struct{}

func (bertPreTokenizer) preTokenize(in []piece) []piece {
	in = splitPieces(in, charFinder(isWhitespace), behRemoved, false)
	return splitPieces(in, charFinder(isBertPunct), behIsolated, false)
}

// whitespacePreTokenizer is Whitespace: the regex \w+|[^\w\s]+ with Unicode classes.
type whitespacePreTokenizer struct{}

func isWordChar(r rune) bool {
	if r < utf8.RuneSelf {
		return asciiClass[r] == clsLetter || asciiClass[r] == clsNumber || r == '_'
	}
	return unicode.IsLetter(r) || unicode.IsMark(r) || unicode.Is(unicode.Nd, r) ||
		unicode.Is(unicode.Pc, r) || unicode.Is(unicode.Other_Alphabetic, r) ||
		unicode.Is(unicode.Nl, r) || r == 0x200C || r == 0x200D
}

func (whitespacePreTokenizer) preTokenize(in []piece) []piece {
	find := func(s string, dst []segment) []segment {
		return scanMatches(matcherFunc(func(s string, i int) int {
			r, size := utf8.DecodeRuneInString(s[i:])
			word := isWordChar(r)
			if !word && isWhitespace(r) {
				return -1
			}
			j := i + size
			for j < len(s) {
				r, size := utf8.DecodeRuneInString(s[j:])
				if isWordChar(r) != word || !word && isWhitespace(r) {
					break
				}
				j += size
			}
			return j
		}), s, dst)
	}
	return splitPieces(in, find, behRemoved, true)
}

type matcherFunc func(s string, i int) int

func (f matcherFunc) matchAt(s string, i int) int { return f(s, i) }

type whitespaceSplitPreTokenizer struct{}

func (whitespaceSplitPreTokenizer) preTokenize(in []piece) []piece {
	return splitPieces(in, charFinder(isWhitespace), behRemoved, false)
}

type digitsPreTokenizer struct{ individual bool }

func (p digitsPreTokenizer) preTokenize(in []piece) []piece {
	b := behContiguous
	if p.individual {
		b = behIsolated
	}
	return splitPieces(in, charFinder(unicode.IsNumber), b, false)
}

type punctuationPreTokenizer struct{ behavior splitBehavior }

func (p punctuationPreTokenizer) preTokenize(in []piece) []piece {
	return splitPieces(in, charFinder(isBertPunct), p.behavior, false)
}

type sequencePreTokenizer []preTokenizer

func (seq sequencePreTokenizer) preTokenize(in []piece) []piece {
	for _, p := range seq {
		in = p.preTokenize(in)
	}
	return in
}

type preTokenizerJSON struct {
	Type             string            `json:"type"`
	Pattern          patternJSON       `json:"pattern"`
	Behavior         string            `json:"behavior"`
	Invert           bool              `json:"invert"`
	AddPrefixSpace   *bool             `json:"add_prefix_space"`
	UseRegex         *bool             `json:"use_regex"`
	Replacement      string            `json:"replacement"`
	PrependScheme    string            `json:"prepend_scheme"`
	Split            *bool             `json:"split"`
	IndividualDigits bool              `json:"individual_digits"`
	PreTokenizers    []json.RawMessage `json:"pretokenizers"`
}

func parsePreTokenizer(raw json.RawMessage) (preTokenizer, error) {
	if isNull(raw) {
		return nil, nil
	}
	var j preTokenizerJSON
	if err := json.Unmarshal(raw, &j); err != nil {
		return nil, fmt.Errorf("cannot parse pre_tokenizer: %w", err)
	}
	switch j.Type {
	case "ByteLevel":
		return byteLevelPreTokenizer{addPrefixSpace: boolOr(j.AddPrefixSpace, true), useRegex: boolOr(j.UseRegex, true)}, nil
	case "Split":
		var pat splitPattern
		switch {
		case j.Pattern.String != nil:
			pat = literalPattern(*j.Pattern.String)
		case j.Pattern.Regex != nil:
			p, err := compileSplitRegex(*j.Pattern.Regex)
			if err != nil {
				return nil, err
			}
			pat = p
		default:
			return nil, fmt.Errorf("pre_tokenizer Split has no pattern")
		}
		b, err := parseBehavior(j.Behavior)
		if err != nil {
			return nil, err
		}
		return splitPreTokenizer{pattern: pat, behavior: b, invert: j.Invert}, nil
	case "Metaspace":
		scheme := j.PrependScheme
		if scheme == "" {
			scheme = "always"
			if j.AddPrefixSpace != nil && !*j.AddPrefixSpace {
				scheme = "never"
			}
		}
		if scheme != "always" && scheme != "first" && scheme != "never" {
			return nil, fmt.Errorf("unsupported Metaspace prepend_scheme %q", scheme)
		}
		if utf8.RuneCountInString(j.Replacement) != 1 {
			return nil, fmt.Errorf("unsupported Metaspace replacement %q: must be one character", j.Replacement)
		}
		return metaspacePreTokenizer{replacement: j.Replacement, prepend: scheme, split: boolOr(j.Split, true)}, nil
	case "BertPreTokenizer":
		return bertPreTokenizer{}, nil
	case "Whitespace":
		return whitespacePreTokenizer{}, nil
	case "WhitespaceSplit":
		return whitespaceSplitPreTokenizer{}, nil
	case "Digits":
		return digitsPreTokenizer{individual: j.IndividualDigits}, nil
	case "Punctuation":
		b := behIsolated
		if j.Behavior != "" {
			var err error
			if b, err = parseBehavior(j.Behavior); err != nil {
				return nil, err
			}
		}
		return punctuationPreTokenizer{b}, nil
	case "Sequence":
		var seq sequencePreTokenizer
		for _, r := range j.PreTokenizers {
			p, err := parsePreTokenizer(r)
			if err != nil {
				return nil, err
			}
			if p != nil {
				seq = append(seq, p)
			}
		}
		return seq, nil
	case "":
		return nil, fmt.Errorf("pre_tokenizer has no type")
	default:
		return nil, fmt.Errorf("unsupported pre_tokenizer %q", j.Type)
	}
}
