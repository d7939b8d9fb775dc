package tok

import "strings"

// TokenBytes is the bytes token id stands for in generated text, as a
// grammar engine matches them: a byte-level token's bytes (a piece of a
// UTF-8 character included, which Decode would turn into U+FFFD), a
// byte-fallback token's one byte, a SentencePiece piece with its space
// marks as spaces. special reports a special token (its text is its name,
// which generated text never spells). ok is false for an id with no token.
func (t *Tokenizer) TokenBytes(id int32) (b []byte, special, ok bool) {
	s, ok := t.IDToToken(id)
	if !ok {
		return nil, false, false
	}
	if t.IsSpecial(id) {
		return []byte(s), true, true
	}
	for _, a := range t.added.tokens {
		if a.ID == id {
			return []byte(a.Content), false, true // an added token is its literal text
		}
	}
	return decodeRaw(t.dec, s), false, true
}

// decodeRaw undoes a decoder on one token without the steps that only
// make sense across a whole text (Strip's leading character, Metaspace's
// first-space rule) and without replacing invalid UTF-8.
func decodeRaw(d decoder, s string) []byte {
	switch d := d.(type) {
	case byteLevelDecoder:
		var buf []byte
		for _, r := range s {
			b, ok := runeToByte[r]
			if !ok {
				return []byte(s)
			}
			buf = append(buf, b)
		}
		return buf
	case byteFallbackDecoder:
		if b, ok := byteToken(s); ok {
			return []byte{b}
		}
		return []byte(s)
	case metaspaceDecoder:
		return []byte(strings.ReplaceAll(s, string(d.replacement), " "))
	case replaceDecoder:
		return []byte(strings.ReplaceAll(s, d.pattern, d.content))
	case sequenceDecoder:
		// Each step maps this token's text further; a byte token stops at
		// the byte (Fuse and Strip act between tokens).
		for _, step := range d {
			if _, isFallback := step.(byteFallbackDecoder); isFallback {
				if b, ok := byteToken(s); ok {
					return []byte{b}
				}
				continue
			}
			switch step.(type) {
			case fuseDecoder, stripDecoder:
				continue
			}
			s = string(decodeRaw(step, s))
		}
		return []byte(s)
	case nil:
		return []byte(s)
	default:
		// WordPiece, BPE suffixes: the text Decode gives for the token alone.
		return []byte(strings.Join(d.decodeChain([]string{s}), ""))
	}
}
