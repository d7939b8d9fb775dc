package mlx

import (
	"errors"
	"runtime"
)

// The native pack carries a constraint engine for structured output
// (llguidance, linked into the shim; native/llg): a Matcher says which tokens
// a grammar allows next. It touches no MLX state, so unlike the rest of this
// package its calls run on any goroutine — each locks its OS thread only for
// the call and the read of the shim's thread-local error. A Matcher is used
// by one goroutine at a time; a GrammarTokenizer is shared.

// Grammar kinds a Matcher reads.
const (
	GrammarJSONSchema = "json_schema" // a JSON Schema, as JSON text
	GrammarRegex      = "regex"
	GrammarLark       = "lark"       // llguidance's Lark dialect
	GrammarGuidance   = "llguidance" // llguidance's own JSON grammar format
)

// GrammarVersion is the bundled engine's version ("llguidance@1.9.1 ...").
func GrammarVersion() string {
	if !loaded.Load() {
		return ""
	}
	return fn.grammarVersion()
}

// GrammarTokenizer is a model's vocabulary as the engine sees it: built once
// from tokenizer.json and shared by every Matcher of that model.
type GrammarTokenizer struct {
	h uintptr
}

// grammarCall runs one shim call with its OS thread locked, so check reads
// the error that call left.
func grammarCall(op string, f func() int32) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return check(op, f())
}

// NewGrammarTokenizer reads the vocabulary from tokenizer.json. vocab is the
// model's vocabulary size (its logits' width), which may exceed the
// tokenizer's: ids past the tokenizer's are never allowed. eos are the ids
// that end generation; a grammar that is complete allows them.
func NewGrammarTokenizer(tokenizerJSON []byte, vocab int, eos []int32) (*GrammarTokenizer, error) {
	const op = "grammar_tokenizer"
	if !loaded.Load() {
		return nil, ErrNotLoaded
	}
	if len(eos) == 0 {
		return nil, argError(op, "no end-of-sequence token")
	}
	var h uintptr
	err := grammarCall(op, func() int32 {
		return fn.grammarTokenizerNew(string(tokenizerJSON), int32(vocab), &eos[0], int32(len(eos)), &h)
	})
	if err != nil {
		return nil, err
	}
	return &GrammarTokenizer{h: h}, nil
}

// NewGrammarTokenizerFromVocab builds the engine's vocabulary from each
// token's bytes (tokens[i] for id i; a special token is 0xFF followed by its
// name): the way for a tokenizer without a tokenizer.json (a GGUF's), and
// mlxgo's one way for all (tok.Tokenizer.TokenBytes).
func NewGrammarTokenizerFromVocab(tokens [][]byte, eos []int32) (*GrammarTokenizer, error) {
	const op = "grammar_tokenizer"
	if !loaded.Load() {
		return nil, ErrNotLoaded
	}
	if len(eos) == 0 || len(tokens) == 0 {
		return nil, argError(op, "no end-of-sequence token or an empty vocabulary")
	}
	lens := make([]uint32, len(tokens))
	var flat []byte
	for i, b := range tokens {
		lens[i] = uint32(len(b))
		flat = append(flat, b...)
	}
	var p *byte
	if len(flat) > 0 {
		p = &flat[0]
	}
	var h uintptr
	err := grammarCall(op, func() int32 {
		return fn.grammarTokenizerVocab(&lens[0], p, int32(len(tokens)), &eos[0], int32(len(eos)), &h)
	})
	if err != nil {
		return nil, err
	}
	return &GrammarTokenizer{h: h}, nil
}

// Close frees the tokenizer; its matchers must be closed first.
func (t *GrammarTokenizer) Close() {
	if t != nil && t.h != 0 {
		fn.grammarTokenizerFree(t.h)
		t.h = 0
	}
}

// Validate checks a grammar without building a matcher. A grammar the engine
// accepts with a reservation (a schema keyword it ignores, say) returns that
// warning and no error.
func (t *GrammarTokenizer) Validate(kind, grammar string) (warning string, err error) {
	var w int32
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := check("grammar_validate", fn.grammarValidate(t.h, kind, grammar, &w)); err != nil {
		return "", err
	}
	if w != 0 {
		return fn.lastError(), nil
	}
	return "", nil
}

// Matcher is one generation's constraint state.
type Matcher struct {
	h     uintptr
	words int
}

// ErrMatcherClosed is a call on a closed Matcher.
var ErrMatcherClosed = errors.New("grammar matcher is closed")

// NewMatcher compiles grammar (of kind, one of the Grammar* constants). An
// invalid grammar is an error with the engine's message.
func (t *GrammarTokenizer) NewMatcher(kind, grammar string) (*Matcher, error) {
	var h uintptr
	if err := grammarCall("matcher_new", func() int32 { return fn.matcherNew(t.h, kind, grammar, &h) }); err != nil {
		return nil, err
	}
	return newMatcher(h)
}

func newMatcher(h uintptr) (*Matcher, error) {
	var words uintptr
	if err := grammarCall("matcher_mask_words", func() int32 { return fn.matcherMaskWords(h, &words) }); err != nil {
		fn.matcherFree(h)
		return nil, err
	}
	return &Matcher{h: h, words: int(words)}, nil
}

// MaskWords is the length of a mask: one bit per token, 32 to a word.
func (m *Matcher) MaskWords() int { return m.words }

// Mask writes the tokens allowed next into dst (MaskWords words): bit i%32 of
// word i/32 is set when token i is allowed.
func (m *Matcher) Mask(dst []uint32) error {
	if m.h == 0 {
		return ErrMatcherClosed
	}
	if len(dst) < m.words {
		return argError("matcher_mask", "mask of %d words, need %d", len(dst), m.words)
	}
	return grammarCall("matcher_mask", func() int32 { return fn.matcherMask(m.h, &dst[0], uintptr(m.words)) })
}

// Consume advances the grammar by one sampled token; a token the grammar
// does not allow is an error.
func (m *Matcher) Consume(token int32) error {
	if m.h == 0 {
		return ErrMatcherClosed
	}
	return grammarCall("matcher_consume", func() int32 { return fn.matcherConsume(m.h, token) })
}

// Rollback undoes the last n consumed tokens.
func (m *Matcher) Rollback(n int) error {
	if m.h == 0 {
		return ErrMatcherClosed
	}
	return grammarCall("matcher_rollback", func() int32 { return fn.matcherRollback(m.h, int32(n)) })
}

// State reports whether the text so far is a complete match (accepting: the
// end token is allowed) and whether the grammar allows nothing more
// (stopped).
func (m *Matcher) State() (accepting, stopped bool, err error) {
	if m.h == 0 {
		return false, false, ErrMatcherClosed
	}
	var a, s int32
	err = grammarCall("matcher_state", func() int32 { return fn.matcherState(m.h, &a, &s) })
	return a != 0, s != 0, err
}

// Clone copies the state, for a second row with the same constraint.
func (m *Matcher) Clone() (*Matcher, error) {
	if m.h == 0 {
		return nil, ErrMatcherClosed
	}
	var h uintptr
	if err := grammarCall("matcher_clone", func() int32 { return fn.matcherClone(m.h, &h) }); err != nil {
		return nil, err
	}
	return newMatcher(h)
}

// Close frees the matcher.
func (m *Matcher) Close() {
	if m != nil && m.h != 0 {
		fn.matcherFree(m.h)
		m.h = 0
	}
}
