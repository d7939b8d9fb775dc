package tok

import (
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"
)

// BPE is a byte-pair-encoding model: byte-level (GPT-2, Llama 3, Qwen,
// SmolLM) or character-level with byte fallback (SentencePiece-style, Gemma).
type BPE struct {
	vocab    map[string]int32
	idToTok  []string
	merges   map[uint64]merge
	unkID    int32 // -1: no unk token
	fuseUnk  bool
	fallback bool   // byte_fallback: unknown characters become <0xXX> tokens
	prefix   string // continuing_subword_prefix
	suffix   string // end_of_word_suffix
	ignore   bool   // ignore_merges: a word found whole in the vocab is one token

	// byteLevel is set when the pre-tokenizer maps bytes to GPT-2 characters:
	// words then arrive as raw bytes and byteIDs/rawVocab stand in for the
	// mapped strings, so the text is never rewritten.
	byteLevel bool
	byteIDs   [256]int32
	rawVocab  map[string]int32
	fbIDs     [256]int32 // <0xXX> ids for byte fallback, -1 if absent

	cache wordCache
}

type merge struct{ rank, id int32 }

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// newBPE builds the model; merges are pairs of token strings in rank order.
func newBPE(vocab map[string]int32, merges [][2]string, unk string, fuseUnk, fallback, ignore bool, prefix, suffix string) (*BPE, error) {
	m := &BPE{vocab: vocab, merges: make(map[uint64]merge, len(merges)), unkID: -1,
		fuseUnk: fuseUnk, fallback: fallback, prefix: prefix, suffix: suffix, ignore: ignore}
	maxID := int32(-1)
	for _, id := range vocab {
		if id < 0 {
			return nil, fmt.Errorf("cannot load bpe model: negative token id %d", id)
		}
		maxID = max(maxID, id)
	}
	if maxID > 1<<24 {
		return nil, fmt.Errorf("cannot load bpe model: token id %d is too large", maxID)
	}
	m.idToTok = make([]string, maxID+1)
	for s, id := range vocab {
		m.idToTok[id] = s
	}
	if unk != "" {
		id, ok := vocab[unk]
		if !ok {
			return nil, fmt.Errorf("cannot load bpe model: unk token %q is not in the vocabulary", unk)
		}
		m.unkID = id
	}
	for rank, p := range merges {
		a, okA := vocab[p[0]]
		b, okB := vocab[p[1]]
		if !okA || !okB {
			return nil, fmt.Errorf("cannot load bpe model: merge %d (%q %q) uses a token that is not in the vocabulary", rank, p[0], p[1])
		}
		right := p[1]
		if prefix != "" {
			right = strings.TrimPrefix(right, prefix)
		}
		id, ok := vocab[p[0]+right]
		if !ok {
			return nil, fmt.Errorf("cannot load bpe model: merge %d result %q is not in the vocabulary", rank, p[0]+right)
		}
		// Later duplicates win, as when tokenizers collects merges into a map.
		m.merges[pairKey(a, b)] = merge{int32(rank), id}
	}
	for b := range m.fbIDs {
		m.fbIDs[b] = -1
		if id, ok := vocab[fmt.Sprintf("<0x%02X>", b)]; ok {
			m.fbIDs[b] = id
		}
	}
	return m, nil
}

// setByteLevel switches the model to raw-byte input (see byteLevel).
func (m *BPE) setByteLevel() {
	m.byteLevel = true
	m.rawVocab = make(map[string]int32, len(m.vocab))
	buf := make([]byte, 0, 64)
	for s, id := range m.vocab {
		buf = buf[:0]
		ok := true
		for _, r := range s {
			b, isByte := runeToByte[r]
			if !isByte {
				ok = false
				break
			}
			buf = append(buf, b)
		}
		if ok {
			m.rawVocab[string(buf)] = id
		}
	}
	for b := range m.byteIDs {
		id, ok := m.vocab[byteToStr[b]]
		if !ok {
			id = -1
		}
		m.byteIDs[b] = id
	}
}

