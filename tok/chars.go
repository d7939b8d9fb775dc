package tok

import (
	_ "embed"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// chartables.txt holds character classes exactly as the pinned Hugging Face
// tokenizers sees them; its Rust crates use older Unicode versions than Go's
// unicode package, and parity means agreeing on every code point.
//
//go:embed chartables.txt
var charTablesText string

type runeRange struct{ lo, hi rune }

type charTables struct {
	ctrl, punc, mark, nsm []runeRange
	lower                 map[rune]string
}

var (
	charOnce sync.Once
	chars    charTables
)

func loadCharTables() *charTables {
	charOnce.Do(func() {
		chars.lower = map[rune]string{}
		hex := func(s string) rune { v, _ := strconv.ParseUint(s, 16, 32); return rune(v) }
		for _, line := range strings.Split(charTablesText, "\n") {
			f := strings.Fields(line)
			if len(f) < 2 || f[0] == "#" {
				continue
			}
			if f[0] == "lower" {
				var b strings.Builder
				for _, s := range f[2:] {
					b.WriteRune(hex(s))
				}
				chars.lower[hex(f[1])] = b.String()
				continue
			}
			lo, hi, _ := strings.Cut(f[1], "-")
			r := runeRange{hex(lo), hex(hi)}
			switch f[0] {
			case "ctrl":
				chars.ctrl = append(chars.ctrl, r)
			case "punc":
				chars.punc = append(chars.punc, r)
			case "mark":
				chars.mark = append(chars.mark, r)
			case "nsm":
				chars.nsm = append(chars.nsm, r)
			}
		}
	})
	return &chars
}

func inRanges(rs []runeRange, r rune) bool {
	i := sort.Search(len(rs), func(i int) bool { return rs[i].hi >= r })
	return i < len(rs) && rs[i].lo <= r
}

// isBertControl reports whether BertNormalizer's clean_text drops r.
func isBertControl(r rune) bool {
	if r < 0x80 {
		return r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == 0x7f
	}
	return inRanges(loadCharTables().ctrl, r)
}

// isBertPunct reports whether BertPreTokenizer and Punctuation isolate r.
func isBertPunct(r rune) bool {
	if r < 0x80 {
		return r > ' ' && r < 0x7f && !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}
	return inRanges(loadCharTables().punc, r)
}

// isAccentMark reports whether StripAccents removes r.
func isAccentMark(r rune) bool {
	return r >= 0x300 && inRanges(loadCharTables().mark, r)
}

// isNonspacingMark reports whether BertNormalizer's strip_accents removes r
// (it drops only nonspacing marks, unlike StripAccents).
func isNonspacingMark(r rune) bool {
	return r >= 0x300 && inRanges(loadCharTables().nsm, r)
}

// lowerString applies Lowercase the way tokenizers does: each character's
// full lowercase mapping, with no context (so no final-sigma rule).
func lowerString(s string) string {
	t := loadCharTables()
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		if r < 0x80 {
			if r >= 'A' && r <= 'Z' {
				r += 'a' - 'A'
			}
			b.WriteByte(byte(r))
			continue
		}
		if lo, ok := t.lower[r]; ok {
			b.WriteString(lo)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// isWhitespace is Rust's char::is_whitespace (the White_Space property),
// which Go's unicode.IsSpace implements too.
func isWhitespace(r rune) bool {
	if r < 0x80 {
		return r == ' ' || r >= '\t' && r <= '\r'
	}
	return unicode.IsSpace(r)
}

// isChineseChar is BertNormalizer's CJK block test.
func isChineseChar(r rune) bool {
	return r >= 0x4E00 && r <= 0x9FFF || r >= 0x3400 && r <= 0x4DBF ||
		r >= 0x20000 && r <= 0x2A6DF || r >= 0x2A700 && r <= 0x2B73F ||
		r >= 0x2B740 && r <= 0x2B81F || r >= 0x2B920 && r <= 0x2CEAF ||
		r >= 0xF900 && r <= 0xFAFF || r >= 0x2F800 && r <= 0x2FA1F
}

// byteToRune and runeToByte are GPT-2's reversible map from bytes to
// printable characters used by byte-level BPE.
var (
	byteToRune [256]rune
	byteToStr  [256]string
	runeToByte = map[rune]byte{}
)

func init() {
	n := 0
	for b := 0; b < 256; b++ {
		printable := b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE && b <= 0xFF
		if printable {
			byteToRune[b] = rune(b)
		} else {
			byteToRune[b] = rune(256 + n)
			n++
		}
		byteToStr[b] = string(byteToRune[b])
		runeToByte[byteToRune[b]] = byte(b)
	}
}

// lossyUTF8 converts bytes to a string the way Rust's String::from_utf8_lossy
// does: each maximal invalid subpart becomes one U+FFFD. Go's own conversion
// (strings.ToValidUTF8) collapses whole runs instead, which would differ.
func lossyUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var out strings.Builder
	out.Grow(len(b) + 8)
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r != utf8.RuneError || size > 1 {
			out.Write(b[i : i+size])
			i += size
			continue
		}
		out.WriteString("\uFFFD")
		i += invalidPrefixLen(b[i:])
	}
	return out.String()
}

// invalidPrefixLen is the length of the maximal subpart of an ill-formed
// sequence at the start of b (Unicode §3.9, "U+FFFD substitution of maximal
// subparts"): a lead byte followed by as many valid continuation bytes as it
// allows, before the sequence breaks.
func invalidPrefixLen(b []byte) int {
	c := b[0]
	var need int
	lo, hi := byte(0x80), byte(0xBF)
	switch {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c >= 0xE1 && c <= 0xEC || c == 0xEE || c == 0xEF:
		need = 2
	case c == 0xED:
		need, hi = 2, 0x9F
	case c == 0xF0:
		need, lo = 3, 0x90
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	case c == 0xF4:
		need, hi = 3, 0x8F
	default:
		return 1
	}
	n := 1
	for k := 0; k < need && n < len(b); k++ {
		x := b[n]
		if k > 0 {
			lo, hi = 0x80, 0xBF
		}
		if x < lo || x > hi {
			break
		}
		n++
	}
	return n
}
