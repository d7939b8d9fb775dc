package tok

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mlxgo/mlxgo/tok/unorm"
)

// A normalizer rewrites text before it is split. Only the resulting string
// matters for token ids, so alignment tracking is left out.
type normalizer interface {
	normalize(s string) string
}

type unicodeNormalizer struct{ form unorm.Form }

func (n unicodeNormalizer) normalize(s string) string { return n.form.String(s) }

type lowercaseNormalizer struct{}

func (lowercaseNormalizer) normalize(s string) string { return lowerString(s) }

// stripAccentsNormalizer removes combining marks; like tokenizers it does not
// decompose first (configs pair it with NFD for that).
type stripAccentsNormalizer struct{}

func (stripAccentsNormalizer) normalize(s string) string {
	return strings.Map(func(r rune) rune {
		if isAccentMark(r) {
			return -1
		}
		return r
	}, s)
}

// bertNormalizer is BertNormalizer: clean control characters, pad CJK
// characters with spaces, strip accents (NFD then drop marks), lowercase.
type bertNormalizer struct {
	cleanText, chineseChars, stripAccents, lowercase bool
}

func (n bertNormalizer) normalize(s string) string {
	if n.cleanText || n.chineseChars {
		var b strings.Builder
		b.Grow(len(s))
		for _, r := range s {
			if n.cleanText {
				if r == 0 || r == 0xFFFD || isBertControl(r) {
					continue
				}
				if isWhitespace(r) {
					r = ' '
				}
			}
			if n.chineseChars && isChineseChar(r) {
				b.WriteByte(' ')
				b.WriteRune(r)
				b.WriteByte(' ')
				continue
			}
			b.WriteRune(r)
		}
		s = b.String()
	}
	if n.stripAccents {
		s = strings.Map(func(r rune) rune {
			if isNonspacingMark(r) {
				return -1
			}
			return r
		}, unorm.NFD.String(s))
	}
	if n.lowercase {
		s = lowerString(s)
	}
	return s
}

// stripNormalizer removes leading and/or trailing whitespace.
type stripNormalizer struct{ left, right bool }

func (n stripNormalizer) normalize(s string) string {
	if n.left {
		s = strings.TrimLeftFunc(s, isWhitespace)
	}
	if n.right {
		s = strings.TrimRightFunc(s, isWhitespace)
	}
	return s
}

// replaceNormalizer replaces every literal occurrence of a string.
type replaceNormalizer struct{ pattern, content string }

func (n replaceNormalizer) normalize(s string) string {
	if n.pattern == "" {
		return s
	}
	return strings.ReplaceAll(s, n.pattern, n.content)
}

// prependNormalizer prepends a string to any non-empty text.
type prependNormalizer struct{ prepend string }

func (n prependNormalizer) normalize(s string) string {
	if s == "" {
		return s
	}
	return n.prepend + s
}

type sequenceNormalizer []normalizer

func (seq sequenceNormalizer) normalize(s string) string {
	for _, n := range seq {
		s = n.normalize(s)
	}
	return s
}

// patternJSON is tokenizers' Split/Replace pattern: {"String": ...} or {"Regex": ...}.
type patternJSON struct {
	String *string `json:"String"`
	Regex  *string `json:"Regex"`
}

type normalizerJSON struct {
	Type         string            `json:"type"`
	CleanText    *bool             `json:"clean_text"`
	HandleCJK    *bool             `json:"handle_chinese_chars"`
	StripAccents *bool             `json:"strip_accents"`
	Lowercase    *bool             `json:"lowercase"`
	Left         *bool             `json:"strip_left"`
	Right        *bool             `json:"strip_right"`
	Pattern      patternJSON       `json:"pattern"`
	Content      string            `json:"content"`
	Prepend      string            `json:"prepend"`
	Normalizers  []json.RawMessage `json:"normalizers"`
}

func boolOr(p *bool, def bool) bool {
	if p == nil {
		return def
	}
	return *p
}

// parseNormalizer builds a normalizer from tokenizer.json; an unknown type is
// an error naming it, never a silent no-op.
func parseNormalizer(raw json.RawMessage) (normalizer, error) {
	if isNull(raw) {
		return nil, nil
	}
	var j normalizerJSON
	if err := json.Unmarshal(raw, &j); err != nil {
		return nil, fmt.Errorf("cannot parse normalizer: %w", err)
	}
	switch j.Type {
	case "NFC":
		return unicodeNormalizer{unorm.NFC}, nil
	case "NFD":
		return unicodeNormalizer{unorm.NFD}, nil
	case "NFKC":
		return unicodeNormalizer{unorm.NFKC}, nil
	case "NFKD":
		return unicodeNormalizer{unorm.NFKD}, nil
	case "Lowercase":
		return lowercaseNormalizer{}, nil
	case "StripAccents":
		return stripAccentsNormalizer{}, nil
	case "BertNormalizer":
		lower := boolOr(j.Lowercase, true)
		return bertNormalizer{
			cleanText:    boolOr(j.CleanText, true),
			chineseChars: boolOr(j.HandleCJK, true),
			stripAccents: boolOr(j.StripAccents, lower),
			lowercase:    lower,
		}, nil
	case "Strip":
		return stripNormalizer{left: boolOr(j.Left, true), right: boolOr(j.Right, true)}, nil
	case "Replace":
		if j.Pattern.String == nil {
			return nil, fmt.Errorf("unsupported normalizer: Replace with a regex pattern")
		}
		return replaceNormalizer{*j.Pattern.String, j.Content}, nil
	case "Prepend":
		return prependNormalizer{j.Prepend}, nil
	case "Sequence":
		var seq sequenceNormalizer
		for _, r := range j.Normalizers {
			n, err := parseNormalizer(r)
			if err != nil {
				return nil, err
			}
			if n != nil {
				seq = append(seq, n)
			}
		}
		return seq, nil
	case "":
		return nil, fmt.Errorf("normalizer has no type")
	default:
		return nil, fmt.Errorf("unsupported normalizer %q", j.Type)
	}
}

func isNull(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s == "" || s == "null"
}
