package tok

import (
	"unicode/utf8"
)

// AddedToken is a token matched in the raw text before the model runs, as in
// tokenizers' AddedVocabulary (special tokens, chat markers, Gemma's
// whitespace runs).
type AddedToken struct {
	ID         int32  `json:"id"`
	Content    string `json:"content"`
	Special    bool   `json:"special"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	SingleWord bool   `json:"single_word"`
	Normalized bool   `json:"normalized"`
}

// trie finds added tokens leftmost-longest, like the Aho-Corasick automaton
// tokenizers builds with MatchKind::LeftmostLongest.
type trie struct {
	nodes []trieNode
	first [256]bool
}

type trieNode struct {
	next map[byte]int32
	val  int32 // index into addedVocab.tokens, -1 if no token ends here
}

func newTrie() *trie { return &trie{nodes: []trieNode{{val: -1}}} }

func (t *trie) insert(s string, val int32) {
	if s == "" {
		return
	}
	t.first[s[0]] = true
	n := int32(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		nx, ok := t.nodes[n].next[c]
		if !ok {
			if t.nodes[n].next == nil {
				t.nodes[n].next = map[byte]int32{}
			}
			nx = int32(len(t.nodes))
			t.nodes = append(t.nodes, trieNode{val: -1})
			t.nodes[n].next[c] = nx
		}
		n = nx
	}
	if t.nodes[n].val < 0 {
		t.nodes[n].val = val
	}
}

// longestAt returns the longest token starting at byte i: its end and value.
func (t *trie) longestAt(s string, i int) (end int, val int32) {
	end, val = -1, -1
	n := int32(0)
	for j := i; j < len(s); j++ {
		nx, ok := t.nodes[n].next[s[j]]
		if !ok {
			break
		}
		n = nx
		if v := t.nodes[n].val; v >= 0 {
			end, val = j+1, v
		}
	}
	return end, val
}

type addedVocab struct {
	tokens  []AddedToken
	byText  map[string]int32 // content -> id
	byID    map[int32]int    // id -> index in tokens
	raw     *trie            // tokens with normalized=false, matched in the input
	normed  *trie            // tokens with normalized=true, matched after normalization
	special map[string]bool
}

func newAddedVocab(tokens []AddedToken, norm normalizer) *addedVocab {
	v := &addedVocab{byText: map[string]int32{}, byID: map[int32]int{}, raw: newTrie(), normed: newTrie(), special: map[string]bool{}}
	for _, t := range tokens {
		if t.Content == "" {
			continue
		}
		idx := len(v.tokens)
		v.tokens = append(v.tokens, t)
		v.byText[t.Content] = t.ID
		v.byID[t.ID] = idx
		if t.Special {
			v.special[t.Content] = true
		}
		if t.Normalized {
			pat := t.Content
			if norm != nil {
				pat = norm.normalize(pat)
			}
			v.normed.insert(pat, int32(idx))
		} else {
			v.raw.insert(t.Content, int32(idx))
		}
	}
	return v
}

// span is a piece of input: either an added token (tok >= 0) or text.
type span struct {
	start, end int
	tok        int32 // index into tokens, -1 for text
}

// findMatches is tokenizers' AddedVocabulary::find_matches: leftmost-longest
// matches, single_word checks, lstrip/rstrip widening over whitespace.
func (v *addedVocab) findMatches(t *trie, s string, dst []span) []span {
	if len(t.nodes) == 1 {
		return append(dst, span{0, len(s), -1})
	}
	startOffset := 0
	for i := 0; i < len(s); {
		if !t.first[s[i]] {
			i++
			continue
		}
		end, idx := t.longestAt(s, i)
		if idx < 0 {
			i++
			continue
		}
		start, stop := i, end
		i = end
		tk := &v.tokens[idx]
		if tk.SingleWord {
			r, _ := utf8.DecodeLastRuneInString(s[:start])
			startOK := start == 0 || !isWordChar(r)
			r, _ = utf8.DecodeRuneInString(s[stop:])
			stopOK := stop == len(s) || !isWordChar(r)
			if !startOK || !stopOK {
				continue
			}
		}
		if tk.LStrip {
			ns := start
			for ns > 0 {
				r, size := utf8.DecodeLastRuneInString(s[:ns])
				if !isWhitespace(r) {
					break
				}
				ns -= size
			}
			start = max(ns, startOffset)
		}
		if tk.RStrip {
			for stop < len(s) {
				r, size := utf8.DecodeRuneInString(s[stop:])
				if !isWhitespace(r) {
					break
				}
				stop += size
			}
		}
		if startOffset < start {
			dst = append(dst, span{startOffset, start, -1})
		}
		dst = append(dst, span{start, stop, idx})
		startOffset = stop
	}
	if startOffset != len(s) {
		dst = append(dst, span{startOffset, len(s), -1})
	}
	return dst
}
