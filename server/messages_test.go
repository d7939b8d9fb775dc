package server

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mlxgo/mlxgo/internal/testenv"
)

const anthropicWeatherTool = `[{"name":"get_weather","description":"Current weather","input_schema":{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string"}},"required":["city"]}}]`

type messageReply struct {
	ID           string
	Type         string
	Role         string
	StopReason   string  `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
	Content      []struct {
		Type, Text, Thinking, ID, Name string
		Input                          json.RawMessage
	}
	Usage struct {
		InputTokens     int `json:"input_tokens"`
		OutputTokens    int `json:"output_tokens"`
		CacheReadTokens int `json:"cache_read_input_tokens"`
	}
	X *Composition `json:"x_mlxgo"`
}

// TestMessagesToolUse: Anthropic's Messages API over the same engine: a
// tool_use turn (thinking first), then the tool_result turn answered as
// text, in Anthropic's shapes.
func TestMessagesToolUse(t *testing.T) {
	tk := testTokenizer(t)
	runner := &agentRunner{t: tk}
	url, _ := startServer(t, Config{APIKey: "k", Model: Model{Tokenizer: tk, Runner: serial(runner), ContextLength: 4096}})
	hdr := []string{"x-api-key", "k", "anthropic-version", "2023-06-01"}
	status, _, b := post(t, url+"/v1/messages", `{"model":"m","max_tokens":64,"system":"Be terse.","messages":[{"role":"user","content":"Weather in Paris?"}],"tools":`+anthropicWeatherTool+`}`, hdr...)
	if status != 200 {
		t.Fatalf("status %d: %s", status, b)
	}
	var r messageReply
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	types := []string{}
	for _, c := range r.Content {
		types = append(types, c.Type)
	}
	if r.Type != "message" || r.Role != "assistant" || !strings.HasPrefix(r.ID, "msg_") || r.StopReason != "tool_use" || !slices.Equal(types, []string{"thinking", "tool_use"}) {
		t.Fatalf("first turn: %s", b)
	}
	use := r.Content[1]
	if r.Content[0].Thinking != "\nI need the weather tool.\n" || use.Name != "get_weather" || string(use.Input) != `{"city":"Paris","unit":"celsius"}` || !strings.HasPrefix(use.ID, "toolu_") {
		t.Errorf("blocks %+v", r.Content)
	}
	if r.Usage.InputTokens < 1 || r.Usage.OutputTokens < 1 || r.X == nil {
		t.Errorf("usage %+v x_mlxgo %v", r.Usage, r.X)
	}
	if p := runner.prompts[0]; !strings.HasPrefix(p, "<|im_start|>system\nBe terse.") || !strings.Contains(p, `"name": "get_weather"`) {
		t.Errorf("the template did not get the system prompt and tools: %q", p)
	}

	second := `{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"Weather in Paris?"},` +
		`{"role":"assistant","content":[{"type":"thinking","thinking":"x","signature":""},{"type":"tool_use","id":"` + use.ID + `","name":"get_weather","input":{"city":"Paris"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"` + use.ID + `","content":[{"type":"text","text":"{\"temp\": 18}"}]}]}],"tools":` + anthropicWeatherTool + `}`
	status, _, b = post(t, url+"/v1/messages", second, hdr...)
	var r2 messageReply
	json.Unmarshal(b, &r2)
	if status != 200 || r2.StopReason != "end_turn" || len(r2.Content) != 2 || r2.Content[1].Type != "text" || r2.Content[1].Text != "\n\nIt is 18°C in Paris." {
		t.Fatalf("second turn: %d %s", status, b)
	}
	if p := runner.prompts[1]; !strings.Contains(p, `"arguments": {"city": "Paris"}`) || !strings.Contains(p, "<tool_response>\n{\"temp\": 18}\n</tool_response>") {
		t.Errorf("second prompt does not hold the call and its result: %q", p)
	}

	// count_tokens is the prompt the first turn ran on.
	status, _, b = post(t, url+"/v1/messages/count_tokens", `{"model":"m","system":"Be terse.","messages":[{"role":"user","content":"Weather in Paris?"}],"tools":`+anthropicWeatherTool+`}`, hdr...)
	var ct struct {
		InputTokens int `json:"input_tokens"`
	}
	json.Unmarshal(b, &ct)
	if status != 200 || ct.InputTokens != r.Usage.InputTokens {
		t.Errorf("count_tokens %d %s, want %d", status, b, r.Usage.InputTokens)
	}
}

// TestMessagesStreamEvents: the exact event sequence of a streamed tool
// use: message_start, a thinking block, a tool_use block with its input as
// one input_json_delta, message_delta with stop_reason, message_stop.
func TestMessagesStreamEvents(t *testing.T) {
	tk := testTokenizer(t)
	url, _ := startServer(t, Config{Model: Model{Tokenizer: tk, Runner: serial(&agentRunner{t: tk})}})
	req, _ := http.NewRequest("POST", url+"/v1/messages", strings.NewReader(`{"model":"m","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"Weather?"}],"tools":`+anthropicWeatherTool+`}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var names []string
	var thinking, args strings.Builder
	var final map[string]any
	body, _ := readAll(resp)
	for _, ev := range strings.Split(strings.TrimSpace(body), "\n\n") {
		lines := strings.SplitN(ev, "\n", 2)
		name, ok1 := strings.CutPrefix(lines[0], "event: ")
		data, ok2 := strings.CutPrefix(lines[1], "data: ")
		if !ok1 || !ok2 {
			t.Fatalf("malformed event %q", ev)
		}
		v := decodeJSON(t, []byte(data))
		if v["type"] != name {
			t.Errorf("event %s carries type %v", name, v["type"])
		}
		if name == "content_block_delta" {
			d := v["delta"].(map[string]any)
			name += ":" + d["type"].(string)
			if s, ok := d["thinking"].(string); ok {
				thinking.WriteString(s)
			}
			if s, ok := d["partial_json"].(string); ok {
				args.WriteString(s)
			}
		}
		if name == "content_block_start" {
			name += ":" + v["content_block"].(map[string]any)["type"].(string)
		}
		if name == "message_delta" {
			final = v
		}
		if len(names) == 0 || names[len(names)-1] != name {
			names = append(names, name)
		}
	}
	want := []string{"message_start", "content_block_start:thinking", "content_block_delta:thinking_delta", "content_block_stop",
		"content_block_start:tool_use", "content_block_delta:input_json_delta", "content_block_stop", "message_delta", "message_stop"}
	if !slices.Equal(names, want) {
		t.Errorf("events\n%v\nwant\n%v", names, want)
	}
	if thinking.String() != "\nI need the weather tool.\n" || args.String() != `{"city":"Paris","unit":"celsius"}` {
		t.Errorf("thinking %q, input %q", thinking.String(), args.String())
	}
	if d := final["delta"].(map[string]any); d["stop_reason"] != "tool_use" || final["usage"].(map[string]any)["output_tokens"].(float64) < 1 {
		t.Errorf("message_delta %v", final)
	}
}

