package server

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlxgo/mlxgo/gen"
	"github.com/mlxgo/mlxgo/internal/testenv"
	"github.com/mlxgo/mlxgo/tok"
)

// agentRunner plays a Qwen3-style agent without MLX: it reads the rendered
// prompt and answers with a tool call when the template showed it tools,
// with a final answer once a tool result is in the conversation, and with a
// short reasoned answer otherwise. Each token's log-probability is reported
// with made-up but well-formed values, so the HTTP layer's routing and
// formatting are tested on exactly chosen tokens.
type agentRunner struct {
	t       *tok.Tokenizer
	prompts []string
}

const (
	agentToolCall = "<think>\nI need the weather tool.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call>"
	agentAnswer   = "<think>\nThe tool said 18.\n</think>\n\nIt is 18°C in Paris."
	agentPlain    = "<think>\nEasy.\n</think>\n\nBlue."
)

func (r *agentRunner) Run(ctx context.Context, prompt []int32, o gen.Options, seed *uint64, emit func(int32) error) (Result, error) {
	text := r.t.Decode(prompt, false)
	r.prompts = append(r.prompts, text)
	script := agentPlain
	switch {
	case strings.Contains(text, "<tool_response>"):
		script = agentAnswer
	case strings.Contains(text, "<tools>") && strings.Contains(text, `"get_weather"`):
		script = agentToolCall
	}
	ids, err := r.t.Encode(script, false)
	if err != nil {
		return Result{}, err
	}
	st := gen.Stats{PromptTokens: len(prompt), FinishReason: gen.FinishStop}
	for i, id := range ids {
		if o.MaxTokens > 0 && i == o.MaxTokens {
			st.FinishReason = gen.FinishLength
			break
		}
		st.GeneratedTokens++
		if o.Logprobs != nil {
			o.Logprobs(fakeLogprob(id, i, o.TopLogprobs))
		}
		if err := emit(id); err != nil {
			if err == gen.ErrStop {
				break
			}
			st.FinishReason = gen.FinishCancelled
			return Result{Stats: st}, err
		}
	}
	return Result{Stats: st}, nil
}

// fakeLogprob: the emitted token is the most likely, then alternatives of
// ids 10, 11, ... with falling log-probabilities.
func fakeLogprob(id int32, step, top int) gen.Logprob {
	lp := gen.Logprob{Token: id, Logprob: -0.125 * float32(step%4)}
	for k := 0; k < top; k++ {
		alt := gen.TokenLogprob{Token: int32(10 + k), Logprob: lp.Logprob - float32(k+1)}
		if k == 0 {
			alt = gen.TokenLogprob{Token: id, Logprob: lp.Logprob}
		}
		lp.Top = append(lp.Top, alt)
	}
	return lp
}

const weatherTool = `[{"type":"function","function":{"name":"get_weather","description":"Current weather","parameters":{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string"}},"required":["city"]}}}]`

type toolReply struct {
	Choices []struct {
		Message struct {
			Content          *string
			ReasoningContent string `json:"reasoning_content"`
			ToolCalls        []struct {
				ID       string
				Type     string
				Function struct{ Name, Arguments string }
			} `json:"tool_calls"`
		}
		FinishReason string `json:"finish_reason"`
	}
}

