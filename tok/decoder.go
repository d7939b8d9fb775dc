package tok

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// A decoder turns token strings back into text. Like tokenizers'
// decode_chain it maps a list to a list; the results are joined at the end.
type decoder interface {
	decodeChain(tokens []string) []string
}

// byteLevelDecoder maps GPT-2 characters back to bytes; a token with any
// other character keeps its UTF-8 bytes. Invalid UTF-8 becomes U+FFFD.
type byteLevelDecoder struct{}

func (byteLevelDecoder) decodeChain(tokens []string) []string {
	var buf []byte
	for _, t := range tokens {
		mark := len(buf)
		ok := true
		for _, r := range t {
			b, isByte := runeToByte[r]
			if !isByte {
				ok = false
				break
			}
			buf = append(buf, b)
		}
		if !ok {
			buf = append(buf[:mark], t...)
		}
	}
	return []string{lossyUTF8(buf)}
}

// metaspaceDecoder turns the replacement back into spaces, dropping those of
// the first token unless prepend_scheme is "never".
type metaspaceDecoder struct {
	replacement rune
	prepend     string
}

func (d metaspaceDecoder) decodeChain(tokens []string) []string {
	out := make([]string, len(tokens))
	for i, t := range tokens {
		var b strings.Builder
		for _, r := range t {
			if r == d.replacement {
				if i == 0 && d.prepend != "never" {
					continue
				}
				r = ' '
			}
			b.WriteRune(r)
		}
		out[i] = b.String()
	}
	return out
}

// byteFallbackDecoder turns runs of <0xXX> tokens into their UTF-8 text, or
// one U+FFFD per byte when the run is not valid UTF-8.
type byteFallbackDecoder struct{}

func byteToken(t string) (byte, bool) {
	if len(t) != 6 || !strings.HasPrefix(t, "<0x") || t[5] != '>' {
		return 0, false
	}
	var v byte
	for _, c := range []byte(t[3:5]) {
		switch {
		case c >= '0' && c <= '9':
			v = v*16 + c - '0'
		case c >= 'a' && c <= 'f':
			v = v*16 + c - 'a' + 10
		case c >= 'A' && c <= 'F':
			v = v*16 + c - 'A' + 10
		default:
			return 0, false
		}
	}
	return v, true
}

func (byteFallbackDecoder) decodeChain(tokens []string) []string {
	out := make([]string, 0, len(tokens))
	var pending []byte
	flush := func() {
		if len(pending) == 0 {
			return
		}
		if utf8.Valid(pending) {
			out = append(out, string(pending))
		} else {
			for range pending {
				out = append(out, "\uFFFD")
			}
		}
		pending = pending[:0]
	}
	for _, t := range tokens {
		if b, ok := byteToken(t); ok {
			pending = append(pending, b)
			continue
		}
		flush()
		out = append(out, t)
	}
	flush()
	return out
}

type fuseDecoder struct{}

func (fuseDecoder) decodeChain(tokens []string) []string { return []string{strings.Join(tokens, "")} }

// stripDecoder removes up to start leading and stop trailing copies of content from each token.
type stripDecoder struct {
	content     rune
	start, stop int
}

func (d stripDecoder) decodeChain(tokens []string) []string {
	out := make([]string, len(tokens))
	for i, t := range tokens {
		rs := []rune(t)
		lo := 0
		for k := 0; k < d.start && k < len(rs) && rs[k] == d.content; k++ {
			lo = k + 1
		}
		hi := len(rs)
		for k := 0; k < d.stop; k++ {
			idx := len(rs) - k - 1
			if idx < 0 || rs[idx] != d.content {
				break
			}
			hi = idx
		}
		if hi < lo {
			hi = lo
		}
		out[i] = string(rs[lo:hi])
	}
	return out
}

// wordPieceDecoder joins "##" continuations and puts spaces between words.
type wordPieceDecoder struct {
	prefix  string
	cleanup bool
}

func (d wordPieceDecoder) decodeChain(tokens []string) []string {
	out := make([]string, len(tokens))
	for i, t := range tokens {
		if i != 0 {
			if s, ok := strings.CutPrefix(t, d.prefix); ok {
				t = s
			} else {
				t = " " + t
			}
		}
		if d.cleanup {
			t = cleanupSpaces(t)
		}
		out[i] = t
	}
	return out
}

