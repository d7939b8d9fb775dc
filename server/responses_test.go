package server

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mlxgo/mlxgo/internal/testenv"
)

const responsesWeatherTool = `[{"type":"function","name":"get_weather","description":"Current weather","parameters":{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string"}},"required":["city"]}}]`

type responseReply struct {
	ID                 string
	Object             string
	Status             string
	PreviousResponseID *string                  `json:"previous_response_id"`
	IncompleteDetails  *struct{ Reason string } `json:"incomplete_details"`
	Output             []struct {
		Type, ID, Status, Role, Name, Arguments string
		CallID                                  string `json:"call_id"`
		Content                                 []struct{ Type, Text string }
	}
	Usage struct {
		InputTokens        int `json:"input_tokens"`
		OutputTokens       int `json:"output_tokens"`
		TotalTokens        int `json:"total_tokens"`
		InputTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"input_tokens_details"`
	}
	X *Composition `json:"x_mlxgo"`
}

func (r *responseReply) types() []string {
	out := []string{}
	for _, o := range r.Output {
		out = append(out, o.Type)
	}
	return out
}

func postResponse(t *testing.T, url, body string) responseReply {
	t.Helper()
	status, _, b := post(t, url+"/v1/responses", body)
	if status != 200 {
		t.Fatalf("status %d: %s", status, b)
	}
	var r responseReply
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestResponsesToolRoundTrip: a function_call output item (reasoning
// first), its function_call_output sent back as input items, the answer as
// a message; the prompt the template got holds instructions, the call and
// its result.
func TestResponsesToolRoundTrip(t *testing.T) {
	tk := testTokenizer(t)
	runner := &agentRunner{t: tk}
	url, _ := startServer(t, Config{Model: Model{Tokenizer: tk, Runner: serial(runner), ContextLength: 4096}})
	r := postResponse(t, url, `{"model":"m","instructions":"Be terse.","input":"Weather in Paris?","tools":`+responsesWeatherTool+`}`)
	if r.Object != "response" || r.Status != "completed" || !strings.HasPrefix(r.ID, "resp_") || !slices.Equal(r.types(), []string{"reasoning", "function_call"}) {
		t.Fatalf("first turn %+v", r)
	}
	if r.Output[0].Content[0].Type != "reasoning_text" || r.Output[0].Content[0].Text != "\nI need the weather tool.\n" {
		t.Errorf("reasoning %+v", r.Output[0])
	}
	call := r.Output[1]
	if call.Name != "get_weather" || call.Arguments != `{"city":"Paris","unit":"celsius"}` || !strings.HasPrefix(call.CallID, "call_") || !strings.HasPrefix(call.ID, "fc_") {
		t.Errorf("call %+v", call)
	}
	if r.Usage.InputTokens < 1 || r.Usage.OutputTokens < 1 || r.Usage.TotalTokens != r.Usage.InputTokens+r.Usage.OutputTokens || r.X == nil {
		t.Errorf("usage %+v x_mlxgo %v", r.Usage, r.X)
	}
	if p := runner.prompts[0]; !strings.HasPrefix(p, "<|im_start|>system\nBe terse.") || !strings.Contains(p, `"name": "get_weather"`) {
		t.Errorf("the template did not get the instructions and tools: %q", p)
	}

	items := `[{"role":"user","content":[{"type":"input_text","text":"Weather in Paris?"}]},` +
		`{"type":"function_call","call_id":"` + call.CallID + `","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},` +
		`{"type":"function_call_output","call_id":"` + call.CallID + `","output":"{\"temp\": 18}"}]`
	r2 := postResponse(t, url, `{"model":"m","input":`+items+`,"tools":`+responsesWeatherTool+`}`)
	if !slices.Equal(r2.types(), []string{"reasoning", "message"}) || r2.Output[1].Content[0].Text != "\n\nIt is 18°C in Paris." || r2.Output[1].Role != "assistant" {
		t.Fatalf("second turn %+v", r2)
	}
	if p := runner.prompts[1]; !strings.Contains(p, `"arguments": {"city": "Paris"}`) || !strings.Contains(p, "<tool_response>\n{\"temp\": 18}\n</tool_response>") {
		t.Errorf("second prompt does not hold the call and its result: %q", p)
	}
}

// TestResponsesPreviousID: previous_response_id continues the stored
// conversation (input and output, not instructions); store: false keeps
// nothing; the store is an LRU of --response-store entries.
func TestResponsesPreviousID(t *testing.T) {
	tk := testTokenizer(t)
	runner := &agentRunner{t: tk}
	url, s := startServer(t, Config{Model: Model{Tokenizer: tk, Runner: serial(runner), ContextLength: 4096}, ResponseStore: 2})
	r := postResponse(t, url, `{"model":"m","instructions":"Be terse.","input":"Weather in Paris?","tools":`+responsesWeatherTool+`}`)
	callID := r.Output[1].CallID
	r2 := postResponse(t, url, `{"model":"m","previous_response_id":"`+r.ID+`","input":[{"type":"function_call_output","call_id":"`+callID+`","output":"{\"temp\": 18}"}],"tools":`+responsesWeatherTool+`}`)
	if r2.PreviousResponseID == nil || *r2.PreviousResponseID != r.ID || r2.Output[len(r2.Output)-1].Content[0].Text != "\n\nIt is 18°C in Paris." {
		t.Fatalf("chained turn %+v", r2)
	}
	p := runner.prompts[1]
	if strings.Contains(p, "Be terse.") || !strings.Contains(p, "Weather in Paris?") || !strings.Contains(p, `"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}`) || !strings.Contains(p, "{\"temp\": 18}") {
		t.Errorf("the chained prompt does not continue the stored conversation: %q", p)
	}
	status, _, b := post(t, url+"/v1/responses/"+r2.ID, "")
	if status != 405 {
		t.Errorf("POST on a response id: %d %s", status, b)
	}

	nostore := postResponse(t, url, `{"model":"m","input":"hi","store":false}`)
	status, _, b = post(t, url+"/v1/responses", `{"model":"m","input":"again","previous_response_id":"`+nostore.ID+`"}`)
	if status != 400 || !strings.Contains(string(b), `"code":"previous_response_not_found"`) || !strings.Contains(string(b), `"param":"previous_response_id"`) {
		t.Errorf("previous response with store false: %d %s", status, b)
	}
	if n := s.responses.len(); n != 2 {
		t.Errorf("store holds %d responses, want 2", n)
	}
	postResponse(t, url, `{"model":"m","input":"one more"}`)
	if _, ok := s.responses.get(r.ID); ok || s.responses.len() != 2 {
		t.Errorf("the oldest response was not dropped (store of 2 holds %d)", s.responses.len())
	}
}

// TestResponsesStreamEvents: the event chain of a streamed tool call and
// of a streamed message, with increasing sequence numbers; the final
// response equals what the deltas built.
func TestResponsesStreamEvents(t *testing.T) {
	tk := testTokenizer(t)
	url, _ := startServer(t, Config{Model: Model{Tokenizer: tk, Runner: serial(&agentRunner{t: tk}), ContextLength: 4096}})
	for _, tc := range []struct {
		name, body string
		want       []string
	}{
		{"tool call", `{"model":"m","stream":true,"input":"Weather?","tools":` + responsesWeatherTool + `}`, []string{
			"response.created", "response.in_progress",
			"response.output_item.added:reasoning", "response.content_part.added", "response.reasoning_text.delta", "response.reasoning_text.done", "response.content_part.done", "response.output_item.done",
			"response.output_item.added:function_call", "response.function_call_arguments.delta", "response.function_call_arguments.done", "response.output_item.done",
			"response.completed"}},
		{"message", `{"model":"m","stream":true,"input":"Colour?"}`, []string{
			"response.created", "response.in_progress",
			"response.output_item.added:reasoning", "response.content_part.added", "response.reasoning_text.delta", "response.reasoning_text.done", "response.content_part.done", "response.output_item.done",
			"response.output_item.added:message", "response.content_part.added", "response.output_text.delta", "response.output_text.done", "response.content_part.done", "response.output_item.done",
			"response.completed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := post(t, url+"/v1/responses", tc.body)
			if status != 200 {
				t.Fatalf("status %d: %s", status, body)
			}
			var names []string
			var text, args strings.Builder
			var final map[string]any
			for i, ev := range strings.Split(strings.TrimSpace(string(body)), "\n\n") {
				lines := strings.SplitN(ev, "\n", 2)
				name, ok1 := strings.CutPrefix(lines[0], "event: ")
				data, ok2 := strings.CutPrefix(lines[1], "data: ")
				if !ok1 || !ok2 {
					t.Fatalf("malformed event %q", ev)
				}
				v := decodeJSON(t, []byte(data))
				if v["type"] != name || v["sequence_number"] != float64(i) {
					t.Errorf("event %d %s carries type %v sequence %v", i, name, v["type"], v["sequence_number"])
				}
				switch name {
				case "response.output_item.added":
					name += ":" + v["item"].(map[string]any)["type"].(string)
				case "response.output_text.delta":
					text.WriteString(v["delta"].(string))
				case "response.function_call_arguments.delta":
					args.WriteString(v["delta"].(string))
				case "response.completed":
					final = v["response"].(map[string]any)
				}
				if len(names) == 0 || names[len(names)-1] != name {
					names = append(names, name)
				}
			}
			if !slices.Equal(names, tc.want) {
				t.Errorf("events\n%v\nwant\n%v", names, tc.want)
			}
			out := final["output"].([]any)
			last := out[len(out)-1].(map[string]any)
			switch last["type"] {
			case "function_call":
				if args.String() != `{"city":"Paris","unit":"celsius"}` || last["arguments"] != args.String() {
					t.Errorf("arguments %q, final %v", args.String(), last)
				}
			case "message":
				if got := last["content"].([]any)[0].(map[string]any)["text"]; text.String() != "\n\nBlue." || got != text.String() {
					t.Errorf("text %q, final %v", text.String(), got)
				}
			}
			if final["status"] != "completed" || final["usage"].(map[string]any)["output_tokens"].(float64) < 1 {
				t.Errorf("final %v", final)
			}
		})
	}
}

// TestResponsesIncompleteAndErrors: max_output_tokens makes the response
// incomplete (response.incomplete when streamed); fields mlxgo cannot
// honour and malformed items are 400s in OpenAI's shape naming them.
func TestResponsesIncompleteAndErrors(t *testing.T) {
	url, _ := startServer(t, Config{})
	r := postResponse(t, url, `{"model":"m","input":"hi","max_output_tokens":3}`)
	if r.Status != "incomplete" || r.IncompleteDetails == nil || r.IncompleteDetails.Reason != "max_output_tokens" || r.Usage.OutputTokens != 3 || r.Output[0].Status != "incomplete" {
		t.Errorf("max_output_tokens: %+v", r)
	}
	status, _, body := post(t, url+"/v1/responses", `{"model":"m","input":"hi","max_output_tokens":3,"stream":true}`)
	if evs := strings.Split(strings.TrimSpace(string(body)), "\n\n"); status != 200 || !strings.HasPrefix(evs[len(evs)-1], "event: response.incomplete\n") {
		t.Errorf("streamed max_output_tokens: %d %s", status, body)
	}
	for _, tc := range []struct{ name, body, param string }{
		{"no input", `{"model":"m"}`, "input"},
		{"image part", `{"model":"m","input":[{"role":"user","content":[{"type":"input_image","image_url":"x"}]}]}`, "input[0].content[0].type"},
		{"web search tool", `{"model":"m","input":"hi","tools":[{"type":"web_search"}]}`, "tools[0].type"},
		{"strict tool", `{"model":"m","input":"hi","tools":[{"type":"function","name":"f","parameters":{},"strict":true}]}`, "tools[0].strict"},
		{"tool_choice required", `{"model":"m","input":"hi","tool_choice":"required"}`, "tool_choice"},
		{"reasoning effort", `{"model":"m","input":"hi","reasoning":{"effort":"high"}}`, "reasoning"},
		{"json schema", `{"model":"m","input":"hi","text":{"format":{"type":"json_schema","name":"x","schema":{}}}}`, "text.format"},
		{"bad max_output_tokens", `{"model":"m","input":"hi","max_output_tokens":0}`, "max_output_tokens"},
		{"bad role", `{"model":"m","input":[{"role":"tool","content":"x"}]}`, "input[0].role"},
		{"unknown item", `{"model":"m","input":[{"type":"item_reference","id":"x"}]}`, "input[0].type"},
		{"unknown previous", `{"model":"m","input":"hi","previous_response_id":"resp_nope"}`, "previous_response_id"},
		{"over context", `{"model":"m","input":"hi","max_output_tokens":1000}`, "input"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, b := post(t, url+"/v1/responses", tc.body)
			var e errorBody
			json.Unmarshal(b, &e)
			if status != 400 || e.Error.Type != "invalid_request_error" || e.Error.Param == nil || *e.Error.Param != tc.param {
				t.Errorf("status %d body %s, want 400 naming %q", status, b, tc.param)
			}
		})
	}
	// Fields that ask for nothing are accepted.
	postResponse(t, url, `{"model":"m","input":"hi","reasoning":{},"parallel_tool_calls":true,"truncation":"disabled","include":[],"store":true,"metadata":{"k":"v"},"text":{"format":{"type":"text"}}}`)
	status, _, b := post(t, url+"/v1/responses/resp_nope", "")
	if status != 405 {
		t.Errorf("POST /v1/responses/ID: %d %s", status, b)
	}
}

// TestOpenAIClientResponses runs server/testdata/openai_responses.py, the
// official openai package's client.responses, against the agent fake (tool
// calls, reasoning items, streaming, previous_response_id) and SmolLM2
// (text, usage with cached tokens, greedy stream = non-stream).
func TestOpenAIClientResponses(t *testing.T) {
	py := testenv.Python(t)
	if err := exec.Command(py, "-c", "import openai").Run(); err != nil {
		testenv.Missing(t, "the openai package in .venv", "make venv")
	}
	tk := testTokenizer(t)
	agent, _ := startServer(t, Config{APIKey: "test-key", Model: Model{ID: "agent", Tokenizer: tk, Runner: serial(&agentRunner{t: tk}), ContextLength: 4096}})
	m, stk := smollm2(t)
	smol, _ := startServer(t, Config{APIKey: "test-key", MaxTokens: 8, Model: NewMLXModel(m, stk, "smollm2", "test", 64<<20)})
	cmd := exec.Command(py, filepath.Join(testenv.RepoRoot(), "server", "testdata", "openai_responses.py"), agent+"/v1", smol+"/v1", "test-key")
	cmd.Env = append(os.Environ(), "OPENAI_LOG=")
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("openai client checks failed: %v", err)
	}
}
