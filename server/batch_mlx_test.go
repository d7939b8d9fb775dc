package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// batchPrompts are short, distinct completion prompts: the CPU backend
// decodes SmolLM2 at a few tokens per second, so every request stays small.
var batchPrompts = []string{
	"The capital of France is", "One, two, three,", "Water boils at", "The sky is",
	"My favourite fruit is", "In the beginning", "Roses are red,", "The quick brown fox",
	"Once upon a time", "The best way to learn", "Monday, Tuesday,", "A haiku about rain:",
	"The opposite of hot is", "Cats and dogs", "2 + 2 =", "Hello, my name is",
}

// completionText is the text of a completion body, or of a stream's chunks
// joined, with the finish reason when present.
func completionText(t *testing.T, body []byte, stream bool) (text, finish string) {
	t.Helper()
	text, finish, _ = completionParts(t, body, stream)
	return text, finish
}

// completionParts is completionText with the execution composition.
func completionParts(t *testing.T, body []byte, stream bool) (text, finish string, comp *Composition) {
	t.Helper()
	payloads := []string{string(body)}
	if stream {
		payloads = sseEvents(t, body)
	}
	for _, p := range payloads {
		if p == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Text         string
				FinishReason *string `json:"finish_reason"`
			}
			Error  *struct{ Message string }
			XMLXGo *Composition `json:"x_mlxgo"`
		}
		if err := json.Unmarshal([]byte(p), &c); err != nil {
			t.Fatalf("cannot decode %q: %v", p, err)
		}
		if c.Error != nil {
			t.Fatalf("error in the response: %s", c.Error.Message)
		}
		if c.XMLXGo != nil {
			comp = c.XMLXGo
		}
		for _, ch := range c.Choices {
			text += ch.Text
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
	}
	return text, finish, comp
}

var activeRowsRE = regexp.MustCompile(`(?m)^mlxgo_active_rows (\d+)$`)

// watchRows polls /metrics until stop is closed and returns the most active
// rows it saw.
func watchRows(t *testing.T, url string, stop chan struct{}) <-chan int {
	out := make(chan int, 1)
	go func() {
		most := 0
		for {
			select {
			case <-stop:
				out <- most
				return
			case <-time.After(20 * time.Millisecond):
			}
			resp, err := http.Get(url + "/metrics")
			if err != nil {
				continue
			}
			var b strings.Builder
			buf := make([]byte, 8192)
			for {
				n, err := resp.Body.Read(buf)
				b.Write(buf[:n])
				if err != nil {
					break
				}
			}
			resp.Body.Close()
			if m := activeRowsRE.FindStringSubmatch(b.String()); m != nil {
				n, _ := strconv.Atoi(m[1])
				most = max(most, n)
			}
		}
	}()
	return out
}

