// Package tok implements the tokenizers that mlxgo's models use, in pure Go,
// with token ids identical to Hugging Face tokenizers: BPE (byte-level and
// SentencePiece-style with byte fallback), WordPiece, and the normalizers,
// pre-tokenizers, added tokens, post-processors and decoders around them.
// A tokenizer comes from tokenizer.json (+ tokenizer_config.json) or from GGUF
// metadata.
//
// It must never tokenize differently from the reference silently: anything it
// does not implement is an error at load time that names the component.
package tok

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// model is the core subword model (BPE or WordPiece).
type model interface {
	tokenize(word string, dst []int32) ([]int32, error)
	tokenToID(s string) (int32, bool)
	idToToken(id int32) (string, bool)
	vocabSize() int
}

// Tokenizer encodes text to token ids and decodes ids to text. It is safe for
// concurrent use; Truncation and Padding are plain fields that callers set
// before sharing it.
type Tokenizer struct {
	norm    normalizer
	pre     preTokenizer
	model   model
	post    postProcessor
	dec     decoder
	added   *addedVocab
	config  Config
	maxID   int32
	typeStr string // "BPE" or "WordPiece", for messages

	// Truncation and Padding come from tokenizer.json and apply to every
	// Encode, as in tokenizers' encode; nil disables them.
	Truncation *Truncation
	Padding    *Padding
}

// Truncation limits an encoding to MaxLength ids, special tokens included.
type Truncation struct {
	MaxLength int
	Left      bool // drop ids from the start instead of the end
}

// Padding pads an encoding to Length ids (0: no fixed length) and then to a
// multiple of Multiple (0: none).
type Padding struct {
	Length   int
	Multiple int
	ID       int32
	Left     bool
}

