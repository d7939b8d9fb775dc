package tok

import (
	"fmt"
	"math"
	"slices"

	"github.com/mlxgo/mlxgo/models/gguf"
)

// GGUF token types (tokenizer.ggml.token_type), as llama.cpp writes them.
const (
	ggufNormal      = 1
	ggufUnknown     = 2
	ggufControl     = 3
	ggufUserDefined = 4
	ggufUnused      = 5
	ggufByte        = 6
)

// LoadGGUF builds a tokenizer from a GGUF file's tokenizer.ggml.* metadata.
func LoadGGUF(path string) (*Tokenizer, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot load tokenizer: %w", err)
	}
	defer f.Close()
	t, err := FromGGUF(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// FromGGUF builds a tokenizer from GGUF metadata, as llama.cpp reads it:
//
//   - "gpt2": byte-level BPE with tokenizer.ggml.merges; the pre-tokenizer
//     follows tokenizer.ggml.pre as llama.cpp defines it, which for SmolLM2
//     ("smollm") matches the model's original tokenizer.json: single digits,
//     then GPT-2's byte-level regex;
//   - "llama": SentencePiece BPE (Llama 2, Gemma): spaces become "▁",
//     symbols merge by tokenizer.ggml.scores (see ggufSentencePiece), and
//     characters outside the vocabulary fall back to <0xXX> byte tokens.
func FromGGUF(f *gguf.File) (*Tokenizer, error) {
	kind, _ := f.String("tokenizer.ggml.model")
	tokens, ok := f.Strings("tokenizer.ggml.tokens")
	if !ok || len(tokens) == 0 {
		return nil, fmt.Errorf("cannot build tokenizer from gguf: no tokenizer.ggml.tokens")
	}
	types, _ := f.Int32s("tokenizer.ggml.token_type")
	if types != nil && len(types) != len(tokens) {
		return nil, fmt.Errorf("cannot build tokenizer from gguf: %d token types for %d tokens", len(types), len(tokens))
	}
	var t *Tokenizer
	var err error
	switch kind {
	case "gpt2":
		t, err = ggufByteLevel(f, tokens)
	case "llama":
		t, err = ggufSentencePiece(f, tokens)
	default:
		return nil, fmt.Errorf("unsupported gguf tokenizer model %q (supported: gpt2, llama)", kind)
	}
	if err != nil {
		return nil, err
	}

	// Control and user-defined tokens are matched in the raw text, like
	// added tokens in tokenizer.json; control tokens are special.
	var added []AddedToken
	for i, typ := range types {
		if typ == ggufControl || typ == ggufUserDefined {
			added = append(added, AddedToken{ID: int32(i), Content: tokens[i], Special: typ == ggufControl})
		}
	}
	t.added = newAddedVocab(added, nil)
	t.maxID = int32(len(tokens) - 1)

	tokenAt := func(key string) (string, int32, bool) {
		id, ok := f.Int(key)
		if !ok || id < 0 || id >= int64(len(tokens)) {
			return "", 0, false
		}
		return tokens[id], int32(id), true
	}
	cfg := Config{}
	cfg.ChatTemplate, _ = f.String("tokenizer.chat_template")
	var bosID, eosID int32
	var hasBOS, hasEOS bool
	cfg.BOS, bosID, hasBOS = tokenAt("tokenizer.ggml.bos_token_id")
	cfg.EOS, eosID, hasEOS = tokenAt("tokenizer.ggml.eos_token_id")
	cfg.PAD, _, _ = tokenAt("tokenizer.ggml.padding_token_id")
	cfg.UNK, _, _ = tokenAt("tokenizer.ggml.unknown_token_id")
	if v, ok := f.Bool("tokenizer.ggml.add_bos_token"); ok {
		cfg.AddBOS = &v
	}
	if v, ok := f.Bool("tokenizer.ggml.add_eos_token"); ok {
		cfg.AddEOS = &v
	}
	if n, ok := f.Int(f.Architecture() + ".context_length"); ok && n > 0 {
		cfg.ModelMaxLength = int(n)
	}
	t.config = cfg

	// BOS/EOS are added by the post-processor when the metadata asks for them.
	var items []templateItem
	if cfg.AddBOS != nil && *cfg.AddBOS && hasBOS {
		items = append(items, templateItem{ids: []int32{bosID}})
	}
	items = append(items, templateItem{sequence: true})
	if cfg.AddEOS != nil && *cfg.AddEOS && hasEOS {
		items = append(items, templateItem{ids: []int32{eosID}})
	}
	t.post = templateProcessor{items: items}
	return t, nil
}

// ggufByteLevel is the "gpt2" tokenizer model: byte-level BPE.
func ggufByteLevel(f *gguf.File, tokens []string) (*Tokenizer, error) {
	pre, _ := f.String("tokenizer.ggml.pre")
	var pt preTokenizer
	switch pre {
	case "smollm":
		pt = sequencePreTokenizer{digitsPreTokenizer{individual: true}, byteLevelPreTokenizer{useRegex: true}}
	case "llama-bpe", "llama3":
		pt = sequencePreTokenizer{splitPreTokenizer{pattern: knownPatterns[llama3Regex], behavior: behIsolated}, byteLevelPreTokenizer{}}
	case "qwen2":
		pt = sequencePreTokenizer{splitPreTokenizer{pattern: knownPatterns[qwen2Regex], behavior: behIsolated}, byteLevelPreTokenizer{}}
	case "gpt-2", "gpt2", "default", "":
		pt = byteLevelPreTokenizer{useRegex: true}
	default:
		return nil, fmt.Errorf("unsupported gguf pre-tokenizer %q", pre)
	}
	vocab := make(map[string]int32, len(tokens))
	for i, s := range tokens {
		vocab[s] = int32(i)
	}
	mergeStrs, _ := f.Strings("tokenizer.ggml.merges")
	merges := make([][2]string, 0, len(mergeStrs))
	for i, m := range mergeStrs {
		a, b, ok := cutSpace(m)
		if !ok {
			return nil, fmt.Errorf("cannot build tokenizer from gguf: merge %d %q has no space", i, m)
		}
		merges = append(merges, [2]string{a, b})
	}
	bpe, err := newBPE(vocab, merges, "", false, false, false, "", "")
	if err != nil {
		return nil, err
	}
	bpe.setByteLevel()
	return &Tokenizer{pre: pt, model: bpe, dec: byteLevelDecoder{}, typeStr: "BPE"}, nil
}

func cutSpace(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' {
			return s[:i], s[i+1:], true
		}
	}
	return "", "", false
}

