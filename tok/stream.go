package tok

import (
	"strings"
)

// Detokenizer turns a stream of generated ids into text as soon as the text
// is final: complete UTF-8 (byte-level and byte-fallback tokens can split a
// character) and not rewritten by later tokens (SentencePiece's leading
// space, WordPiece joins). The concatenation of everything Next and Flush
// return equals Decode of all the ids.
//
// It decodes a short window of ids — those since the last emitted text plus
// the ids of the emission before as context, so that decoders that treat the
// first token specially (Metaspace, Strip, WordPiece) see a continuation and
// the window never starts inside a split character — so each step costs
// O(window), not O(everything so far). It is not safe for concurrent use.
type Detokenizer struct {
	t           *Tokenizer
	skipSpecial bool
	ids         []int32 // all ids so far
	// emitted is Decode(ids[:done]) as returned so far (a prefix of the full
	// text); a Builder because += would copy all of it for every token.
	emitted strings.Builder
	done    int // ids fully represented in emitted
	context int // where the window starts: the emission point before done
}

// NewDetokenizer starts a stream; skipSpecial drops special tokens as Decode does.
func (t *Tokenizer) NewDetokenizer(skipSpecial bool) *Detokenizer {
	return &Detokenizer{t: t, skipSpecial: skipSpecial}
}

// Next adds one id and returns the text that became final (often "").
func (d *Detokenizer) Next(id int32) string {
	d.ids = append(d.ids, id)
	return d.advance(false)
}

// Flush returns whatever text is still pending (an incomplete character
// becomes U+FFFD, as in Decode) and resets nothing: call it once at the end.
func (d *Detokenizer) Flush() string { return d.advance(true) }

// Text is everything emitted so far.
func (d *Detokenizer) Text() string { return d.emitted.String() }

func (d *Detokenizer) advance(final bool) string {
	if d.done == len(d.ids) {
		return ""
	}
	start := d.context
	prefix := d.t.Decode(d.ids[start:d.done], d.skipSpecial)
	full := d.t.Decode(d.ids[start:], d.skipSpecial)
	if !strings.HasPrefix(full, prefix) {
		// The decoder rewrote text of the context ids (e.g. WordPiece
		// cleanup across tokens); only a decode of everything is exact.
		return d.resync(final)
	}
	tail := full[len(prefix):]
	if !final && (tail == "" || strings.HasSuffix(tail, "\uFFFD")) {
		return ""
	}
	d.emitted.WriteString(tail)
	d.context, d.done = d.done, len(d.ids)
	return tail
}

// resync decodes every id and emits what extends the text already returned.
func (d *Detokenizer) resync(final bool) string {
	full := d.t.Decode(d.ids, d.skipSpecial)
	emitted := d.emitted.String()
	if !strings.HasPrefix(full, emitted) || !final && strings.HasSuffix(full, "\uFFFD") {
		return ""
	}
	tail := full[len(emitted):]
	d.emitted.WriteString(tail)
	d.context, d.done = d.done, len(d.ids)
	return tail
}
