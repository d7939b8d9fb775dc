package server

import (
	"strings"

	"github.com/mlxgo/mlxgo/tok"
)

// The reasoning split follows mlx_lm.server 0.32.2: generated text runs
// through a small state machine (normal, reasoning, tool) driven by marker
// strings — <think>/</think> and the model's tool-call start/end — and each
// piece of text is routed by the state it was generated in. Matching on text
// rather than token ids is what mlx-lm does too: it survives a marker's last
// character being merged with the next byte by the tokenizer.

// textState is where generated text belongs.
type textState uint8

const (
	stateNormal    textState = iota // message content
	stateReasoning                  // reasoning_content
	stateTool                       // tool-call text, parsed at its end
)

func (s textState) String() string {
	return [...]string{"normal", "reasoning", "tool"}[s]
}

// transition leaves a state when its marker is seen; the marker itself is
// never shown to the client.
type transition struct {
	marker string
	to     textState
}

// segment is text that belongs to one state. Entering a state always yields
// a segment (possibly empty), so a consumer sees every transition.
type segment struct {
	state textState
	text  string
}

// splitter routes a stream of text chunks by state. Text that may still be
// the beginning of a marker is held back until the next chunk decides it, so
// a marker split across chunks ("<th" + "ink>") is still recognised. It is
// not safe for concurrent use.
type splitter struct {
	edges [3][]transition
	state textState
	buf   string // held back: a proper prefix of some marker of state
}

// newSplitter builds the state machine mlx-lm's make_text_state_machine
// builds: think start/end between normal and reasoning; the tool-call start
// from normal (and from reasoning, when thinking is on) into tool, and the
// tool-call end back to normal. Either part may be absent.
func newSplitter(think *thinkMarkers, tools *toolFormat, initial textState) *splitter {
	sp := &splitter{state: initial}
	if think != nil {
		sp.add(stateNormal, think.start, stateReasoning)
		sp.add(stateReasoning, think.end, stateNormal)
	}
	if tools != nil {
		sp.add(stateNormal, tools.start, stateTool)
		if think != nil {
			sp.add(stateReasoning, tools.start, stateTool)
		}
		sp.add(stateTool, tools.end, stateNormal)
	}
	return sp
}

func (sp *splitter) add(from textState, marker string, to textState) {
	// An empty marker (a format without an end marker) never matches:
	// the state lasts to the end of the text.
	if marker != "" {
		sp.edges[from] = append(sp.edges[from], transition{marker, to})
	}
}

// push consumes a chunk and returns the text that is now certain, by state.
// The last segment is always in the current state.
func (sp *splitter) push(text string) []segment {
	sp.buf += text
	var out []segment
	for {
		i, tr := sp.earliest()
		if tr == nil {
			break
		}
		out = append(out, segment{sp.state, sp.buf[:i]})
		sp.buf = sp.buf[i+len(tr.marker):]
		sp.state = tr.to
	}
	hold := sp.partial()
	out = append(out, segment{sp.state, sp.buf[:len(sp.buf)-hold]})
	sp.buf = sp.buf[len(sp.buf)-hold:]
	return out
}

// flush ends the stream: text held back as a possible marker start is text
// after all, in the current state.
func (sp *splitter) flush() segment {
	s := segment{sp.state, sp.buf}
	sp.buf = ""
	return s
}

// earliest finds the first complete marker of the current state in buf; at
// one position the longest marker wins.
func (sp *splitter) earliest() (int, *transition) {
	best, at := (*transition)(nil), -1
	for k := range sp.edges[sp.state] {
		tr := &sp.edges[sp.state][k]
		i := strings.Index(sp.buf, tr.marker)
		if i < 0 {
			continue
		}
		if at < 0 || i < at || i == at && len(tr.marker) > len(best.marker) {
			best, at = tr, i
		}
	}
	return at, best
}

// partial is the length of the longest suffix of buf that is a proper
// prefix of a marker of the current state: text that cannot be shown yet.
func (sp *splitter) partial() int {
	longest := 0
	for _, tr := range sp.edges[sp.state] {
		for n := min(len(tr.marker)-1, len(sp.buf)); n > longest; n-- {
			if strings.HasSuffix(sp.buf, tr.marker[:n]) {
				longest = n
				break
			}
		}
	}
	return longest
}

// thinkMarkers are a model's thinking delimiters, as text and as token ids.
type thinkMarkers struct {
	start, end       string
	startIDs, endIDs []int32
	special          bool // a marker is a special token, which skip-special decoding would drop
}

// inferThinking mirrors mlx-lm's _infer_thinking: a pair of single tokens
// in the vocabulary, else the multi-token "channel" and XTML forms. nil: the
// model has no thinking markers.
func inferThinking(t *tok.Tokenizer) *thinkMarkers {
	for _, p := range [][2]string{{"<think>", "</think>"}, {"<longcat_think>", "</longcat_think>"}, {"<|think:start|>", "<|think:end|>"}} {
		s, ok1 := t.TokenToID(p[0])
		e, ok2 := t.TokenToID(p[1])
		if ok1 && ok2 {
			return &thinkMarkers{start: p[0], end: p[1], startIDs: []int32{s}, endIDs: []int32{e},
				special: t.IsSpecial(s) || t.IsSpecial(e)}
		}
	}
	has := func(toks ...string) bool {
		for _, s := range toks {
			if _, ok := t.TokenToID(s); !ok {
				return false
			}
		}
		return true
	}
	var start, end string
	switch {
	case has("<|channel>", "<channel|>"):
		start, end = "<|channel>thought", "<channel|>"
	case has("<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>"):
		start, end = "<|open|>think<|sep|>", "<|close|>think<|sep|>"
	default:
		return nil
	}
	m := &thinkMarkers{start: start, end: end}
	var err error
	if m.startIDs, err = t.Encode(start, false); err != nil || len(m.startIDs) == 0 {
		return nil
	}
	if m.endIDs, err = t.Encode(end, false); err != nil || len(m.endIDs) == 0 {
		return nil
	}
	for _, id := range append(append([]int32(nil), m.startIDs...), m.endIDs...) {
		m.special = m.special || t.IsSpecial(id)
	}
	return m
}

// initialState is mlx-lm's choice for a chat prompt: a prompt whose last
// think start comes after its last think end (the template opened <think>
// for the model) starts the response in reasoning.
func (m *thinkMarkers) initialState(prompt []int32) textState {
	if m != nil && rfind(prompt, m.startIDs) > rfind(prompt, m.endIDs) {
		return stateReasoning
	}
	return stateNormal
}

// rfind is the last index of seq in ids, or -1.
func rfind(ids, seq []int32) int {
	if len(seq) == 0 {
		return -1
	}
outer:
	for i := len(ids) - len(seq); i >= 0; i-- {
		for j, v := range seq {
			if ids[i+j] != v {
				continue outer
			}
		}
		return i
	}
	return -1
}
