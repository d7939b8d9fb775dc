package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mlxgo/mlxgo/gen"
	"github.com/mlxgo/mlxgo/models/embed"
	"github.com/mlxgo/mlxgo/tok"
)

// seedRunner answers "seed N." (N the execution's seed, or "none") and
// records the options and seeds it was run with.
type seedRunner struct {
	t       *tok.Tokenizer
	mu      sync.Mutex
	opts    []gen.Options
	seeds   []string
	running atomic.Int32
	peak    atomic.Int32
}

func (r *seedRunner) Run(ctx context.Context, prompt []int32, o gen.Options, seed *uint64, emit func(int32) error) (Result, error) {
	n := r.running.Add(1)
	defer r.running.Add(-1)
	if n > r.peak.Load() {
		r.peak.Store(n)
	}
	s := "none"
	if seed != nil {
		s = fmt.Sprint(*seed)
	}
	r.mu.Lock()
	r.opts, r.seeds = append(r.opts, o), append(r.seeds, s)
	r.mu.Unlock()
	ids, err := r.t.Encode("seed "+s+".", false)
	if err != nil {
		return Result{}, err
	}
	st := gen.Stats{PromptTokens: len(prompt), FinishReason: gen.FinishStop}
	for _, id := range ids {
		st.GeneratedTokens++
		if err := emit(id); err != nil {
			return Result{Stats: st}, err
		}
	}
	return Result{Stats: st}, nil
}

type choicesReply struct {
	Created int64
	Choices []struct {
		Index   int
		Text    string
		Message struct {
			Content          *string
			Reasoning        string
			ReasoningContent string `json:"reasoning_content"`
		}
		FinishReason string `json:"finish_reason"`
	}
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	}
	X Composition `json:"x_mlxgo"`
}

// TestNChoices: n choices are n executions, choice i seeded seed+i, indexed
// 0..n-1 in the body and in every streamed chunk, usage counting the prompt
// once and every choice's tokens; run one after another with --batch 1.
func TestNChoices(t *testing.T) {
	tk := testTokenizer(t)
	run := &seedRunner{t: tk}
	url, _ := startServer(t, Config{Model: Model{Tokenizer: tk, Runner: serial(run)}})
	one, _ := tk.Encode("seed 7.", false)

	status, _, b := post(t, url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"n":3,"seed":7,"temperature":1}`)
	if status != 200 {
		t.Fatalf("status %d: %s", status, b)
	}
	var r choicesReply
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Choices) != 3 {
		t.Fatalf("%d choices, want 3: %s", len(r.Choices), b)
	}
	for i, c := range r.Choices {
		if want := fmt.Sprintf("seed %d.", 7+i); c.Index != i || c.Message.Content == nil || *c.Message.Content != want || c.FinishReason != "stop" {
			t.Errorf("choice %d: index %d content %v finish %q, want %q", i, c.Index, c.Message.Content, c.FinishReason, want)
		}
	}
	if r.Usage.CompletionTokens != 3*len(one) || r.Usage.PromptTokens < 1 {
		t.Errorf("usage %+v, want %d completion tokens", r.Usage, 3*len(one))
	}
	if r.X.Scheduling != SchedulingSerial || !strings.Contains(r.X.Sampling, "seed=7+choice") || !strings.Contains(r.X.RequestFeatures, "n=3") {
		t.Errorf("x_mlxgo %+v", r.X)
	}
	if run.peak.Load() != 1 {
		t.Errorf("%d executions ran at once with --batch 1", run.peak.Load())
	}

	// Streamed completions: every chunk names its choice, each choice ends
	// once, and the texts add up per choice.
	status, _, b = post(t, url+"/v1/completions", `{"prompt":"hi","n":2,"seed":40,"stream":true,"stream_options":{"include_usage":true}}`)
	if status != 200 {
		t.Fatalf("status %d: %s", status, b)
	}
	texts, finishes := map[int]string{}, map[int]int{}
	var usage map[string]any
	for _, e := range sseEvents(t, b) {
		if e == "[DONE]" {
			continue
		}
		c := decodeJSON(t, []byte(e))
		if u, ok := c["usage"].(map[string]any); ok {
			usage = u
			continue
		}
		ch := c["choices"].([]any)[0].(map[string]any)
		i := int(ch["index"].(float64))
		texts[i] += ch["text"].(string)
		if ch["finish_reason"] != nil {
			finishes[i]++
		}
	}
	if texts[0] != "seed 40." || texts[1] != "seed 41." || finishes[0] != 1 || finishes[1] != 1 || len(texts) != 2 {
		t.Errorf("streamed choices %v, finishes %v", texts, finishes)
	}
	a, _ := tk.Encode("seed 40.", false)
	c, _ := tk.Encode("seed 41.", false)
	if usage == nil || usage["completion_tokens"].(float64) != float64(len(a)+len(c)) {
		t.Errorf("usage chunk %v", usage)
	}

	// Without a seed every choice draws from the unseeded stream.
	status, _, b = post(t, url+"/v1/completions", `{"prompt":"hi","n":2}`)
	if status != 200 || strings.Count(string(b), "seed none.") != 2 {
		t.Errorf("unseeded n=2: %d %s", status, b)
	}
}

// TestNChoicesBatched: with --batch room the choices are rows of one batch.
func TestNChoicesBatched(t *testing.T) {
	tk := testTokenizer(t)
	ids, _ := tk.Encode("ok then", false)
	fake := &fakeBatch{script: ids, max: 4, delay: 2 * time.Millisecond}
	url, _ := startServer(t, Config{Model: Model{Tokenizer: tk, Runner: fake}})
	status, _, b := post(t, url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"n":3}`)
	if status != 200 {
		t.Fatalf("status %d: %s", status, b)
	}
	var r choicesReply
	json.Unmarshal(b, &r)
	if len(r.Choices) != 3 || fake.peakRows() != 3 || r.X.Scheduling != SchedulingContinuous || r.X.BatchRows != 3 {
		t.Errorf("%d choices, peak rows %d, x_mlxgo %+v: want 3 rows of one batch", len(r.Choices), fake.peakRows(), r.X)
	}
	for i, c := range r.Choices {
		if c.Index != i || c.Message.Content == nil || *c.Message.Content != "ok then" {
			t.Errorf("choice %d: %+v", i, c)
		}
	}
}

