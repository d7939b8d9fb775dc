package server

import (
	"github.com/mlxgo/mlxgo/kv"
)

// PromptCache keeps KV caches for token sequences, capped in bytes and
// evicted least recently used first, so that a request sharing a prefix with
// an earlier one (the next turn of a chat) prefills only its new tokens. It
// mirrors mlx-lm's LRUPromptCache with one difference: kv caches cannot be
// copied, so a hit moves the entry out (take) and the runner puts the
// extended caches back when the generation ends (put). With the serial
// engine no two requests want the same entry at once.
//
// It must be used on the MLX executor: freeing and trimming caches call MLX.
type PromptCache struct {
	maxBytes int
	entries  []*cacheEntry // least recently used first
	bytes    int
}

type cacheEntry struct {
	adapter string // the LoRA adapter the KV was computed with ("": none)
	tokens  []int32
	caches  []kv.Cache
	nbytes  int
}

// NewPromptCache makes a cache that holds at most maxBytes of KV.
func NewPromptCache(maxBytes int) *PromptCache { return &PromptCache{maxBytes: maxBytes} }

// Bytes is the KV size held now.
func (c *PromptCache) Bytes() int { return c.bytes }

// Len is the number of token sequences held.
func (c *PromptCache) Len() int { return len(c.entries) }

// take removes the entry of adapter ("": none) that serves the longest
// prefix of tokens and returns its caches trimmed to that prefix, and the
// prefix length. At least one token is always left to run, because
// generation needs the logits of the last prompt token. It returns nil, 0
// on a miss.
func (c *PromptCache) take(adapter string, tokens []int32) ([]kv.Cache, int) {
	best, bestN := -1, 0
	for i, e := range c.entries {
		if e.adapter != adapter {
			continue // another adapter's KV differs for the same tokens
		}
		n := min(commonPrefix(e.tokens, tokens), len(tokens)-1)
		if n < len(e.tokens) && !kv.Trimmable(e.caches) {
			// The entry holds tokens past the shared prefix that cannot be
			// dropped; only an entry that is itself a prefix serves.
			continue
		}
		if n > bestN {
			best, bestN = i, n
		}
	}
	if best < 0 {
		return nil, 0
	}
	e := c.remove(best)
	if extra := len(e.tokens) - bestN; extra > 0 && kv.Trim(e.caches, extra) != extra {
		kv.FreeAll(e.caches)
		return nil, 0
	}
	return e.caches, bestN
}

// put stores caches (now owned by the cache) as the KV of tokens under
// adapter, drops the entries they make redundant (prefixes of tokens of the
// same adapter, which a trim can serve) and evicts the least recently used
// until the byte cap holds.
func (c *PromptCache) put(adapter string, tokens []int32, caches []kv.Cache) {
	e := &cacheEntry{adapter: adapter, tokens: tokens, caches: caches, nbytes: kv.Nbytes(caches)}
	if e.nbytes > c.maxBytes || len(tokens) == 0 {
		kv.FreeAll(caches)
		return
	}
	if kv.Trimmable(caches) {
		for i := 0; i < len(c.entries); {
			if o := c.entries[i]; o.adapter == adapter && len(o.tokens) <= len(tokens) && commonPrefix(o.tokens, tokens) == len(o.tokens) {
				kv.FreeAll(c.remove(i).caches)
				continue
			}
			i++
		}
	}
	c.entries = append(c.entries, e)
	c.bytes += e.nbytes
	for c.bytes > c.maxBytes && len(c.entries) > 0 {
		kv.FreeAll(c.remove(0).caches)
	}
}

func (c *PromptCache) remove(i int) *cacheEntry {
	e := c.entries[i]
	c.entries = append(c.entries[:i], c.entries[i+1:]...)
	c.bytes -= e.nbytes
	return e
}

// Clear frees every entry.
func (c *PromptCache) Clear() {
	for len(c.entries) > 0 {
		kv.FreeAll(c.remove(0).caches)
	}
}

func commonPrefix(a, b []int32) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}
