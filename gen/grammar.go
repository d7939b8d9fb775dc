package gen

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/tok"
)

// Structured output: a grammar (a JSON schema, a regex, a Lark grammar) is a
// logits processor that, each step, lets through only the tokens the grammar
// allows next. The engine is llguidance in the native pack (mlx.Matcher);
// this file turns its token masks into a processor.

// Grammars compiles constraints against one model's vocabulary. The engine's
// view of the vocabulary — each token's bytes, from the tokenizer — is built
// on first use (under a second for Qwen3's 151k tokens), then shared by every
// grammar of that model.
type Grammars struct {
	t     *tok.Tokenizer
	vocab int
	eos   []int32

	once sync.Once
	tok  *mlx.GrammarTokenizer
	err  error
}

// NewGrammars is the constraint compiler for a model with tokenizer t, whose
// logits are vocab wide (ids past the tokenizer's are never allowed), and
// whose generation ends at eos. Any tokenizer mlxgo loads will do (a GGUF's
// too): the engine gets tok's TokenBytes.
func NewGrammars(t *tok.Tokenizer, vocab int, eos []int32) *Grammars {
	return &Grammars{t: t, vocab: vocab, eos: append([]int32(nil), eos...)}
}

// vocabBytes is each id's bytes as the engine reads them: a special token
// marked by a leading 0xFF.
func vocabBytes(t *tok.Tokenizer, vocab int) [][]byte {
	out := make([][]byte, vocab)
	for id := range out {
		b, special, ok := t.TokenBytes(int32(id))
		switch {
		case !ok:
		case special:
			out[id] = append([]byte{0xFF}, b...)
		default:
			out[id] = b
		}
	}
	return out
}

// ErrGrammar marks a grammar the engine rejects (the caller's error, a 400).
var ErrGrammar = errors.New("invalid grammar")

// Grammar is one checked constraint; each generation (each row of a batch)
// compiles its own state from it when it starts (a few milliseconds), so a
// Grammar holds nothing native and needs no Close: requests queued behind
// others may hold one for as long as they like.
type Grammar struct {
	Kind string // mlx.GrammarJSONSchema, mlx.GrammarRegex, mlx.GrammarLark, mlx.GrammarGuidance
	src  string // what the engine reads (a JSON schema with JSONLayout spliced in)
	g    *Grammars
}

// Compile checks and compiles src, a grammar of the given kind. A grammar
// the engine rejects is an ErrGrammar carrying its message.
func (g *Grammars) Compile(kind, src string) (*Grammar, error) {
	g.once.Do(func() {
		if len(g.eos) == 0 {
			g.err = errors.New("cannot constrain generation: the model has no end-of-sequence token")
			return
		}
		g.tok, g.err = mlx.NewGrammarTokenizerFromVocab(vocabBytes(g.t, g.vocab), g.eos)
	})
	if g.err != nil {
		return nil, g.err
	}
	gr := &Grammar{Kind: kind, src: src, g: g}
	if kind == mlx.GrammarJSONSchema {
		var err error
		if gr.src, err = compactJSON(src); err != nil {
			return nil, err
		}
	}
	m, err := gr.matcher()
	if err != nil {
		return nil, err
	}
	m.Close()
	return gr, nil
}

// Source is the grammar as the engine reads it: Compile(g.Kind,
// g.Source()) with the same vocabulary gives the same constraint (a
// distributed model's other ranks compile it so).
func (gr *Grammar) Source() string { return gr.src }

// matcher compiles a fresh state; the engine's rejection is an ErrGrammar.
func (gr *Grammar) matcher() (*mlx.Matcher, error) {
	m, err := gr.g.tok.NewMatcher(gr.Kind, gr.src)
	if err != nil {
		var me *mlx.Error
		if errors.As(err, &me) {
			return nil, fmt.Errorf("%w: %s", ErrGrammar, me.Msg)
		}
		return nil, err
	}
	return m, nil
}