// TestBatchGreedyMatchesSerial: 16 concurrent greedy streams against
// --batch 8 give exactly the texts of the same requests sent one at a time
// to the serial engine, and the engine really held several rows at once.
func TestBatchGreedyMatchesSerial(t *testing.T) {
	m, tk := smollm2(t)
	serial, _ := startServer(t, Config{Model: NewMLXModel(m, tk, "smollm2", "test", 0)})
	bm, err := WithBatch(NewMLXModel(m, tk, "smollm2", "test", 0), 8)
	if err != nil {
		t.Fatal(err)
	}
	batched, _ := startServer(t, Config{MaxQueue: 16, Model: bm})
	body := func(p string, stream bool) string {
		return fmt.Sprintf(`{"prompt":%q,"max_tokens":8,"temperature":0,"stream":%v}`, p, stream)
	}

	want := make([]string, len(batchPrompts))
	start := time.Now()
	for i, p := range batchPrompts {
		status, _, b := post(t, serial+"/v1/completions", body(p, false))
		if status != 200 {
			t.Fatalf("serial %q: %d %s", p, status, b)
		}
		want[i], _ = completionText(t, b, false)
	}
	serialTime := time.Since(start)
	if n := len(slices.DeleteFunc(slices.Clone(want), func(s string) bool { return s == "" })); n < len(want)/2 {
		t.Fatalf("only %d of %d serial completions have text: a comparison of empty texts proves little", n, len(want))
	}

	batchStart := time.Now()
	stop := make(chan struct{})
	most := watchRows(t, batched, stop)
	got := make([][]byte, len(batchPrompts))
	statuses := make([]int, len(batchPrompts))
	var wg sync.WaitGroup
	for i, p := range batchPrompts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i], _, got[i] = postNoFatal(batched+"/v1/completions", body(p, true))
		}()
	}
	wg.Wait()
	close(stop)
	mostAtAdmission := 0
	t.Logf("%d requests of 8 tokens: one at a time %v, concurrently against --batch 8 %v", len(batchPrompts), serialTime.Round(time.Millisecond), time.Since(batchStart).Round(time.Millisecond))
	for i, p := range batchPrompts {
		t.Run(p, func(t *testing.T) {
			if statuses[i] != 200 {
				t.Fatalf("status %d: %s", statuses[i], got[i])
			}
			text, finish, comp := completionParts(t, got[i], true)
			if text != want[i] || finish == "" {
				t.Errorf("batched %q (finish %q), serial %q", text, finish, want[i])
			}
			if comp == nil || comp.Scheduling != SchedulingContinuous || comp.BatchRows < 1 || comp.BatchRows > 8 {
				t.Fatalf("execution composition %+v, want continuous with 1-8 rows at admission", comp)
			}
			mostAtAdmission = max(mostAtAdmission, comp.BatchRows)
		})
	}
	if n := <-most; n < 2 || mostAtAdmission < 2 {
		t.Errorf("the engine held at most %d rows at once (%d at an admission); want several", n, mostAtAdmission)
	}
}

// TestBatchDisconnectModel: on the real model, a client leaving mid-stream
// frees its row (active rows drop in /metrics) while the others finish.
func TestBatchDisconnectModel(t *testing.T) {
	m, tk := smollm2(t)
	bm, err := WithBatch(NewMLXModel(m, tk, "smollm2", "test", 0), 8)
	if err != nil {
		t.Fatal(err)
	}
	url, _ := startServer(t, Config{Model: bm})
	// ignore_eos is not an API field: a long max_tokens and a prompt that
	// keeps the model talking make the streams outlast the disconnect.
	req := `{"prompt":"List the numbers from 1 to 100: 1, 2, 3,","max_tokens":24,"temperature":0,"stream":true}`
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hr, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/completions", strings.NewReader(req))
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	others := make(chan []byte, 2)
	for range 2 {
		go func() { _, _, b := postNoFatal(url+"/v1/completions", req); others <- b }()
	}
	waitForLong(t, func() bool { return strings.Contains(metricsText(t, url), "mlxgo_active_rows 3") })
	if _, err := resp.Body.Read(make([]byte, 64)); err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	waitForLong(t, func() bool {
		m := activeRowsRE.FindStringSubmatch(metricsText(t, url))
		return m != nil && m[1] != "3"
	})
	for range 2 {
		b := <-others
		if text, finish := completionText(t, b, true); finish == "" || text == "" {
			t.Errorf("a remaining stream did not finish: %s", b)
		}
	}
	waitForLong(t, func() bool { return strings.Contains(metricsText(t, url), "mlxgo_active_rows 0") })
}