func (m *BPE) vocabSize() int { return len(m.vocab) }

func (m *BPE) tokenToID(s string) (int32, bool) { id, ok := m.vocab[s]; return id, ok }

func (m *BPE) idToToken(id int32) (string, bool) {
	if id < 0 || int(id) >= len(m.idToTok) || m.idToTok[id] == "" && m.vocab[""] != id {
		return "", false
	}
	return m.idToTok[id], true
}

// tokenize appends the ids of word to dst.
func (m *BPE) tokenize(word string, dst []int32) ([]int32, error) {
	if word == "" {
		return dst, nil
	}
	if m.ignore {
		v := m.vocab
		if m.byteLevel {
			v = m.rawVocab
		}
		if id, ok := v[word]; ok {
			return append(dst, id), nil
		}
	}
	if ids, ok := m.cache.get(word); ok {
		return append(dst, ids...), nil
	}
	syms, err := m.initialSymbols(word)
	if err != nil {
		return dst, err
	}
	ids := m.mergeAll(syms)
	if len(word) < 256 {
		m.cache.put(word, ids)
	}
	return append(dst, ids...), nil
}

// initialSymbols splits word into the model's starting symbols: one per
// byte for byte-level models, else one per character (with byte fallback
// and unk fusing as tokenizers' merge_word does).
func (m *BPE) initialSymbols(word string) ([]int32, error) {
	syms := make([]int32, 0, len(word))
	if m.byteLevel && m.prefix == "" && m.suffix == "" {
		for i := 0; i < len(word); i++ {
			id := m.byteIDs[word[i]]
			if id < 0 {
				if m.unkID < 0 {
					return nil, fmt.Errorf("cannot tokenize: byte 0x%02X has no token and there is no unk token", word[i])
				}
				if m.fuseUnk && len(syms) > 0 && syms[len(syms)-1] == m.unkID {
					continue
				}
				id = m.unkID
			}
			syms = append(syms, id)
		}
		return syms, nil
	}
	unkOpen := false // the last symbol is an unk that may absorb more
	for i := 0; i < len(word); {
		_, size := utf8.DecodeRuneInString(word[i:])
		s := word[i : i+size]
		if m.byteLevel {
			var b strings.Builder
			for k := 0; k < size; k++ {
				b.WriteString(byteToStr[word[i+k]])
			}
			s = b.String()
		}
		if i > 0 && m.prefix != "" {
			s = m.prefix + s
		}
		if i+size == len(word) && m.suffix != "" {
			s += m.suffix
		}
		i += size
		if id, ok := m.vocab[s]; ok {
			syms = append(syms, id)
			unkOpen = false
			continue
		}
		if m.fallback {
			ok := true
			for k := 0; k < len(s); k++ {
				if m.fbIDs[s[k]] < 0 {
					ok = false
					break
				}
			}
			if ok {
				for k := 0; k < len(s); k++ {
					syms = append(syms, m.fbIDs[s[k]])
				}
				unkOpen = false
				continue
			}
		}
		if m.unkID < 0 {
			// tokenizers drops characters it cannot represent when there is no unk token.
			continue
		}
		if unkOpen && m.fuseUnk {
			continue
		}
		syms = append(syms, m.unkID)
		unkOpen = true
	}
	return syms, nil
}

// mergeAll applies merges lowest rank first, leftmost first among equal
// ranks — the order tokenizers' priority queue produces. Short words use a
// linear scan; long ones (Gemma sees whole lines as one word) a heap.
func (m *BPE) mergeAll(syms []int32) []int32 {
	if len(syms) < 2 {
		return syms
	}
	if len(syms) > 48 {
		return m.mergeHeap(syms)
	}
	for {
		best, bestRank, bestID := -1, int32(1<<31-1), int32(0)
		for i := 0; i+1 < len(syms); i++ {
			if mg, ok := m.merges[pairKey(syms[i], syms[i+1])]; ok && mg.rank < bestRank {
				best, bestRank, bestID = i, mg.rank, mg.id
			}
		}
		if best < 0 {
			return syms
		}
		syms[best] = bestID
		syms = append(syms[:best+1], syms[best+2:]...)
	}
}

