package tok

import (
	"fmt"
	"unicode/utf8"
)

// WordPiece is BERT's greedy longest-match-first subword model.
type WordPiece struct {
	vocab    map[string]int32
	idToTok  []string
	unkID    int32
	prefix   string // continuing_subword_prefix, "##"
	maxChars int    // words longer than this (in characters) become unk
}

func newWordPiece(vocab map[string]int32, unk, prefix string, maxChars int) (*WordPiece, error) {
	m := &WordPiece{vocab: vocab, prefix: prefix, maxChars: maxChars}
	maxID := int32(-1)
	for _, id := range vocab {
		if id < 0 {
			return nil, fmt.Errorf("cannot load wordpiece model: negative token id %d", id)
		}
		maxID = max(maxID, id)
	}
	if maxID > 1<<24 {
		return nil, fmt.Errorf("cannot load wordpiece model: token id %d is too large", maxID)
	}
	m.idToTok = make([]string, maxID+1)
	for s, id := range vocab {
		m.idToTok[id] = s
	}
	id, ok := vocab[unk]
	if !ok {
		return nil, fmt.Errorf("cannot load wordpiece model: unk token %q is not in the vocabulary", unk)
	}
	m.unkID = id
	return m, nil
}

func (m *WordPiece) vocabSize() int { return len(m.vocab) }

func (m *WordPiece) tokenToID(s string) (int32, bool) { id, ok := m.vocab[s]; return id, ok }

func (m *WordPiece) idToToken(id int32) (string, bool) {
	if id < 0 || int(id) >= len(m.idToTok) {
		return "", false
	}
	return m.idToTok[id], true
}

// tokenize appends the ids of word: the longest vocabulary prefix, then the
// longest "##" continuation, and so on; if any step fails the whole word is unk.
func (m *WordPiece) tokenize(word string, dst []int32) ([]int32, error) {
	if utf8.RuneCountInString(word) > m.maxChars {
		return append(dst, m.unkID), nil
	}
	start := len(dst)
	for i := 0; i < len(word); {
		found := int32(-1)
		end := len(word)
		for end > i {
			sub := word[i:end]
			if i > 0 {
				sub = m.prefix + sub
			}
			if id, ok := m.vocab[sub]; ok {
				found = id
				break
			}
			_, size := utf8.DecodeLastRuneInString(word[i:end])
			end -= size
		}
		if found < 0 {
			return append(dst[:start], m.unkID), nil
		}
		dst = append(dst, found)
		i = end
	}
	return dst, nil
}