func TestToolCallRoundTrip(t *testing.T) {
	tk := testTokenizer(t)
	runner := &agentRunner{t: tk}
	url, _ := startServer(t, Config{Model: Model{Tokenizer: tk, Runner: serial(runner)}})
	user := `{"role":"user","content":"Weather in Paris?"}`

	status, _, b := post(t, url+"/v1/chat/completions", `{"messages":[`+user+`],"tools":`+weatherTool+`}`)
	if status != 200 {
		t.Fatalf("status %d: %s", status, b)
	}
	var r1 toolReply
	if err := json.Unmarshal(b, &r1); err != nil {
		t.Fatal(err)
	}
	c := r1.Choices[0]
	if c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) != 1 || c.Message.Content != nil {
		t.Fatalf("first turn: %s", b)
	}
	call := c.Message.ToolCalls[0]
	if call.Type != "function" || call.Function.Name != "get_weather" || call.Function.Arguments != `{"city":"Paris","unit":"celsius"}` || !strings.HasPrefix(call.ID, "call_") {
		t.Errorf("tool call %+v", call)
	}
	if c.Message.ReasoningContent != "\nI need the weather tool.\n" {
		t.Errorf("reasoning %q", c.Message.ReasoningContent)
	}
	var comp struct {
		X Composition `json:"x_mlxgo"`
	}
	json.Unmarshal(b, &comp)
	if comp.X.RequestFeatures != "tool_calls=json_tools tools=1 reasoning_split=<think>...</think>" {
		t.Errorf("x_mlxgo request_features %q", comp.X.RequestFeatures)
	}
	if !strings.Contains(runner.prompts[0], `"name": "get_weather"`) {
		t.Errorf("the template was not given the tools: %q", runner.prompts[0])
	}

	// Second turn: the assistant's call (arguments as a JSON string) and
	// the tool's answer render through the template.
	assistant := `{"role":"assistant","content":null,"tool_calls":[{"id":"` + call.ID + `","type":"function","function":{"name":"get_weather","arguments":` + jsonString(call.Function.Arguments) + `}}]}`
	toolMsg := `{"role":"tool","tool_call_id":"` + call.ID + `","content":"{\"temp\": 18}"}`
	status, _, b = post(t, url+"/v1/chat/completions", `{"messages":[`+user+`,`+assistant+`,`+toolMsg+`],"tools":`+weatherTool+`}`)
	if status != 200 {
		t.Fatalf("second turn: status %d: %s", status, b)
	}
	var r2 toolReply
	json.Unmarshal(b, &r2)
	c = r2.Choices[0]
	if c.FinishReason != "stop" || len(c.Message.ToolCalls) != 0 || c.Message.Content == nil || *c.Message.Content != "\n\nIt is 18°C in Paris." {
		t.Errorf("second turn: %s", b)
	}
	// Qwen3's template prints a string argument as is and an object with
	// tojson (", " and ": "): the spaced form shows the object arrived.
	p := runner.prompts[1]
	if !strings.Contains(p, `{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}`) || !strings.Contains(p, "<tool_response>\n{\"temp\": 18}\n</tool_response>") {
		t.Errorf("second prompt does not hold the call and its result: %q", p)
	}

	// tool_choice "none": the template sees no tools and nothing is parsed.
	status, _, b = post(t, url+"/v1/chat/completions", `{"messages":[`+user+`],"tools":`+weatherTool+`,"tool_choice":"none"}`)
	var r3 toolReply
	json.Unmarshal(b, &r3)
	if status != 200 || r3.Choices[0].FinishReason != "stop" || *r3.Choices[0].Message.Content != "\n\nBlue." {
		t.Errorf("tool_choice none: %d %s", status, b)
	}
}

func jsonString(s string) string { b, _ := json.Marshal(s); return string(b) }

// TestToolCallStream: tool-call text is never streamed as content; the call
// arrives as one tool_calls delta with an index, reasoning as
// reasoning_content deltas, and the last chunk says tool_calls.
func TestToolCallStream(t *testing.T) {
	tk := testTokenizer(t)
	url, _ := startServer(t, Config{Model: Model{Tokenizer: tk, Runner: serial(&agentRunner{t: tk})}})
	status, _, b := post(t, url+"/v1/chat/completions", `{"stream":true,"messages":[{"role":"user","content":"Weather?"}],"tools":`+weatherTool+`}`)
	if status != 200 {
		t.Fatalf("status %d: %s", status, b)
	}
	var content, reasoning strings.Builder
	var calls []map[string]any
	finish := ""
	for _, e := range sseEvents(t, b) {
		if e == "[DONE]" {
			continue
		}
		ch := decodeJSON(t, []byte(e))["choices"].([]any)[0].(map[string]any)
		d := ch["delta"].(map[string]any)
		if s, ok := d["content"].(string); ok {
			content.WriteString(s)
		}
		if s, ok := d["reasoning_content"].(string); ok {
			reasoning.WriteString(s)
		}
		if tc, ok := d["tool_calls"].([]any); ok {
			for _, c := range tc {
				calls = append(calls, c.(map[string]any))
			}
		}
		if f, ok := ch["finish_reason"].(string); ok {
			finish = f
		}
	}
	if strings.Contains(content.String(), "tool_call") || strings.TrimSpace(content.String()) != "" {
		t.Errorf("content %q: tool-call text was streamed", content.String())
	}
	if reasoning.String() != "\nI need the weather tool.\n" || finish != "tool_calls" {
		t.Errorf("reasoning %q finish %q", reasoning.String(), finish)
	}
	if len(calls) != 1 || calls[0]["index"] != 0.0 || calls[0]["function"].(map[string]any)["arguments"] != `{"city":"Paris","unit":"celsius"}` {
		t.Errorf("tool call deltas %v", calls)
	}
}

