package server

import (
	"strings"
	"testing"
)

var (
	qwenThink = &thinkMarkers{start: "<think>", end: "</think>", startIDs: []int32{151667}, endIDs: []int32{151668}}
	jsonTools = func() *toolFormat { f := toolFormats["json_tools"]; return &f }()
)

// routed is everything a router made of a text, all chunks together.
type routed struct {
	content, reasoning string
	calls              []toolCall
	madeCall           bool
}

func routeAll(r *router, chunks []string) routed {
	var out routed
	add := func(p piece) {
		out.content += p.content
		out.reasoning += p.reasoning
		out.calls = append(out.calls, p.calls...)
	}
	for _, c := range chunks {
		add(r.push(c))
	}
	add(r.finish())
	out.madeCall = r.madeToolCall()
	return out
}

// chunkings splits s into chunks of every size from 1 byte to all of it,
// so markers land across chunk boundaries in every possible place.
func chunkings(s string) [][]string {
	var out [][]string
	for n := 1; n <= max(len(s), 1); n++ {
		var cs []string
		for i := 0; i < len(s); i += n {
			cs = append(cs, s[i:min(i+n, len(s))])
		}
		out = append(out, cs)
	}
	return out
}

func TestRouterReasoningAndTools(t *testing.T) {
	cases := []struct {
		name      string
		think     *thinkMarkers
		tools     *toolFormat
		initial   textState
		text      string
		content   string
		reasoning string
		calls     []string // name + " " + arguments
	}{
		{"plain text", qwenThink, jsonTools, stateNormal, "Hello <b>world</b>", "Hello <b>world</b>", "", nil},
		{"think then answer", qwenThink, nil, stateNormal, "<think>\nLet me see.\n</think>\n\nBlue.", "\n\nBlue.", "\nLet me see.\n", nil},
		{"prompt opened think", qwenThink, nil, stateReasoning, "hmm</think>Red", "Red", "hmm", nil},
		{"no think markers: tags are text", nil, nil, stateNormal, "<think>x</think>y", "<think>x</think>y", "", nil},
		{"unclosed think", qwenThink, nil, stateNormal, "a<think>still thinking", "a", "still thinking", nil},
		{"partial marker at end is text", qwenThink, jsonTools, stateNormal, "x <thi", "x <thi", "", nil},
		{"tool call", qwenThink, jsonTools, stateNormal,
			"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}\n</tool_call>", "", "",
			[]string{`get_weather {"city":"Paris","unit":"c"}`}},
		{"think, text and two calls", qwenThink, jsonTools, stateNormal,
			"<think>need tools</think>Sure.<tool_call>{\"name\":\"a\",\"arguments\":{}}</tool_call>\n<tool_call>{\"name\":\"b\"}</tool_call>",
			"Sure.\n", "need tools", []string{`a {}`, `b {}`}},
		{"call from inside reasoning", qwenThink, jsonTools, stateReasoning,
			"plan<tool_call>{\"name\":\"f\",\"arguments\":{\"x\":[1,2]}}</tool_call>done", "done", "plan", []string{`f {"x":[1,2]}`}},
		{"list of calls", nil, jsonTools, stateNormal,
			`<tool_call>[{"name":"a","arguments":{"k":1}},{"name":"b","arguments":"{\"j\": 2}"}]</tool_call>`, "", "",
			[]string{`a {"k":1}`, `b {"j":2}`}},
		{"malformed call is content", nil, jsonTools, stateNormal,
			"<tool_call>{\"name\": oops}</tool_call>after", "<tool_call>{\"name\": oops}</tool_call>after", "", nil},
		{"truncated call is content", qwenThink, jsonTools, stateNormal,
			"ok <tool_call>{\"name\": \"f\", \"argu", "ok <tool_call>{\"name\": \"f\", \"argu", "", nil},
		{"complete call without end marker", nil, jsonTools, stateNormal,
			"<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}}", "", "", []string{`f {"a":1}`}},
		{"call without a name is content", nil, jsonTools, stateNormal,
			`<tool_call>{"arguments":{}}</tool_call>`, `<tool_call>{"arguments":{}}</tool_call>`, "", nil},
		{"arguments that are not an object are content", nil, jsonTools, stateNormal,
			`<tool_call>{"name":"f","arguments":[1]}</tool_call>`, `<tool_call>{"name":"f","arguments":[1]}</tool_call>`, "", nil},
		{"tool_choice none: markers are text", qwenThink, nil, stateNormal,
			`<tool_call>{"name":"f"}</tool_call>`, `<tool_call>{"name":"f"}</tool_call>`, "", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, chunks := range chunkings(tc.text) {
				got := routeAll(newRouter(tc.think, tc.tools, nil, tc.initial), chunks)
				if got.content != tc.content || got.reasoning != tc.reasoning {
					t.Fatalf("chunks %q: content %q reasoning %q, want %q and %q", chunks, got.content, got.reasoning, tc.content, tc.reasoning)
				}
				var calls []string
				for _, c := range got.calls {
					calls = append(calls, c.Name+" "+c.Arguments)
					if !strings.HasPrefix(c.ID, "call_") {
						t.Errorf("tool call id %q", c.ID)
					}
				}
				if strings.Join(calls, "|") != strings.Join(tc.calls, "|") {
					t.Fatalf("chunks %q: calls %q, want %q", chunks, calls, tc.calls)
				}
				if got.madeCall != (len(tc.calls) > 0) {
					t.Fatalf("madeToolCall %v with %d calls", got.madeCall, len(tc.calls))
				}
			}
		})
	}
}

