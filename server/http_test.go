package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestErrorMatrix(t *testing.T) {
	url, _ := startServer(t, Config{APIKey: "sekrit", MaxBodyBytes: 2048})
	auth := []string{"Authorization", "Bearer sekrit"}
	chat := url + "/v1/chat/completions"
	cases := []struct {
		name, method, path, body string
		hdr                      []string
		status                   int
		typ, param, code         string
	}{
		{name: "no key", method: "POST", path: "/v1/chat/completions", body: `{}`, status: 401, typ: "authentication_error", code: "invalid_api_key"},
		{name: "wrong key", method: "POST", path: "/v1/chat/completions", body: `{}`, hdr: []string{"Authorization", "Bearer sekriT"}, status: 401, typ: "authentication_error"},
		{name: "malformed json", method: "POST", path: "/v1/chat/completions", body: `{"messages": [`, hdr: auth, status: 400, typ: "invalid_request_error"},
		{name: "not an object", method: "POST", path: "/v1/completions", body: `[1,2]`, hdr: auth, status: 400, typ: "invalid_request_error"},
		{name: "wrong type", method: "POST", path: "/v1/chat/completions", body: `{"messages":[{"role":"user","content":"hi"}],"max_tokens":"8"}`, hdr: auth, status: 400, param: "max_tokens"},
		{name: "wrong type nested", method: "POST", path: "/v1/chat/completions", body: `{"messages":[{"role":"user","content":"hi"}],"temperature":[1]}`, hdr: auth, status: 400, param: "temperature"},
		{name: "empty messages", method: "POST", path: "/v1/chat/completions", body: `{"messages":[]}`, hdr: auth, status: 400, param: "messages"},
		{name: "bad role", method: "POST", path: "/v1/chat/completions", body: `{"messages":[{"role":"robot","content":"hi"}]}`, hdr: auth, status: 400, param: "messages[0].role"},
		{name: "image part", method: "POST", path: "/v1/chat/completions", body: `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, hdr: auth, status: 400, param: "messages[0].content[0].type", code: "unsupported_parameter"},
		{name: "n zero", method: "POST", path: "/v1/chat/completions", body: `{"messages":[{"role":"user","content":"hi"}],"n":0}`, hdr: auth, status: 400, param: "n"},
		{name: "n above the bound", method: "POST", path: "/v1/chat/completions", body: `{"messages":[{"role":"user","content":"hi"}],"n":129}`, hdr: auth, status: 400, param: "n"},
		{name: "n above what the server holds", method: "POST", path: "/v1/completions", body: `{"prompt":"hi","n":6}`, hdr: auth, status: 400, param: "n"},
		{name: "best_of other than n", method: "POST", path: "/v1/completions", body: `{"prompt":"hi","n":2,"best_of":3}`, hdr: auth, status: 400, param: "best_of", code: "unsupported_parameter"},
		{name: "xtc_probability out of range", method: "POST", path: "/v1/chat/completions", body: `{"messages":[{"role":"user","content":"hi"}],"xtc_probability":1.5}`, hdr: auth, status: 400, param: "xtc_probability"},
		{name: "xtc_threshold out of range", method: "POST", path: "/v1/completions", body: `{"prompt":"hi","xtc_probability":0.5,"xtc_threshold":0.7}`, hdr: auth, status: 400, param: "xtc_threshold"},
		{name: "adapters naming no loaded adapter", method: "POST", path: "/v1/chat/completions", body: `{"messages":[{"role":"user","content":"hi"}],"adapters":"./lora"}`, hdr: auth, status: 404, param: "adapters", code: "adapter_not_found"},
		{name: "draft_model", method: "POST", path: "/v1/completions", body: `{"prompt":"hi","draft_model":"small"}`, hdr: auth, status: 400, param: "draft_model", code: "unsupported_parameter"},
		{name: "num_draft_tokens", method: "POST", path: "/v1/completions", body: `{"prompt":"hi","num_draft_tokens":3}`, hdr: auth, status: 400, param: "num_draft_tokens", code: "unsupported_parameter"},
		{name: "reasoning_effort", method: "POST", path: "/v1/chat/completions", body: `{"messages":[{"role":"user","content":"hi"}],"reasoning_effort":"low"}`, hdr: auth, status: 400, param: "reasoning_effort", code: "unsupported_parameter"},
		{name: "parallel_tool_calls false", method: "POST", path: "/v1/chat/completions", body: `{"messages":[{"role":"user","content":"hi"}],"parallel_tool_calls":false}`, hdr: auth, status: 400, param: "parallel_tool_calls", code: "unsupported_parameter"},
		{name: "functions", method: "POST", path: "/v1/chat/completions", body: `{"messages":[{"role":"user","content":"hi"}],"functions":[{"name":"f"}]}`, hdr: auth, status: 400, param: "functions", code: "unsupported_parameter"},
		{name: "audio modality", method: "POST", path: "/v1/chat/completions", body: `{"messages":[{"role":"user","content":"hi"}],"modalities":["text","audio"]}`, hdr: auth, status: 400, param: "modalities", code: "unsupported_parameter"},
		{name: "role_mapping", method: "POST", path: "/v1/chat/completions", body: `{"messages":[{"role":"user","content":"hi"}],"role_mapping":{"user":"U:"}}`, hdr: auth, status: 400, param: "role_mapping", code: "unsupported_parameter"},
		{name: "unknown model", method: "GET", path: "/v1/models/nothing-here", hdr: auth, status: 404, param: "model", code: "model_not_found"},
		{name: "tool_choice required", method: "POST", path: "/v1/chat/completions", body: `{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required"}`, hdr: auth, status: 400, param: "tool_choice", code: "unsupported_parameter"},
		{name: "tool_choice named", method: "POST", path: "/v1/chat/completions", body: `{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"f"}}}`, hdr: auth, status: 400, param: "tool_choice", code: "unsupported_parameter"},
		{name: "tool type", method: "POST", path: "/v1/chat/completions", body: `{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"custom","custom":{"name":"f"}}]}`, hdr: auth, status: 400, param: "tools[0].type", code: "unsupported_parameter"},
		{name: "tool without name", method: "POST", path: "/v1/chat/completions", body: `{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{}}]}`, hdr: auth, status: 400, param: "tools[0].function.name"},
		{name: "logprobs type", method: "POST", path: "/v1/chat/completions", body: `{"messages":[{"role":"user","content":"hi"}],"logprobs":3}`, hdr: auth, status: 400, param: "logprobs"},
		{name: "top_logprobs range", method: "POST", path: "/v1/chat/completions", body: `{"messages":[{"role":"user","content":"hi"}],"logprobs":true,"top_logprobs":21}`, hdr: auth, status: 400, param: "top_logprobs"},
		{name: "top_logprobs without logprobs", method: "POST", path: "/v1/chat/completions", body: `{"messages":[{"role":"user","content":"hi"}],"top_logprobs":2}`, hdr: auth, status: 400, param: "top_logprobs"},
		{name: "completion logprobs range", method: "POST", path: "/v1/completions", body: `{"prompt":"hi","logprobs":true}`, hdr: auth, status: 400, param: "logprobs"},
		{name: "frequency penalty range", method: "POST", path: "/v1/completions", body: `{"prompt":"hi","frequency_penalty":2.5}`, hdr: auth, status: 400, param: "frequency_penalty"},
		{name: "temperature range", method: "POST", path: "/v1/completions", body: `{"prompt":"hi","temperature":3}`, hdr: auth, status: 400, param: "temperature"},
		{name: "max_tokens zero", method: "POST", path: "/v1/completions", body: `{"prompt":"hi","max_tokens":0}`, hdr: auth, status: 400, param: "max_tokens"},
		{name: "stop wrong type", method: "POST", path: "/v1/completions", body: `{"prompt":"hi","stop":5}`, hdr: auth, status: 400, param: "stop"},
		{name: "empty prompt", method: "POST", path: "/v1/completions", body: `{"prompt":""}`, hdr: auth, status: 400, param: "prompt"},
		{name: "over context", method: "POST", path: "/v1/completions", body: `{"prompt":"hi","max_tokens":300}`, hdr: auth, status: 400, code: "context_length_exceeded"},
		{name: "body too large", method: "POST", path: "/v1/completions", body: `{"prompt":"` + strings.Repeat("a", 4096) + `"}`, hdr: auth, status: 413},
		{name: "unknown route", method: "GET", path: "/v1/nothing", hdr: auth, status: 404, code: "not_found"},
		{name: "wrong method", method: "GET", path: "/v1/chat/completions", hdr: auth, status: 405},
		{name: "stream_options without stream", method: "POST", path: "/v1/completions", body: `{"prompt":"hi","stream_options":{"include_usage":true}}`, hdr: auth, status: 400, param: "stream_options"},
	}
	_ = chat
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, url+tc.path, strings.NewReader(tc.body))
			for i := 0; i+1 < len(tc.hdr); i += 2 {
				req.Header.Set(tc.hdr[i], tc.hdr[i+1])
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body errorBody
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatalf("error body is not JSON: %v", err)
			}
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d (%s)", resp.StatusCode, tc.status, body.Error.Message)
			}
			if body.Error.Message == "" || body.Error.Type == "" {
				t.Errorf("error without message or type: %+v", body.Error)
			}
			if tc.typ != "" && body.Error.Type != tc.typ {
				t.Errorf("type %q, want %q", body.Error.Type, tc.typ)
			}
			if tc.param != "" && (body.Error.Param == nil || *body.Error.Param != tc.param) {
				t.Errorf("param %v, want %q (%s)", body.Error.Param, tc.param, body.Error.Message)
			}
			if tc.code != "" && (body.Error.Code == nil || *body.Error.Code != tc.code) {
				t.Errorf("code %v, want %q", body.Error.Code, tc.code)
			}
			if tc.status == 405 && resp.Header.Get("Allow") == "" {
				t.Error("405 without an Allow header")
			}
		})
	}
	t.Run("health needs no key", func(t *testing.T) {
		resp, err := http.Get(url + "/health")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	})
}