// A model whose template has no tool-call format cannot be given tools.
func TestToolsRefusedWithoutFormat(t *testing.T) {
	tk, err := tok.Load(testenv.DataFile(t, "tokenizers/gemma3"))
	if err != nil {
		t.Fatal(err)
	}
	url, _ := startServer(t, Config{Model: Model{Tokenizer: tk}})
	status, _, b := post(t, url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"tools":`+weatherTool+`}`)
	if status != 400 || !strings.Contains(string(b), `"param":"tools"`) {
		t.Errorf("status %d: %s", status, b)
	}
	status, _, b = post(t, url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"tools":`+weatherTool+`,"tool_choice":"none"}`)
	if status != 200 {
		t.Errorf("tool_choice none: status %d: %s", status, b)
	}
}

// TestOpenAIClientFeatures runs server/testdata/openai_features.py (the
// official openai package) against the agent runner: a tools round trip,
// streamed tool calls, reasoning_content, and logprobs in both shapes.
func TestOpenAIClientFeatures(t *testing.T) {
	py := testenv.Python(t)
	if err := exec.Command(py, "-c", "import openai").Run(); err != nil {
		testenv.Missing(t, "the openai package in .venv", "make venv")
	}
	tk := testTokenizer(t)
	url, _ := startServer(t, Config{Model: Model{ID: "agent", Tokenizer: tk, Runner: serial(&agentRunner{t: tk})}})
	cmd := exec.Command(py, filepath.Join(testenv.RepoRoot(), "server", "testdata", "openai_features.py"), url+"/v1")
	cmd.Env = append(os.Environ(), "OPENAI_LOG=")
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("openai client checks failed: %v", err)
	}
}

// TestThinkingKwargs: chat_template_kwargs reach the template; without
// enable_thinking a model with think tokens gets enable_thinking=true, as
// mlx-lm passes has_thinking.
func TestThinkingKwargs(t *testing.T) {
	tk := testTokenizer(t)
	runner := &agentRunner{t: tk}
	url, _ := startServer(t, Config{Model: Model{Tokenizer: tk, Runner: serial(runner)}})
	cases := []struct {
		name, kwargs string
		emptyThink   bool
	}{
		{"default", "", false},
		{"thinking on", `,"chat_template_kwargs":{"enable_thinking":true}`, false},
		{"thinking off", `,"chat_template_kwargs":{"enable_thinking":false}`, true},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, _, b := post(t, url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"Colour?"}]`+tc.kwargs+`}`)
			if status != 200 {
				t.Fatalf("status %d: %s", status, b)
			}
			p := runner.prompts[i]
			if got := strings.HasSuffix(p, "<|im_start|>assistant\n<think>\n\n</think>\n\n"); got != tc.emptyThink {
				t.Errorf("prompt ends %q: empty think block %v, want %v", p[max(0, len(p)-60):], got, tc.emptyThink)
			}
			var r toolReply
			json.Unmarshal(b, &r)
			if r.Choices[0].Message.ReasoningContent != "\nEasy.\n" || *r.Choices[0].Message.Content != "\n\nBlue." {
				t.Errorf("reply %s", b)
			}
		})
	}
}

// TestPromptEndsInsideThink: a template that opens <think> for the model
// (as reasoning-only models' do) starts the reply in reasoning, so text
// before the model's </think> is reasoning_content, streamed or not.
func TestPromptEndsInsideThink(t *testing.T) {
	tk := qwenVariant(t, nil, func(cfg map[string]any) {
		cfg["chat_template"] = cfg["chat_template"].(string) + "{%- if add_generation_prompt %}{{- '<think>\\n' }}{%- endif %}"
	})
	ids, _ := tk.Encode("Hmm, colours.\n</think>\n\nBlue.", false)
	url, _ := startServer(t, Config{Model: Model{Tokenizer: tk, Runner: serial(&scriptRunner{script: ids})}})

	status, _, b := post(t, url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"Colour?"}]}`)
	var r toolReply
	json.Unmarshal(b, &r)
	if status != 200 || r.Choices[0].Message.ReasoningContent != "Hmm, colours.\n" || *r.Choices[0].Message.Content != "\n\nBlue." {
		t.Errorf("status %d: %s", status, b)
	}
	status, _, b = post(t, url+"/v1/chat/completions", `{"stream":true,"messages":[{"role":"user","content":"Colour?"}]}`)
	var content, reasoning strings.Builder
	for _, e := range sseEvents(t, b) {
		if e == "[DONE]" {
			continue
		}
		d := decodeJSON(t, []byte(e))["choices"].([]any)[0].(map[string]any)["delta"].(map[string]any)
		if s, ok := d["content"].(string); ok {
			content.WriteString(s)
		}
		if s, ok := d["reasoning_content"].(string); ok {
			reasoning.WriteString(s)
		}
	}
	if status != 200 || reasoning.String() != "Hmm, colours.\n" || content.String() != "\n\nBlue." {
		t.Errorf("stream: reasoning %q content %q", reasoning.String(), content.String())
	}
}