// JSONLayout is how constrained JSON is laid out (llguidance's x-guidance
// options; serve's tool-call grammar uses it too): no free whitespace, and
// Python's json.dumps separators. The engine's default lets any run of
// whitespace between items, which a model can fill until max_tokens (a
// random-logits walk does); OpenAI's structured outputs are compact too.
// A schema that sets its own "x-guidance" options keeps them.
const JSONLayout = `{"whitespace_flexible":false,"item_separator":", ","key_separator":": "}`

func compactJSON(schema string) (string, error) {
	// Spliced into the text rather than re-marshalled: the order of a
	// schema's properties is the order they are generated in, and Go's maps
	// would sort them.
	s := strings.TrimSpace(schema)
	switch s {
	case "true":
		s = "{}"
	case "false":
		s = `{"not":{}}`
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &top); err != nil {
		return "", fmt.Errorf("%w: a JSON schema is an object or a boolean: %v", ErrGrammar, err)
	}
	if _, set := top["x-guidance"]; set {
		return s, nil
	}
	rest := strings.TrimSpace(s[1:])
	sep := ","
	if rest == "}" {
		sep = ""
	}
	return `{"x-guidance":` + JSONLayout + sep + rest, nil
}

// Processor starts one generation's constraint: a LogitsProcessor to run
// last, after mlx-lm's processors. Close it when the generation ends.
func (gr *Grammar) Processor() (*GrammarProcessor, error) {
	m, err := gr.matcher()
	if err != nil {
		return nil, err
	}
	return &GrammarProcessor{m: m, mask: make([]uint32, m.MaskWords()), allow: make([]bool, gr.g.vocab), eos: gr.g.eos}, nil
}

// GrammarProcessor masks the logits of tokens the grammar does not allow
// next with -inf. It is called once per step, in order: the first call
// (after the prompt) only masks; each later one first advances the grammar
// by the token sampled in the step before, read from the history, which
// makes a constrained generation wait for each token (no step runs ahead).
type GrammarProcessor struct {
	m     *mlx.Matcher
	mask  []uint32
	allow []bool
	eos   []int32
	steps int
}

// Context is 1: the processor reads the last token.
func (p *GrammarProcessor) Context() int { return 1 }

// Process implements LogitsProcessor.
func (p *GrammarProcessor) Process(tokens, logits *mlx.Array) *mlx.Array {
	if err := p.advance(tokens); err != nil {
		return mlx.ErrorArray(fmt.Errorf("cannot constrain generation: %w", err))
	}
	v := logits.Dim(logits.Ndim() - 1)
	if v > len(p.allow) {
		return mlx.ErrorArray(fmt.Errorf("cannot constrain generation: logits of %d tokens, grammar of %d", v, len(p.allow)))
	}
	for i := range v {
		p.allow[i] = p.mask[i>>5]&(1<<(i&31)) != 0
	}
	allow := mlx.FromSlice(p.allow[:v], 1, v)
	return mlx.Where(allow, logits, mlx.Scalar(float32(math.Inf(-1)), logits.Dtype()))
}

func (p *GrammarProcessor) advance(tokens *mlx.Array) error {
	_, stopped, err := p.m.State()
	if err != nil {
		return err
	}
	if p.steps > 0 && !stopped {
		last := lastTokens(tokens, 1)
		if err := mlx.Eval(last); err != nil {
			return err
		}
		ids, err := last.Int32s()
		if err != nil {
			return err
		}
		if err := p.m.Consume(ids[len(ids)-1]); err != nil {
			return err
		}
		if _, stopped, err = p.m.State(); err != nil {
			return err
		}
	}
	p.steps++
	if stopped {
		// Nothing more can follow: the grammar is complete, or it took an
		// end token in a step run ahead of the row's end. Only the end
		// tokens are allowed (the engine has no mask once stopped), and
		// whatever comes after them is not fed to it.
		clear(p.mask)
		for _, id := range p.eos {
			if int(id>>5) < len(p.mask) {
				p.mask[id>>5] |= 1 << (id & 31)
			}
		}
		return nil
	}
	return p.m.Mask(p.mask)
}

// Done reports whether what was generated is a complete match.
func (p *GrammarProcessor) Done() bool {
	acc, _, err := p.m.State()
	return err == nil && acc
}

// Close frees the generation's state.
func (p *GrammarProcessor) Close() { p.m.Close() }