// TestCreatedPerResponse: created is when each response was made, not when
// the server started.
func TestCreatedPerResponse(t *testing.T) {
	var tick atomic.Int64
	clock := func() time.Time { return time.Unix(1_700_000_000+tick.Add(1)*100, 0) }
	url, s := startServer(t, Config{Now: clock})
	var got []int64
	for _, path := range []string{"/v1/completions", "/v1/completions"} {
		_, _, b := post(t, url+path, `{"prompt":"hi","max_tokens":2}`)
		var r choicesReply
		json.Unmarshal(b, &r)
		got = append(got, r.Created)
	}
	_, _, b := post(t, url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"stream":true}`)
	for _, e := range sseEvents(t, b) {
		if e != "[DONE]" {
			got = append(got, int64(decodeJSON(t, []byte(e))["created"].(float64)))
		}
	}
	if got[0] == s.created || got[1] == got[0] || got[2] == got[1] {
		t.Errorf("created %v (server started at %d): want one per response", got, s.created)
	}
	for _, c := range got[3:] {
		if c != got[2] {
			t.Errorf("stream chunks created %v: want the stream's one value", got[2:])
		}
	}
}

// TestModelsEndpoints: /v1/models lists the embedding model beside the
// chat model, GET /v1/models/{id} returns either, and the paths without /v1
// that mlx_lm.server serves answer as the /v1 ones.
func TestModelsEndpoints(t *testing.T) {
	emb := &Embeddings{ID: "minilm", Model: &embed.Model{Dims: 384, MaxLen: 256},
		Fingerprint: func() (string, error) { return "sha256:emb", nil }}
	url, _ := startServer(t, Config{Model: Model{ID: "chatty"}, Embeddings: emb})
	get := func(path string) (int, map[string]any) {
		resp, err := http.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, decodeJSON(t, b)
	}
	status, list := get("/v1/models")
	var ids []string
	for _, m := range list["data"].([]any) {
		ids = append(ids, m.(map[string]any)["id"].(string))
	}
	if status != 200 || !slices.Equal(ids, []string{"chatty", "minilm"}) {
		t.Errorf("/v1/models %d %v, want chatty and minilm", status, ids)
	}
	for _, id := range []string{"chatty", "minilm"} {
		status, m := get("/v1/models/" + id)
		if status != 200 || m["id"] != id || m["object"] != "model" {
			t.Errorf("/v1/models/%s: %d %v", id, status, m)
		}
	}
	status, e := get("/v1/models/gpt-4")
	if er, _ := e["error"].(map[string]any); status != 404 || er["code"] != "model_not_found" || !strings.Contains(er["message"].(string), "gpt-4") {
		t.Errorf("unknown model: %d %v", status, e)
	}
	for _, tc := range []struct{ path, body string }{
		{"/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`},
		{"/completions", `{"prompt":"hi","max_tokens":2}`},
	} {
		if status, _, b := post(t, url+tc.path, tc.body); status != 200 || !strings.Contains(string(b), `"finish_reason":"length"`) {
			t.Errorf("%s: %d %s", tc.path, status, b)
		}
	}
}

// TestReasoningUnderBothNames: the reasoning text is sent as reasoning
// (mlx_lm.server's name) and reasoning_content, in bodies and deltas.
func TestReasoningUnderBothNames(t *testing.T) {
	tk := testTokenizer(t)
	url, _ := startServer(t, Config{Model: Model{Tokenizer: tk, Runner: serial(&agentRunner{t: tk})}})
	_, _, b := post(t, url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"Sky?"}]}`)
	var r choicesReply
	json.Unmarshal(b, &r)
	if m := r.Choices[0].Message; m.Reasoning != "\nEasy.\n" || m.ReasoningContent != m.Reasoning {
		t.Errorf("reasoning %q, reasoning_content %q", m.Reasoning, m.ReasoningContent)
	}
	_, _, b = post(t, url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"Sky?"}],"stream":true}`)
	var a, c strings.Builder
	for _, e := range sseEvents(t, b) {
		if e == "[DONE]" {
			continue
		}
		d := decodeJSON(t, []byte(e))["choices"].([]any)[0].(map[string]any)["delta"].(map[string]any)
		s1, _ := d["reasoning"].(string)
		s2, _ := d["reasoning_content"].(string)
		a.WriteString(s1)
		c.WriteString(s2)
	}
	if a.String() != "\nEasy.\n" || c.String() != a.String() {
		t.Errorf("streamed reasoning %q, reasoning_content %q", a.String(), c.String())
	}
}