// Load reads a tokenizer from a model directory (tokenizer.json and, when
// present, tokenizer_config.json), from a tokenizer.json file, or from a
// .gguf file's metadata.
func Load(path string) (*Tokenizer, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("cannot load tokenizer: %w", err)
	}
	dir := path
	file := filepath.Join(path, "tokenizer.json")
	if !st.IsDir() {
		if strings.HasSuffix(strings.ToLower(path), ".gguf") {
			return LoadGGUF(path)
		}
		dir, file = filepath.Dir(path), path
	} else if _, err := os.Stat(file); err != nil {
		// A directory with a GGUF file and no tokenizer.json: use the GGUF.
		if ggufs, _ := filepath.Glob(filepath.Join(path, "*.gguf")); len(ggufs) == 1 {
			return LoadGGUF(ggufs[0])
		}
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("cannot load tokenizer: %w", err)
	}
	var cfg Config
	cfgPath := filepath.Join(dir, "tokenizer_config.json")
	if b, err := os.ReadFile(cfgPath); err == nil {
		if cfg, err = ParseConfig(b); err != nil {
			return nil, fmt.Errorf("cannot load tokenizer: %s: %w", cfgPath, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("cannot load tokenizer: %w", err)
	}
	if err := readTemplateFiles(dir, &cfg); err != nil {
		return nil, fmt.Errorf("cannot load tokenizer: %w", err)
	}
	t, err := FromJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	t.config = cfg
	return t, nil
}

type tokenizerJSON struct {
	AddedTokens   []AddedToken    `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
	Model         json.RawMessage `json:"model"`
	Truncation    *struct {
		MaxLength int    `json:"max_length"`
		Direction string `json:"direction"`
	} `json:"truncation"`
	Padding *struct {
		Strategy json.RawMessage `json:"strategy"`
		Dir      string          `json:"direction"`
		PadID    int32           `json:"pad_id"`
		Multiple *int            `json:"pad_to_multiple_of"`
	} `json:"padding"`
}

type modelJSON struct {
	Type     string          `json:"type"`
	Vocab    json.RawMessage `json:"vocab"`
	Merges   json.RawMessage `json:"merges"`
	Unk      *string         `json:"unk_token"`
	FuseUnk  bool            `json:"fuse_unk"`
	Fallback bool            `json:"byte_fallback"`
	Ignore   bool            `json:"ignore_merges"`
	Prefix   *string         `json:"continuing_subword_prefix"`
	Suffix   *string         `json:"end_of_word_suffix"`
	Dropout  *float64        `json:"dropout"`
	MaxChars *int            `json:"max_input_chars_per_word"`
}

// FromJSON builds a tokenizer from the contents of a tokenizer.json.
func FromJSON(data []byte) (*Tokenizer, error) {
	var j tokenizerJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return nil, fmt.Errorf("cannot parse tokenizer.json: %w", err)
	}
	t := &Tokenizer{}
	var err error
	if t.norm, err = parseNormalizer(j.Normalizer); err != nil {
		return nil, err
	}
	if t.pre, err = parsePreTokenizer(j.PreTokenizer); err != nil {
		return nil, err
	}
	if t.post, err = parsePostProcessor(j.PostProcessor); err != nil {
		return nil, err
	}
	if t.dec, err = parseDecoder(j.Decoder); err != nil {
		return nil, err
	}
	if isNull(j.Model) {
		return nil, fmt.Errorf("cannot parse tokenizer.json: no model")
	}
	var mj modelJSON
	if err := json.Unmarshal(j.Model, &mj); err != nil {
		return nil, fmt.Errorf("cannot parse model: %w", err)
	}
	if mj.Type != "BPE" && mj.Type != "WordPiece" && mj.Type != "" {
		return nil, fmt.Errorf("unsupported model %q", mj.Type)
	}
	var vocab map[string]int32
	if err := json.Unmarshal(mj.Vocab, &vocab); err != nil {
		return nil, fmt.Errorf("cannot parse model vocab: %w", err)
	}
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	switch mj.Type {
	case "BPE", "":
		if mj.Type == "" && len(mj.Merges) == 0 {
			return nil, fmt.Errorf("cannot parse model: no type")
		}
		if mj.Dropout != nil && *mj.Dropout > 0 {
			return nil, fmt.Errorf("unsupported model: BPE with dropout %v (not deterministic)", *mj.Dropout)
		}
		merges, err := parseMerges(mj.Merges)
		if err != nil {
			return nil, err
		}
		bpe, err := newBPE(vocab, merges, str(mj.Unk), mj.FuseUnk, mj.Fallback, mj.Ignore, str(mj.Prefix), str(mj.Suffix))
		if err != nil {
			return nil, err
		}
		if byteLevelLast(t.pre) {
			bpe.setByteLevel()
		} else if hasByteLevel(t.pre) {
			return nil, fmt.Errorf("unsupported pre_tokenizer: ByteLevel must come last in a Sequence")
		}
		t.model, t.typeStr = bpe, "BPE"
	case "WordPiece":
		maxChars := 100
		if mj.MaxChars != nil {
			maxChars = *mj.MaxChars
		}
		prefix := "##"
		if mj.Prefix != nil {
			prefix = *mj.Prefix
		}
		unk := "[UNK]"
		if mj.Unk != nil {
			unk = *mj.Unk
		}
		wp, err := newWordPiece(vocab, unk, prefix, maxChars)
		if err != nil {
			return nil, err
		}
		t.model, t.typeStr = wp, "WordPiece"
	default:
		return nil, fmt.Errorf("unsupported model %q", mj.Type)
	}
	t.added = newAddedVocab(j.AddedTokens, t.norm)
	t.maxID = int32(t.model.vocabSize()) - 1
	for _, a := range t.added.tokens {
		t.maxID = max(t.maxID, a.ID)
	}
	if tr := j.Truncation; tr != nil && tr.MaxLength > 0 {
		t.Truncation = &Truncation{MaxLength: tr.MaxLength, Left: tr.Direction == "Left"}
	}
	if p := j.Padding; p != nil {
		pad := &Padding{ID: p.PadID, Left: p.Dir == "Left"}
		var fixed struct{ Fixed int }
		if json.Unmarshal(p.Strategy, &fixed) == nil {
			pad.Length = fixed.Fixed
		}
		if p.Multiple != nil {
			pad.Multiple = *p.Multiple
		}
		t.Padding = pad
	}
	return t, nil
}

// parseMerges accepts both merges encodings: "a b" strings and [a, b] pairs.
func parseMerges(raw json.RawMessage) ([][2]string, error) {
	if isNull(raw) {
		return nil, nil
	}
	var pairs [][2]string
	if err := json.Unmarshal(raw, &pairs); err == nil {
		return pairs, nil
	}
	var strs []string
	if err := json.Unmarshal(raw, &strs); err != nil {
		return nil, fmt.Errorf("cannot parse model merges: %w", err)
	}
	pairs = make([][2]string, len(strs))
	for i, s := range strs {
		a, b, ok := strings.Cut(s, " ")
		if !ok {
			return nil, fmt.Errorf("cannot parse model merges: merge %d %q has no space", i, s)
		}
		pairs[i] = [2]string{a, b}
	}
	return pairs, nil
}

func byteLevelLast(p preTokenizer) bool {
	switch p := p.(type) {
	case byteLevelPreTokenizer:
		return true
	case sequencePreTokenizer:
		return len(p) > 0 && byteLevelLast(p[len(p)-1]) && !hasByteLevel(p[:len(p)-1])
	}
	return false
}

func hasByteLevel(p preTokenizer) bool {
	switch p := p.(type) {
	case byteLevelPreTokenizer:
		return true
	case sequencePreTokenizer:
		for _, q := range p {
			if hasByteLevel(q) {
				return true
			}
		}
	}
	return false
}

// Config returns what tokenizer_config.json (or GGUF metadata) says.
func (t *Tokenizer) Config() Config { return t.config }

// VocabSize is the number of ids, added tokens included (the largest id + 1).
func (t *Tokenizer) VocabSize() int { return int(t.maxID) + 1 }

// TokenToID returns the id of a token string (added tokens first).
func (t *Tokenizer) TokenToID(s string) (int32, bool) {
	if id, ok := t.added.byText[s]; ok {
		return id, true
	}
	return t.model.tokenToID(s)
}

// IDToToken returns the token string of an id (added tokens first).
func (t *Tokenizer) IDToToken(id int32) (string, bool) {
	if i, ok := t.added.byID[id]; ok {
		return t.added.tokens[i].Content, true
	}
	return t.model.idToToken(id)
}

// IsSpecial reports whether id is a special added token (skipped by Decode
// when asked to).
func (t *Tokenizer) IsSpecial(id int32) bool {
	i, ok := t.added.byID[id]
	return ok && t.added.tokens[i].Special
}

// AddedTokens lists the added tokens in tokenizer.json order.
func (t *Tokenizer) AddedTokens() []AddedToken { return append([]AddedToken(nil), t.added.tokens...) }

// Encode tokenizes text. With addSpecial the post-processor's special tokens
// (e.g. BOS) are added, and Truncation and Padding apply.
func (t *Tokenizer) Encode(text string, addSpecial bool) ([]int32, error) {
	if !utf8.ValidString(text) {
		// Rust strings are valid UTF-8; Python replaces bad bytes the same way.
		text = strings.ToValidUTF8(text, "\uFFFD")
	}
	ids := make([]int32, 0, len(text)/3+4)
	var spans, inner []span
	spans = t.added.findMatches(t.added.raw, text, spans)
	var pieces []piece
	for _, sp := range spans {
		if sp.end <= sp.start {
			continue
		}
		if sp.tok >= 0 {
			ids = append(ids, t.added.tokens[sp.tok].ID)
			continue
		}
		s := text[sp.start:sp.end]
		if t.norm != nil {
			s = t.norm.normalize(s)
		}
		inner = t.added.findMatches(t.added.normed, s, inner[:0])
		for _, in := range inner {
			if in.end <= in.start {
				continue
			}
			if in.tok >= 0 {
				ids = append(ids, t.added.tokens[in.tok].ID)
				continue
			}
			pieces = append(pieces[:0], piece{s[in.start:in.end], sp.start == 0 && in.start == 0})
			if t.pre != nil {
				pieces = t.pre.preTokenize(pieces)
			}
			for _, p := range pieces {
				var err error
				if ids, err = t.model.tokenize(p.text, ids); err != nil {
					return nil, err
				}
			}
		}
	}
	return t.finish(ids, addSpecial), nil
}

// finish applies truncation, the post-processor and padding, as tokenizers'
// post_process does (truncation and padding apply with or without special tokens).
func (t *Tokenizer) finish(ids []int32, addSpecial bool) []int32 {
	extra := 0
	if t.post != nil && addSpecial {
		extra = t.post.added()
	}
	if tr := t.Truncation; tr != nil {
		keep := max(tr.MaxLength-extra, 0)
		if len(ids) > keep {
			if tr.Left {
				ids = ids[len(ids)-keep:]
			} else {
				ids = ids[:keep]
			}
		}
	}
	if t.post != nil {
		ids = t.post.process(ids, addSpecial)
	}
	if p := t.Padding; p != nil {
		n := max(len(ids), p.Length)
		if p.Multiple > 0 && n%p.Multiple != 0 {
			n += p.Multiple - n%p.Multiple
		}
		for len(ids) < n {
			if p.Left {
				ids = append([]int32{p.ID}, ids...)
			} else {
				ids = append(ids, p.ID)
			}
		}
	}
	return ids
}

// Decode turns ids back into text; unknown ids are skipped, as in tokenizers.
func (t *Tokenizer) Decode(ids []int32, skipSpecial bool) string {
	toks := make([]string, 0, len(ids))
	for _, id := range ids {
		s, ok := t.IDToToken(id)
		if !ok || skipSpecial && t.IsSpecial(id) {
			continue
		}
		toks = append(toks, s)
	}
	if t.dec == nil {
		return strings.Join(toks, " ")
	}
	return strings.Join(t.dec.decodeChain(toks), "")
}