// TestMessagesStopAndErrors: stop_sequence names the stop string; errors
// come in Anthropic's shape with its types.
func TestMessagesStopAndErrors(t *testing.T) {
	url, _ := startServer(t, Config{APIKey: "k"})
	hdr := []string{"x-api-key", "k"}
	status, _, b := post(t, url+"/v1/messages", `{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"hi"}],"stop_sequences":["nope","42"]}`, hdr...)
	var r messageReply
	json.Unmarshal(b, &r)
	if status != 200 || r.StopReason != "stop_sequence" || r.StopSequence == nil || *r.StopSequence != "42" || r.Content[0].Text != "Hello there! The answer is " {
		t.Errorf("stop sequence: %d %s", status, b)
	}
	status, _, b = post(t, url+"/v1/messages", `{"model":"m","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`, hdr...)
	json.Unmarshal(b, &r)
	if status != 200 || r.StopReason != "max_tokens" || r.StopSequence != nil {
		t.Errorf("max_tokens: %d %s", status, b)
	}
	for _, tc := range []struct {
		name, body string
		hdr        []string
		status     int
		typ, in    string
	}{
		{"no max_tokens", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, hdr, 400, "invalid_request_error", "max_tokens"},
		{"tool_choice any", `{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"hi"}],"tools":` + anthropicWeatherTool + `,"tool_choice":{"type":"any"}}`, hdr, 400, "invalid_request_error", "tool_choice"},
		{"image block", `{"model":"m","max_tokens":8,"messages":[{"role":"user","content":[{"type":"image","source":{}}]}]}`, hdr, 400, "invalid_request_error", "messages[0].content[0].type"},
		{"bad role", `{"model":"m","max_tokens":8,"messages":[{"role":"system","content":"hi"}]}`, hdr, 400, "invalid_request_error", "messages[0].role"},
		{"temperature above 1", `{"model":"m","max_tokens":8,"temperature":1.5,"messages":[{"role":"user","content":"hi"}]}`, hdr, 400, "invalid_request_error", "temperature"},
		{"wrong key", `{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`, []string{"x-api-key", "nope"}, 401, "authentication_error", "API key"},
		{"over context", `{"model":"m","max_tokens":1000,"messages":[{"role":"user","content":"hi"}]}`, hdr, 400, "invalid_request_error", "context"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, b := post(t, url+"/v1/messages", tc.body, tc.hdr...)
			var e struct {
				Type  string
				Error struct{ Type, Message string }
			}
			json.Unmarshal(b, &e)
			if status != tc.status || e.Type != "error" || e.Error.Type != tc.typ || !strings.Contains(e.Error.Message, tc.in) {
				t.Errorf("status %d body %s, want %d %s naming %q", status, b, tc.status, tc.typ, tc.in)
			}
		})
	}
}

// TestAnthropicClient runs server/testdata/anthropic_client.py, the
// official anthropic package (pinned in .venv), against the agent fake (tool
// use, thinking, streaming) and against SmolLM2 (text, usage, errors).
func TestAnthropicClient(t *testing.T) {
	py := testenv.Python(t)
	if err := exec.Command(py, "-c", "import anthropic").Run(); err != nil {
		testenv.Missing(t, "the anthropic package in .venv", "make venv")
	}
	tk := testTokenizer(t)
	agent, _ := startServer(t, Config{APIKey: "test-key", Model: Model{Tokenizer: tk, Runner: serial(&agentRunner{t: tk}), ContextLength: 4096}})
	m, stk := smollm2(t)
	smol, _ := startServer(t, Config{APIKey: "test-key", MaxTokens: 8, Model: NewMLXModel(m, stk, "smollm2", "test", 64<<20)})
	script := filepath.Join(testenv.RepoRoot(), "server", "testdata", "anthropic_client.py")
	cmd := exec.Command(py, script, agent, smol, "test-key")
	cmd.Env = append(os.Environ(), "ANTHROPIC_LOG=")
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("anthropic client checks failed: %v", err)
	}
}

func readAll(resp *http.Response) (string, error) {
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