func TestCompletionBodies(t *testing.T) {
	url, _ := startServer(t, Config{})
	cases := []struct {
		name, path, body, text, finish string
		completion                     int
	}{
		{"chat to the end", "/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`, scriptText, "stop", -1},
		{"chat max_tokens", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_completion_tokens":2}`, "Hello there", "length", 2},
		{"completion stop", "/v1/completions", `{"prompt":"hi","stop":["42","xyz"]}`, "Hello there! The answer is ", "stop", -1},
		{"completion stop string", "/v1/completions", `{"prompt":["hi"],"stop":" END"}`, "Hello there! The answer is 42.", "stop", -1},
		{"completion prompt ids", "/v1/completions", `{"prompt":[1,2,3],"max_tokens":1}`, "Hello", "length", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, _, b := post(t, url+tc.path, tc.body)
			if status != 200 {
				t.Fatalf("status %d: %s", status, b)
			}
			var r struct {
				Object  string
				Choices []struct {
					Text         string
					Message      struct{ Role, Content string }
					FinishReason string `json:"finish_reason"`
				}
				Usage struct {
					PromptTokens        int `json:"prompt_tokens"`
					CompletionTokens    int `json:"completion_tokens"`
					TotalTokens         int `json:"total_tokens"`
					PromptTokensDetails *struct {
						CachedTokens int `json:"cached_tokens"`
					} `json:"prompt_tokens_details"`
				}
				XMLXGo *Composition `json:"x_mlxgo"`
			}
			if err := json.Unmarshal(b, &r); err != nil {
				t.Fatal(err)
			}
			text := r.Choices[0].Text
			if strings.Contains(tc.path, "chat") {
				text = r.Choices[0].Message.Content
				if r.Object != "chat.completion" || r.Choices[0].Message.Role != "assistant" {
					t.Errorf("object %q role %q", r.Object, r.Choices[0].Message.Role)
				}
			}
			if text != tc.text || r.Choices[0].FinishReason != tc.finish {
				t.Errorf("got %q (%s), want %q (%s)", text, r.Choices[0].FinishReason, tc.text, tc.finish)
			}
			if tc.completion >= 0 && r.Usage.CompletionTokens != tc.completion {
				t.Errorf("completion_tokens %d, want %d", r.Usage.CompletionTokens, tc.completion)
			}
			if r.Usage.PromptTokens < 1 || r.Usage.TotalTokens != r.Usage.PromptTokens+r.Usage.CompletionTokens || r.Usage.PromptTokensDetails == nil {
				t.Errorf("usage %+v", r.Usage)
			}
			if r.XMLXGo == nil || r.XMLXGo.ArtifactFingerprint != "sha256:test" || r.XMLXGo.Scheduling != "serial" || r.XMLXGo.BatchRows != 1 {
				t.Errorf("x_mlxgo %+v", r.XMLXGo)
			}
		})
	}
}

// TestStreamFraming checks SSE: data lines, the role first, stop strings
// never sent even in part, finish_reason on the last choice chunk, the usage
// chunk when asked for, then [DONE].
func TestStreamFraming(t *testing.T) {
	url, _ := startServer(t, Config{})
	cases := []struct {
		name, path, body, text string
		usage                  bool
	}{
		{"chat stop across tokens", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"stream":true,"stop":"answer is 4"}`, "Hello there! The ", false},
		{"chat usage", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true},"max_tokens":3}`, "Hello there!", true},
		{"completion stop", "/v1/completions", `{"prompt":"hi","stream":true,"stop":["END"]}`, "Hello there! The answer is 42. ", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, hdr, b := post(t, url+tc.path, tc.body)
			if status != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/event-stream") {
				t.Fatalf("status %d, content type %q: %s", status, hdr.Get("Content-Type"), b)
			}
			events := sseEvents(t, b)
			if len(events) < 3 || events[len(events)-1] != "[DONE]" {
				t.Fatalf("events %q: want at least 3 ending in [DONE]", events)
			}
			var text strings.Builder
			finishes := 0
			sawUsage := false
			chat := strings.Contains(tc.path, "chat")
			for i, e := range events[:len(events)-1] {
				c := decodeJSON(t, []byte(e))
				choices := c["choices"].([]any)
				if u, ok := c["usage"]; ok && u != nil {
					sawUsage = true
					if len(choices) != 0 || i != len(events)-2 {
						t.Errorf("usage chunk must be last and have no choices: %s", e)
					}
					continue
				}
				ch := choices[0].(map[string]any)
				if chat {
					delta := ch["delta"].(map[string]any)
					if (i == 0) != (delta["role"] == "assistant") {
						t.Errorf("role in chunk %d: %s", i, e)
					}
					if s, ok := delta["content"].(string); ok {
						text.WriteString(s)
					}
				} else {
					text.WriteString(ch["text"].(string))
				}
				if ch["finish_reason"] != nil {
					finishes++
					if _, ok := c["x_mlxgo"]; !ok {
						t.Errorf("the final chunk has no x_mlxgo: %s", e)
					}
				}
			}
			if text.String() != tc.text {
				t.Errorf("streamed %q, want %q", text.String(), tc.text)
			}
			if finishes != 1 || sawUsage != tc.usage {
				t.Errorf("%d finish chunks, usage chunk %v (want 1, %v)", finishes, sawUsage, tc.usage)
			}
		})
	}
}