type heapEntry struct {
	rank, pos, id int32
}

func heapLess(a, b heapEntry) bool {
	return a.rank < b.rank || a.rank == b.rank && a.pos < b.pos
}

// mergeHeap is tokenizers' Word::merge_all: a linked list of symbols and a
// priority queue of candidate merges, stale entries skipped on pop.
func (m *BPE) mergeHeap(ids []int32) []int32 {
	n := len(ids)
	prev := make([]int32, n)
	next := make([]int32, n)
	alive := make([]bool, n)
	for i := range ids {
		prev[i], next[i], alive[i] = int32(i-1), int32(i+1), true
	}
	next[n-1] = -1
	h := make([]heapEntry, 0, n)
	push := func(e heapEntry) {
		h = append(h, e)
		for i := len(h) - 1; i > 0; {
			p := (i - 1) / 2
			if !heapLess(h[i], h[p]) {
				break
			}
			h[i], h[p] = h[p], h[i]
			i = p
		}
	}
	pop := func() heapEntry {
		top := h[0]
		last := len(h) - 1
		h[0] = h[last]
		h = h[:last]
		for i := 0; ; {
			l, r, s := 2*i+1, 2*i+2, i
			if l < len(h) && heapLess(h[l], h[s]) {
				s = l
			}
			if r < len(h) && heapLess(h[r], h[s]) {
				s = r
			}
			if s == i {
				break
			}
			h[i], h[s] = h[s], h[i]
			i = s
		}
		return top
	}
	for i := 0; i+1 < n; i++ {
		if mg, ok := m.merges[pairKey(ids[i], ids[i+1])]; ok {
			push(heapEntry{mg.rank, int32(i), mg.id})
		}
	}
	for len(h) > 0 {
		top := pop()
		p := top.pos
		if !alive[p] || next[p] < 0 {
			continue
		}
		q := next[p]
		if mg, ok := m.merges[pairKey(ids[p], ids[q])]; !ok || mg.id != top.id {
			continue // stale: one side has changed since this entry was pushed
		}
		ids[p] = top.id
		alive[q] = false
		next[p] = next[q]
		if next[q] >= 0 {
			prev[next[q]] = p
		}
		if pp := prev[p]; pp >= 0 {
			if mg, ok := m.merges[pairKey(ids[pp], ids[p])]; ok {
				push(heapEntry{mg.rank, pp, mg.id})
			}
		}
		if nn := next[p]; nn >= 0 {
			if mg, ok := m.merges[pairKey(ids[p], ids[nn])]; ok {
				push(heapEntry{mg.rank, p, mg.id})
			}
		}
	}
	out := ids[:0]
	for i := 0; i < n; i++ {
		if alive[i] {
			out = append(out, ids[i])
		}
	}
	return out
}

// wordCache remembers the ids of recent words; it is safe for concurrent use
// and is simply emptied when full.
type wordCache struct {
	mu sync.RWMutex
	m  map[string][]int32
}

const wordCacheSize = 1 << 16

func (c *wordCache) get(w string) ([]int32, bool) {
	c.mu.RLock()
	ids, ok := c.m[w]
	c.mu.RUnlock()
	return ids, ok
}

func (c *wordCache) put(w string, ids []int32) {
	c.mu.Lock()
	if c.m == nil || len(c.m) >= wordCacheSize {
		c.m = make(map[string][]int32, 1024)
	}
	c.m[w] = append([]int32(nil), ids...)
	c.mu.Unlock()
}
