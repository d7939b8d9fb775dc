package server

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/mlxgo/mlxgo/gen"
	"github.com/mlxgo/mlxgo/tok"
)

// maxTopLogprobs is OpenAI's bound on top_logprobs (chat) and logprobs
// (completions).
const maxTopLogprobs = gen.MaxTopLogprobs

// logprobLog collects log-probabilities on the engine goroutine, where the
// generation reports them, for the handler that formats them. The handler
// takes what arrived since its last take each time it sends text, so a
// streamed chunk carries the log-probabilities of the tokens generated
// since the chunk before (held-back text can make that a token or two
// ahead of the chunk's text; the full list is always complete and in order).
type logprobLog struct {
	mu    sync.Mutex
	items []gen.Logprob
	taken int
}

func (l *logprobLog) add(lp gen.Logprob) {
	l.mu.Lock()
	l.items = append(l.items, lp)
	l.mu.Unlock()
}

// take returns the entries added since the last take.
func (l *logprobLog) take() []gen.Logprob {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.items[l.taken:]
	l.taken = len(l.items)
	return out
}

// jsonLogprob is a log-probability as JSON can carry it: float32's shortest
// decimal, and OpenAI's -9999 for a token the sampler ruled out (-Inf),
// which JSON cannot encode.
func jsonLogprob(f float32) float64 {
	if math.IsInf(float64(f), 0) || math.IsNaN(float64(f)) {
		return -9999
	}
	v, _ := strconv.ParseFloat(strconv.FormatFloat(float64(f), 'g', -1, 32), 64)
	return v
}

// tokenText is a token's text and its exact bytes. A token that is part of
// a UTF-8 character (byte-level BPE, byte fallback) has no text of its own;
// like OpenAI, its text is then "bytes:\xNN..." and its bytes are exact.
func tokenText(t *tok.Tokenizer, id int32) (string, []byte) {
	s := t.Decode([]int32{id}, false)
	if !strings.ContainsRune(s, utf8.RuneError) {
		return s, []byte(s)
	}
	b := rawTokenBytes(t, id)
	if b == nil {
		return s, []byte(s)
	}
	if utf8.Valid(b) {
		return string(b), b
	}
	var sb strings.Builder
	sb.WriteString("bytes:")
	for _, c := range b {
		fmt.Fprintf(&sb, "\\x%02x", c)
	}
	return sb.String(), b
}

// rawTokenBytes reads the bytes behind a byte-fallback token ("<0xE2>") or
// a byte-level BPE token (GPT-2's byte-to-character alphabet); nil when the
// token is neither.
func rawTokenBytes(t *tok.Tokenizer, id int32) []byte {
	raw, ok := t.IDToToken(id)
	if !ok || raw == "" {
		return nil
	}
	if len(raw) == 6 && strings.HasPrefix(raw, "<0x") && raw[5] == '>' {
		if v, err := strconv.ParseUint(raw[3:5], 16, 8); err == nil {
			return []byte{byte(v)}
		}
	}
	out := make([]byte, 0, len(raw))
	for _, r := range raw {
		b, ok := byteLevelByte(r)
		if !ok {
			return nil
		}
		out = append(out, b)
	}
	return out
}

// byteLevelByte inverts GPT-2's bytes_to_unicode: printable Latin-1 bytes
// stand for themselves, the other 68 bytes for U+0100 onwards in order.
func byteLevelByte(r rune) (byte, bool) {
	printable := func(b int) bool { return b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE && b <= 0xFF }
	if r < 256 {
		return byte(r), printable(int(r))
	}
	n := int(r) - 256
	for b := 0; b < 256; b++ {
		if printable(b) {
			continue
		}
		if n == 0 {
			return byte(b), true
		}
		n--
	}
	return 0, false
}

// bytesJSON is a byte slice as OpenAI sends it: an array of integers
// (encoding/json would write base64).
func bytesJSON(b []byte) []int {
	out := make([]int, len(b))
	for i, c := range b {
		out[i] = int(c)
	}
	return out
}

// chatLogprobEntry is one element of choices[].logprobs.content.
type chatLogprobEntry struct {
	Token       string           `json:"token"`
	Logprob     float64          `json:"logprob"`
	Bytes       []int            `json:"bytes"`
	TopLogprobs []chatLogprobAlt `json:"top_logprobs"`
}

type chatLogprobAlt struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

// chatLogprobs is the chat shape: {"content": [...], "refusal": null}, with
// at most top alternatives per token.
func chatLogprobs(t *tok.Tokenizer, items []gen.Logprob, top int) map[string]any {
	content := make([]chatLogprobEntry, len(items))
	for i, it := range items {
		s, b := tokenText(t, it.Token)
		e := chatLogprobEntry{Token: s, Logprob: jsonLogprob(it.Logprob), Bytes: bytesJSON(b), TopLogprobs: []chatLogprobAlt{}}
		for _, a := range it.Top[:min(top, len(it.Top))] {
			as, ab := tokenText(t, a.Token)
			e.TopLogprobs = append(e.TopLogprobs, chatLogprobAlt{Token: as, Logprob: jsonLogprob(a.Logprob), Bytes: bytesJSON(ab)})
		}
		content[i] = e
	}
	return map[string]any{"content": content, "refusal": nil}
}

// legacyLogprobs formats /v1/completions' shape: parallel arrays of token
// texts, log-probabilities, {text: logprob} maps of the top alternatives,
// and each token's character offset. Offsets count Unicode code points
// from the start of the completion text (the prompt is never echoed) and
// carry on across calls, for a stream.
type legacyLogprobs struct {
	t      *tok.Tokenizer
	top    int
	offset int
}

func (l *legacyLogprobs) format(items []gen.Logprob) map[string]any {
	tokens := make([]string, len(items))
	lps := make([]float64, len(items))
	tops := make([]map[string]float64, len(items))
	offsets := make([]int, len(items))
	for i, it := range items {
		s, b := tokenText(l.t, it.Token)
		tokens[i], lps[i], offsets[i] = s, jsonLogprob(it.Logprob), l.offset
		l.offset += utf8.RuneCount(b)
		tops[i] = make(map[string]float64, l.top)
		for _, a := range it.Top[:min(l.top, len(it.Top))] {
			as, _ := tokenText(l.t, a.Token)
			if _, dup := tops[i][as]; !dup {
				tops[i][as] = jsonLogprob(a.Logprob)
			}
		}
	}
	return map[string]any{"tokens": tokens, "token_logprobs": lps, "top_logprobs": tops, "text_offset": offsets}
}