// TestQueueFull fills the one running slot and the queue, then expects 429
// with Retry-After; releasing the runner lets the others finish.
func TestQueueFull(t *testing.T) {
	tk := testTokenizer(t)
	ids, _ := tk.Encode("ok", false)
	run := &scriptRunner{script: ids, block: make(chan struct{})}
	url, s := startServer(t, Config{MaxQueue: 1, Model: Model{Tokenizer: tk, Runner: serial(run)}})
	var wg sync.WaitGroup
	results := make([]int, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], _, _ = post(t, url+"/v1/completions", `{"prompt":"hi"}`)
		}()
		// Wait until the first is running and the second queued.
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			run.mu.Lock()
			n := len(run.prompts)
			run.mu.Unlock()
			if (i == 0 && n == 1) || (i == 1 && len(s.eng.queue) == 1) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	status, hdr, b := post(t, url+"/v1/completions", `{"prompt":"hi"}`)
	if status != http.StatusTooManyRequests || hdr.Get("Retry-After") == "" {
		t.Errorf("status %d, Retry-After %q: %s", status, hdr.Get("Retry-After"), b)
	}
	close(run.block)
	wg.Wait()
	if results[0] != 200 || results[1] != 200 {
		t.Errorf("queued requests ended with %v, want 200s", results)
	}
}

