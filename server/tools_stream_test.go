package server

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestToolCallStreamMatchesBody: a streamed tool call sends no content delta
// for the blank line before the call (the non-streamed message has content
// null), and an answer that is text streams all of it, whitespace included.
func TestToolCallStreamMatchesBody(t *testing.T) {
	tk := testTokenizer(t)
	url, _ := startServer(t, Config{Model: Model{Tokenizer: tk, Runner: serial(&agentRunner{t: tk})}})
	for _, tc := range []struct {
		name, body string
		content    *string
	}{
		{"tool call", `{"messages":[{"role":"user","content":"Weather?"}],"tools":` + weatherTool + `}`, nil},
		{"answer", `{"messages":[{"role":"user","content":"Sky?"}],"tools":` + weatherTool + `,"tool_choice":"none"}`, ptr("\n\nBlue.")},
		{"answer beside tools", `{"messages":[{"role":"user","content":"Weather?"},{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"18"},{"role":"user","content":"<tool_response>"}],"tools":` + weatherTool + `}`, ptr("\n\nIt is 18°C in Paris.")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, b := post(t, url+"/v1/chat/completions", tc.body)
			var r toolReply
			if err := json.Unmarshal(b, &r); err != nil {
				t.Fatal(err)
			}
			if got := r.Choices[0].Message.Content; (got == nil) != (tc.content == nil) || (got != nil && *got != *tc.content) {
				t.Fatalf("body content %v, want %v: %s", deref(got), deref(tc.content), b)
			}
			_, _, b = post(t, url+"/v1/chat/completions", strings.Replace(tc.body, "{", `{"stream":true,`, 1))
			var streamed strings.Builder
			for i, e := range sseEvents(t, b) {
				if e == "[DONE]" {
					continue
				}
				d := decodeJSON(t, []byte(e))["choices"].([]any)[0].(map[string]any)["delta"].(map[string]any)
				s, ok := d["content"].(string)
				if ok && i > 0 && s == "" {
					t.Errorf("chunk %d has an empty content delta: %s", i, e)
				}
				if ok && tc.content == nil && s != "" {
					t.Errorf("chunk %d streams content %q before a pure tool call: %s", i, s, e)
				}
				streamed.WriteString(s)
			}
			if tc.content != nil && streamed.String() != *tc.content {
				t.Errorf("streamed content %q, body %q", streamed.String(), *tc.content)
			}
		})
	}
}

// TestToolCallsNeedDeclaredTools: a model that writes a tool call when the
// request declared no tools has written text: it comes back as content,
// finish_reason stop, and no tool_calls.
func TestToolCallsNeedDeclaredTools(t *testing.T) {
	tk := testTokenizer(t)
	ids, err := tk.Encode(agentToolCall, false)
	if err != nil {
		t.Fatal(err)
	}
	url, _ := startServer(t, Config{Model: Model{Tokenizer: tk, Runner: serial(&scriptRunner{script: ids})}})
	_, _, b := post(t, url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"Weather?"}]}`)
	var r toolReply
	json.Unmarshal(b, &r)
	c := r.Choices[0]
	if c.FinishReason != "stop" || len(c.Message.ToolCalls) != 0 || c.Message.Content == nil || !strings.Contains(*c.Message.Content, "<tool_call>") {
		t.Errorf("no tools declared: %s", b)
	}
	_, _, b = post(t, url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"Weather?"}],"tools":`+weatherTool+`}`)
	json.Unmarshal(b, &r)
	if c := r.Choices[0]; c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) != 1 {
		t.Errorf("tools declared: %s", b)
	}
}

func ptr(s string) *string { return &s }

func deref(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}
