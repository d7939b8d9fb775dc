package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"
)

func TestDecodeChatMessages(t *testing.T) {
	cases := []struct {
		name, body, messages string
	}{
		{"string content", `{"messages":[{"role":"user","content":"hi"}]}`, `[{"role":"user","content":"hi"}]`},
		{"text parts joined", `{"messages":[{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"role":"user"}]}`, `[{"role":"user","content":"ab"}]`},
		{"tool call keeps key order", `{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"1","function":{"name":"f","arguments":{"z":1,"a":2}}}]},{"role":"tool","content":"3","tool_call_id":"1"}]}`,
			`[{"role":"assistant","content":"","tool_calls":[{"id":"1","function":{"name":"f","arguments":{"z":1,"a":2}}}]},{"role":"tool","content":"3","tool_call_id":"1"}]`},
		{"tool call arguments string becomes the object", `{"messages":[{"role":"assistant","tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":"{\"z\": 1}"}}]}]}`,
			`[{"role":"assistant","content":"","tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":{"z": 1}}}]}]`},
		{"unknown fields ignored", `{"messages":[{"role":"system","content":"s","extra":1}],"user":"me","metadata":{}}`, `[{"role":"system","content":"s"}]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := decodeChat([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if string(p.messages) != tc.messages {
				t.Errorf("messages %s, want %s", p.messages, tc.messages)
			}
		})
	}
}

func TestDecodeSampling(t *testing.T) {
	p, err := decodeCompletion([]byte(`{"prompt":"x","temperature":0.7,"top_p":0.9,"top_k":5,"min_p":0.1,"seed":3,"presence_penalty":0.5,"repetition_penalty":1.1,"logit_bias":{"7":-100},"stop":["a","b"],"max_tokens":9}`))
	if err != nil {
		t.Fatal(err)
	}
	if p.sampler.Temp != 0.7 || p.sampler.TopP != 0.9 || p.sampler.TopK != 5 || p.sampler.MinP != 0.1 {
		t.Errorf("sampler %+v", p.sampler)
	}
	if p.seed == nil || *p.seed != 3 || p.maxTokens != 9 || len(p.stops) != 2 {
		t.Errorf("seed %v max %d stops %q", p.seed, p.maxTokens, p.stops)
	}
	if p.procs.PresencePenalty != 0.5 || p.procs.RepetitionPenalty != 1.1 || p.procs.LogitBias[7] != -100 {
		t.Errorf("processors %+v", p.procs)
	}
}

// FuzzDecodeRequest: no input panics, and every refusal maps to a 4xx in
// OpenAI's shape (a 5xx would blame the server for a client's bytes).
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		`{"messages":[{"role":"user","content":"hi"}],"stream":true,"stop":["x"]}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"logit_bias":{"1":2}}`,
		`{"prompt":[1,2,3],"max_tokens":4,"seed":-1}`,
		`{"prompt":["a"],"temperature":1e400}`,
		`{"messages":[{"role":"assistant","content":null,"tool_calls":[]}]}`,
		`[]`, `null`, `{"prompt":{}}`, `{"messages":[{"role":"user"}]}`,
		`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"auto"}`,
		`{"messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"{\"a\":1}"}}]}],"logprobs":true,"top_logprobs":5}`,
		`{"prompt":"x","logprobs":3,"frequency_penalty":1,"frequency_context_size":4}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, decode := range []func([]byte) (*params, error){decodeChat, decodeCompletion} {
			p, err := decode(data)
			if err != nil {
				ae := statusOf(err)
				if ae.status != http.StatusBadRequest {
					t.Fatalf("status %d for %q: %v", ae.status, data, err)
				}
				var ae2 *apiError
				if !errors.As(err, &ae2) && !isJSONError(err) {
					t.Fatalf("unexpected error type %T: %v", err, err)
				}
				continue
			}
			if p.chat && !json.Valid(p.messages) {
				t.Fatalf("messages are not valid JSON: %s", p.messages)
			}
			if !p.chat && p.prompt == "" && len(p.promptIDs) == 0 {
				t.Fatalf("accepted an empty prompt: %q", data)
			}
		}
	})
}

func isJSONError(err error) bool {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	return errors.As(err, &se) || errors.As(err, &te)
}