// TestShutdownDrains cancels the server while a stream runs: the stream
// finishes within the grace period and Serve returns nil.
func TestShutdownDrains(t *testing.T) {
	tk := testTokenizer(t)
	ids, _ := tk.Encode(scriptText, false)
	run := &scriptRunner{script: ids, delay: 20 * time.Millisecond}
	s, err := New(Config{MaxTokens: 64, MaxQueue: 2, Model: Model{Tokenizer: tk, Runner: serial(run)}})
	if err != nil {
		t.Fatal(err)
	}
	url, stop := runServer(t, s)
	got := make(chan string, 1)
	go func() {
		_, _, b := post(t, url+"/v1/completions", `{"prompt":"hi"}`)
		got <- string(b)
	}()
	for {
		run.mu.Lock()
		n := len(run.prompts)
		run.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := stop(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if b := <-got; !strings.Contains(b, `"finish_reason":"stop"`) || !strings.Contains(b, "END of the script") {
		t.Errorf("in-flight request did not finish: %s", b)
	}
}

// TestFieldsAskingForNothing: a field mlxgo cannot honour is accepted when
// its value asks for nothing, and a field mlxgo does not know is ignored.
func TestFieldsAskingForNothing(t *testing.T) {
	url, _ := startServer(t, Config{})
	for _, body := range []string{
		`{"prompt":"hi","max_tokens":2,"xtc_probability":0,"xtc_threshold":0.1}`,
		`{"prompt":"hi","max_tokens":2,"draft_model":null,"adapters":null,"num_draft_tokens":0}`,
		`{"prompt":"hi","max_tokens":2,"parallel_tool_calls":true,"modalities":["text"],"functions":[]}`,
		`{"prompt":"hi","max_tokens":2,"user":"me","metadata":{"a":"b"},"store":false,"service_tier":"auto","a_field_nobody_knows":[1]}`,
	} {
		if status, _, b := post(t, url+"/v1/completions", body); status != 200 {
			t.Errorf("%s: status %d %s", body, status, b)
		}
	}
}