// ggufSentencePiece is the "llama" tokenizer model, llama.cpp's
// llm_tokenizer_spm: the text (after added tokens are split out) has its
// spaces escaped to "▁", starts as one symbol per character, and the
// adjacent pair whose concatenation is the highest-scoring token merges
// first, the leftmost among equal scores; a character with no token becomes
// its UTF-8 bytes' <0xXX> tokens. That is a BPE whose merge ranks are the
// merged tokens' score order, so it is built as one: a merge (l, r) for
// every token l+r whose halves are tokens, ranked densely by score.
// add_space_prefix (llama.cpp's default: true) prepends "▁" to the text.
func ggufSentencePiece(f *gguf.File, tokens []string) (*Tokenizer, error) {
	scores, ok := f.Float32s("tokenizer.ggml.scores")
	if !ok || len(scores) != len(tokens) {
		return nil, fmt.Errorf("cannot build tokenizer from gguf: tokenizer.ggml.scores missing or not one per token")
	}
	vocab := make(map[string]int32, len(tokens))
	for i, s := range tokens {
		if _, dup := vocab[s]; !dup { // llama.cpp's token_to_id keeps the first
			vocab[s] = int32(i)
		}
	}
	bpe, err := newBPE(vocab, nil, "", false, true, false, "", "")
	if err != nil {
		return nil, err
	}
	bpe.merges = spmMerges(tokens, scores, vocab)
	if unk, ok := f.Int("tokenizer.ggml.unknown_token_id"); ok && unk >= 0 && unk < int64(len(tokens)) {
		bpe.unkID = int32(unk)
	}
	var norm normalizer = replaceNormalizer{" ", "▁"}
	var dec decoder = sequenceDecoder{replaceDecoder{"▁", " "}, byteFallbackDecoder{}, fuseDecoder{}}
	if prefix, ok := f.Bool("tokenizer.ggml.add_space_prefix"); !ok || prefix {
		norm = sequenceNormalizer{prependNormalizer{"▁"}, norm}
		dec = append(dec.(sequenceDecoder), stripDecoder{content: ' ', start: 1})
	}
	return &Tokenizer{norm: norm, model: bpe, dec: dec, typeStr: "BPE"}, nil
}

// spmMerges is the merge table of ggufSentencePiece.
func spmMerges(tokens []string, scores []float32, vocab map[string]int32) map[uint64]merge {
	order := make([]float32, 0, len(scores))
	for _, s := range scores {
		if !math.IsNaN(float64(s)) {
			order = append(order, s)
		}
	}
	slices.Sort(order)
	order = slices.Compact(order)
	rank := func(s float32) int32 {
		i, _ := slices.BinarySearch(order, s)
		return int32(len(order) - 1 - i) // highest score: rank 0
	}
	merges := make(map[uint64]merge, 2*len(tokens))
	for id, tok := range tokens {
		if math.IsNaN(float64(scores[id])) || vocab[tok] != int32(id) {
			continue
		}
		for i := range tok {
			if i == 0 {
				continue
			}
			l, okL := vocab[tok[:i]]
			r, okR := vocab[tok[i:]]
			if okL && okR {
				merges[pairKey(l, r)] = merge{rank(scores[id]), int32(id)}
			}
		}
	}
	return merges
}