// TestBatchPromptCache: under batching, the second turn of a chat is served
// from the prompt cache (cached tokens reported) and gives the same greedy
// text as a serial server without a prompt cache. The batched server's
// context is exactly the second turn's prompt plus max_tokens, so the cached
// tokens must be counted once against it, not twice.
func TestBatchPromptCache(t *testing.T) {
	m, tk := smollm2(t)
	plain, _ := startServer(t, Config{Model: NewMLXModel(m, tk, "smollm2", "test", 0)})
	type reply struct {
		Choices []struct{ Message struct{ Content string } }
		Usage   struct {
			PromptTokens        int `json:"prompt_tokens"`
			PromptTokensDetails struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		}
	}
	ask := func(url, body string) reply {
		t.Helper()
		status, _, b := post(t, url+"/v1/chat/completions", body)
		if status != 200 {
			t.Fatalf("%s: %d %s", body, status, b)
		}
		var r reply
		if err := json.Unmarshal(b, &r); err != nil || len(r.Choices) != 1 {
			t.Fatalf("cannot decode %s: %v", b, err)
		}
		return r
	}
	turn1 := `{"messages":[{"role":"user","content":"Say hi"}],"max_tokens":4,"temperature":0}`
	first := ask(plain, turn1)
	said, _ := json.Marshal(first.Choices[0].Message.Content)
	turn2 := `{"messages":[{"role":"user","content":"Say hi"},{"role":"assistant","content":` + string(said) + `},{"role":"user","content":"Again"}],"max_tokens":4,"temperature":0}`
	want := ask(plain, turn2)

	bm, err := WithBatch(NewMLXModel(m, tk, "smollm2", "test", 64<<20), 8)
	if err != nil {
		t.Fatal(err)
	}
	bm.ContextLength = want.Usage.PromptTokens + 4
	cached, _ := startServer(t, Config{Model: bm})
	if got := ask(cached, turn1); got.Choices[0].Message.Content != first.Choices[0].Message.Content {
		t.Fatalf("first turn: batched %q, serial %q", got.Choices[0].Message.Content, first.Choices[0].Message.Content)
	}
	got := ask(cached, turn2)
	if n := got.Usage.PromptTokensDetails.CachedTokens; n < 10 {
		t.Errorf("second turn served %d tokens from the cache, want the first turn's prompt (>= 10)", n)
	}
	if a, b := got.Choices[0].Message.Content, want.Choices[0].Message.Content; a != b || a == "" {
		t.Errorf("greedy second turn differs: batched with cache %q, serial without %q", a, b)
	}
	if got.Usage.PromptTokens != want.Usage.PromptTokens {
		t.Errorf("prompt tokens %d, want %d (cached ones included)", got.Usage.PromptTokens, want.Usage.PromptTokens)
	}
}

// waitForLong is waitFor for the real model, whose steps take a while on a
// loaded CPU.
func waitForLong(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting for the engine")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestBatchSeededMatchesSerial: a seeded sampling request gives the same
// text under batching, beside other rows drawing their own keys, as alone on
// the serial engine (where the seed is mlx.Seed before generation).
func TestBatchSeededMatchesSerial(t *testing.T) {
	m, tk := smollm2(t)
	serial, _ := startServer(t, Config{Model: NewMLXModel(m, tk, "smollm2", "test", 0)})
	bm, err := WithBatch(NewMLXModel(m, tk, "smollm2", "test", 0), 4)
	if err != nil {
		t.Fatal(err)
	}
	batched, _ := startServer(t, Config{Model: bm})
	reqs := []string{
		`{"prompt":"Tell me a story about","max_tokens":6,"temperature":0.9,"top_p":0.95,"seed":7}`,
		`{"prompt":"Tell me a story about","max_tokens":6,"temperature":0.9,"top_p":0.95,"seed":8}`,
		`{"prompt":"My favourite colour is","max_tokens":6,"temperature":1.0,"top_k":40,"seed":123}`,
	}
	want := make([]string, len(reqs))
	for i, r := range reqs {
		status, _, b := post(t, serial+"/v1/completions", r)
		if status != 200 {
			t.Fatalf("serial: %d %s", status, b)
		}
		want[i], _ = completionText(t, b, false)
	}
	got := make([][]byte, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Add(1)
		go func() { defer wg.Done(); _, _, got[i] = postNoFatal(batched+"/v1/completions", r) }()
	}
	wg.Wait()
	for i, r := range reqs {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			text, _ := completionText(t, got[i], false)
			if text != want[i] || text == "" {
				t.Errorf("%s: batched %q, serial %q", r, text, want[i])
			}
		})
	}
	if want[0] == want[1] {
		t.Logf("seeds 7 and 8 gave the same text %q: the seed may not be reaching the sampler", want[0])
	}
}