// A held-back partial marker is released as soon as it cannot be a marker.
func TestSplitterHoldsOnlyMarkerPrefixes(t *testing.T) {
	sp := newSplitter(qwenThink, jsonTools, stateNormal)
	steps := []struct{ in, out string }{
		{"a <", "a "},
		{"t", ""},
		{"x", "<tx"},
		{"<tool", ""},
		{"_", ""},
		{"box", "<tool_box"},
	}
	for _, s := range steps {
		var got string
		for _, seg := range sp.push(s.in) {
			got += seg.text
		}
		if got != s.out {
			t.Fatalf("push %q gave %q, want %q", s.in, got, s.out)
		}
	}
}

func TestInitialState(t *testing.T) {
	cases := []struct {
		name   string
		prompt []int32
		want   textState
	}{
		{"no think", []int32{1, 2, 3}, stateNormal},
		{"open think", []int32{1, 151667, 198}, stateReasoning},
		{"closed think", []int32{151667, 198, 151668, 198}, stateNormal},
		{"reopened", []int32{151667, 151668, 5, 151667}, stateReasoning},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := qwenThink.initialState(tc.prompt); got != tc.want {
				t.Errorf("initial state %v, want %v", got, tc.want)
			}
		})
	}
	if got := (*thinkMarkers)(nil).initialState([]int32{151667}); got != stateNormal {
		t.Errorf("no markers: initial state %v", got)
	}
}

// The Qwen3 tokenizer has <think>/</think> tokens and a json_tools template.
func TestInferFeaturesQwen3(t *testing.T) {
	tk := testTokenizer(t)
	m := inferThinking(tk)
	if m == nil || m.start != "<think>" || m.end != "</think>" || len(m.startIDs) != 1 || m.special {
		t.Fatalf("thinking markers %+v", m)
	}
	f := inferToolFormat(tk.Config().ChatTemplate, tk)
	if f == nil || f.name != "json_tools" || f.parse == nil {
		t.Fatalf("tool format %+v", f)
	}
}

// FuzzRouter: no text panics the router; reasoning never holds a marker
// that leaves the reasoning state (a nested <think> is text there, as in
// mlx-lm); without parsed calls nothing but think markers is removed; and
// how the text is chunked changes nothing.
func FuzzRouter(f *testing.F) {
	for _, s := range []string{
		"<think>a</think>b<tool_call>{\"name\":\"x\"}</tool_call>c",
		"<tool_call>[{\"name\":\"a\"},{}]</tool_call>",
		"<thi<think></think></tool_call><tool_call><tool_call>",
		"\xff<think>\x00</think>",
	} {
		f.Add(s, uint8(3), false)
	}
	f.Fuzz(func(t *testing.T, text string, chunk uint8, reasoning bool) {
		initial := stateNormal
		if reasoning {
			initial = stateReasoning
		}
		n := int(chunk%16) + 1
		var chunks []string
		for i := 0; i < len(text); i += n {
			chunks = append(chunks, text[i:min(i+n, len(text))])
		}
		got := routeAll(newRouter(qwenThink, jsonTools, nil, initial), chunks)
		whole := routeAll(newRouter(qwenThink, jsonTools, nil, initial), []string{text})
		if got.content != whole.content || got.reasoning != whole.reasoning || len(got.calls) != len(whole.calls) {
			t.Fatalf("chunks %q routed differently from the whole text: %+v vs %+v", chunks, got, whole)
		}
		for i := range got.calls {
			if got.calls[i].Name != whole.calls[i].Name || got.calls[i].Arguments != whole.calls[i].Arguments {
				t.Fatalf("chunks %q: call %+v vs %+v", chunks, got.calls[i], whole.calls[i])
			}
		}
		if strings.Contains(got.reasoning, "</think>") || strings.Contains(got.reasoning, "<tool_call>") {
			t.Fatalf("a marker leaked into reasoning %q", got.reasoning)
		}
		if len(got.calls) == 0 {
			kept := len(got.content) + len(got.reasoning)
			removable := strings.Count(text, "<think>")*len("<think>") + strings.Count(text, "</think>")*len("</think>")
			if kept > len(text) || kept < len(text)-removable {
				t.Fatalf("text %q routed to content %q reasoning %q", text, got.content, got.reasoning)
			}
		}
	})
}