var cleanupReplacer = []struct{ from, to string }{
	{" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
	{" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"},
}

// cleanupSpaces is tokenizers' wordpiece cleanup: the replacements run one
// after the other, in this order.
func cleanupSpaces(s string) string {
	for _, r := range cleanupReplacer {
		s = strings.ReplaceAll(s, r.from, r.to)
	}
	return s
}

type replaceDecoder struct{ pattern, content string }

func (d replaceDecoder) decodeChain(tokens []string) []string {
	out := make([]string, len(tokens))
	for i, t := range tokens {
		out[i] = strings.ReplaceAll(t, d.pattern, d.content)
	}
	return out
}

// bpeDecoder replaces the end-of-word suffix with a space (none after the last token).
type bpeDecoder struct{ suffix string }

func (d bpeDecoder) decodeChain(tokens []string) []string {
	out := make([]string, len(tokens))
	for i, t := range tokens {
		repl := " "
		if i == len(tokens)-1 {
			repl = ""
		}
		out[i] = strings.ReplaceAll(t, d.suffix, repl)
	}
	return out
}

type sequenceDecoder []decoder

func (seq sequenceDecoder) decodeChain(tokens []string) []string {
	for _, d := range seq {
		tokens = d.decodeChain(tokens)
	}
	return tokens
}

type decoderJSON struct {
	Type          string            `json:"type"`
	Replacement   string            `json:"replacement"`
	PrependScheme string            `json:"prepend_scheme"`
	AddPrefix     *bool             `json:"add_prefix_space"`
	Content       string            `json:"content"`
	Start         int               `json:"start"`
	Stop          int               `json:"stop"`
	Prefix        *string           `json:"prefix"`
	Cleanup       *bool             `json:"cleanup"`
	Pattern       patternJSON       `json:"pattern"`
	Suffix        *string           `json:"suffix"`
	Decoders      []json.RawMessage `json:"decoders"`
}

func parseDecoder(raw json.RawMessage) (decoder, error) {
	if isNull(raw) {
		return nil, nil
	}
	var j decoderJSON
	if err := json.Unmarshal(raw, &j); err != nil {
		return nil, fmt.Errorf("cannot parse decoder: %w", err)
	}
	switch j.Type {
	case "ByteLevel":
		return byteLevelDecoder{}, nil
	case "Metaspace":
		scheme := j.PrependScheme
		if scheme == "" {
			scheme = "always"
			if j.AddPrefix != nil && !*j.AddPrefix {
				scheme = "never"
			}
		}
		r, size := utf8.DecodeRuneInString(j.Replacement)
		if size == 0 || size != len(j.Replacement) {
			return nil, fmt.Errorf("unsupported Metaspace decoder replacement %q", j.Replacement)
		}
		return metaspaceDecoder{replacement: r, prepend: scheme}, nil
	case "ByteFallback":
		return byteFallbackDecoder{}, nil
	case "Fuse":
		return fuseDecoder{}, nil
	case "Strip":
		r, size := utf8.DecodeRuneInString(j.Content)
		if size == 0 || size != len(j.Content) {
			return nil, fmt.Errorf("unsupported Strip decoder content %q", j.Content)
		}
		return stripDecoder{content: r, start: j.Start, stop: j.Stop}, nil
	case "WordPiece":
		prefix := "##"
		if j.Prefix != nil {
			prefix = *j.Prefix
		}
		return wordPieceDecoder{prefix: prefix, cleanup: boolOr(j.Cleanup, true)}, nil
	case "Replace":
		if j.Pattern.String == nil {
			return nil, fmt.Errorf("unsupported decoder: Replace with a regex pattern")
		}
		return replaceDecoder{*j.Pattern.String, j.Content}, nil
	case "BPEDecoder":
		suffix := "</w>"
		if j.Suffix != nil {
			suffix = *j.Suffix
		}
		return bpeDecoder{suffix}, nil
	case "Sequence":
		var seq sequenceDecoder
		for _, r := range j.Decoders {
			d, err := parseDecoder(r)
			if err != nil {
				return nil, err
			}
			if d != nil {
				seq = append(seq, d)
			}
		}
		return seq, nil
	case "":
		return nil, fmt.Errorf("decoder has no type")
	default:
		return nil, fmt.Errorf("unsupported decoder %q", j.Type)
	}
}
