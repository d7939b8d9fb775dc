package server

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
)

// piece is what one chunk of generated text adds to a chat response.
type piece struct {
	content   string
	reasoning string
	calls     []toolCall
}

func (p piece) empty() bool { return p.content == "" && p.reasoning == "" && len(p.calls) == 0 }

// router turns generated text into content, reasoning and tool calls, as
// mlx_lm.server's response loop does: reasoning text goes to
// reasoning_content, tool-call text is kept back until its end marker and
// then parsed. Text between tool markers that does not parse is given back
// as content, markers included, so a truncated or malformed call is seen
// for what it is rather than dropped.
type router struct {
	sp       *splitter
	tools    *toolFormat // nil: tool-call text is ordinary content
	defs     []toolDef
	prev     textState
	toolText strings.Builder
	madeCall bool
}

// newRouter starts a response in initial (stateReasoning when the prompt
// left a <think> open). think and tools may be nil.
func newRouter(think *thinkMarkers, tools *toolFormat, defs []toolDef, initial textState) *router {
	if think == nil && initial == stateReasoning {
		initial = stateNormal
	}
	return &router{sp: newSplitter(think, tools, initial), tools: tools, defs: defs, prev: initial}
}

// push routes one chunk of text.
func (r *router) push(text string) piece {
	var p piece
	for _, seg := range r.sp.push(text) {
		r.route(&p, seg)
	}
	return p
}

// finish routes what is still held back and closes an unfinished call (a
// format without an end marker, or a model that stopped before writing it):
// it is parsed as it stands, as mlx-lm does, and shown as text if it does
// not parse.
func (r *router) finish() piece {
	var p piece
	r.route(&p, r.sp.flush())
	if r.prev == stateTool {
		r.closeCall(&p, false)
	}
	return p
}

// madeToolCall reports whether any call was parsed: finish_reason
// "stop" then becomes "tool_calls".
func (r *router) madeToolCall() bool { return r.madeCall }

func (r *router) route(p *piece, seg segment) {
	if r.prev == stateTool && seg.state != stateTool {
		r.closeCall(p, true)
	}
	switch seg.state {
	case stateReasoning:
		p.reasoning += seg.text
	case stateTool:
		r.toolText.WriteString(seg.text)
	default:
		p.content += seg.text
	}
	r.prev = seg.state
}

// closeCall parses the tool text gathered since the start marker; sawEnd
// says whether the end marker was seen, to give the text back as written.
func (r *router) closeCall(p *piece, sawEnd bool) {
	text := r.toolText.String()
	r.toolText.Reset()
	r.prev = stateNormal
	if calls, err := r.tools.parse(text, r.defs); err == nil && len(calls) > 0 {
		for i := range calls {
			if calls[i].ID == "" {
				calls[i].ID = newCallID()
			}
		}
		p.calls = append(p.calls, calls...)
		r.madeCall = true
		return
	}
	raw := r.tools.start + text
	if sawEnd {
		raw += r.tools.end
	}
	p.content += raw
}

// newCallID is a fresh tool-call id in OpenAI's style.
func newCallID() string {
	var b [12]byte
	rand.Read(b[:])
	return "call_" + hex.EncodeToString(b[:])
}