// The default model, SmolLM2, has a chat template without tool calling:
// tools are refused by name rather than dropped by the template.
func TestToolsRefusedSmolLM2(t *testing.T) {
	tk, err := tok.Load(testenv.DataFile(t, "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	url, _ := startServer(t, Config{Model: Model{Tokenizer: tk}})
	status, _, b := post(t, url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"tools":`+weatherTool+`}`)
	if status != 400 || !strings.Contains(string(b), `"param":"tools"`) || !strings.Contains(string(b), "no tool-call format") {
		t.Errorf("status %d: %s", status, b)
	}
}

// qwenVariant loads Qwen3's tokenizer with edits to tokenizer.json and
// tokenizer_config.json (nil: unchanged).
func qwenVariant(t *testing.T, editTok, editCfg func(map[string]any)) *tok.Tokenizer {
	t.Helper()
	src := testenv.DataFile(t, "tokenizers/qwen3")
	dir := t.TempDir()
	for name, edit := range map[string]func(map[string]any){"tokenizer.json": editTok, "tokenizer_config.json": editCfg} {
		data, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if edit != nil {
			var v map[string]any
			if err := json.Unmarshal(data, &v); err != nil {
				t.Fatal(err)
			}
			edit(v)
			data, _ = json.Marshal(v)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tk, err := tok.Load(dir)
	if err != nil {
		t.Fatalf("cannot load the edited tokenizer: %v", err)
	}
	return tk
}

// TestSpecialThinkTokens: where <think> and </think> are special tokens,
// the reply is decoded with special tokens so that the split still sees
// them (mlx-lm's detokenizers always decode special tokens).
func TestSpecialThinkTokens(t *testing.T) {
	tk := qwenVariant(t, func(v map[string]any) {
		for _, a := range v["added_tokens"].([]any) {
			if m := a.(map[string]any); m["content"] == "<think>" || m["content"] == "</think>" {
				m["special"] = true
			}
		}
	}, nil)
	id, _ := tk.TokenToID("<think>")
	if !tk.IsSpecial(id) {
		t.Fatal("the edit did not make <think> special")
	}
	ids, _ := tk.Encode("<think>plan</think>Blue.", false)
	url, _ := startServer(t, Config{Model: Model{Tokenizer: tk, Runner: serial(&scriptRunner{script: ids})}})
	status, _, b := post(t, url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"Colour?"}]}`)
	var r toolReply
	json.Unmarshal(b, &r)
	if status != 200 || r.Choices[0].Message.ReasoningContent != "plan" || *r.Choices[0].Message.Content != "Blue." {
		t.Errorf("status %d: %s", status, b)
	}
}
