package server

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestEmbeddingsQueueBound: embeddings are jobs of the engine's one bounded
// queue: with --batch 1 --max-queue 1 and a row running, one embeddings
// request is held and the next gets 429; both held requests then finish.
func TestEmbeddingsQueueBound(t *testing.T) {
	m, dir := miniLM(t)
	tk := testTokenizer(t)
	ids, _ := tk.Encode("ok", false)
	fake := &gatedBatch{fakeBatch: &fakeBatch{script: ids, max: 1}, gate: make(chan struct{})}
	url, s := startServer(t, Config{MaxQueue: 1, Model: Model{Tokenizer: tk, Runner: fake},
		Embeddings: NewEmbeddings(m, dir, "all-minilm-l6-v2", "test")})
	var open sync.Once
	release := func() { open.Do(func() { close(fake.gate) }) }
	t.Cleanup(release)
	var wg sync.WaitGroup
	results := make([]int, 2)
	wg.Add(2)
	go func() { defer wg.Done(); results[0], _, _ = post(t, url+"/v1/completions", `{"prompt":"hi"}`) }()
	waitFor(t, func() bool { return fake.Rows() == 1 })
	go func() { defer wg.Done(); results[1], _, _ = post(t, url+"/v1/embeddings", `{"input":"a cat"}`) }()
	waitFor(t, func() bool { return len(s.eng.tasksq) == 1 })
	status, hdr, b := post(t, url+"/v1/embeddings", `{"input":"a dog"}`)
	if status != http.StatusTooManyRequests || hdr.Get("Retry-After") == "" {
		t.Errorf("embeddings past the bound: status %d, Retry-After %q: %s (want 429)", status, hdr.Get("Retry-After"), b)
	}
	release()
	wg.Wait()
	if results[0] != 200 || results[1] != 200 {
		t.Errorf("held requests ended with %v, want 200s", results)
	}
}

// TestEmbeddingsDuringSerialGeneration: with --batch 1 an embeddings
// request is answered between the steps of a running generation, not after
// it (before one engine, it waited behind the whole generation or bypassed
// the queue).
func TestEmbeddingsDuringSerialGeneration(t *testing.T) {
	m, dir := miniLM(t)
	tk := testTokenizer(t)
	ids, _ := tk.Encode(strings.Repeat("word ", 300), false)
	run := &scriptRunner{script: ids, delay: 10 * time.Millisecond}
	url, _ := startServer(t, Config{MaxTokens: 300, Model: Model{Tokenizer: tk, Runner: serial(run), ContextLength: 4096},
		Embeddings: NewEmbeddings(m, dir, "all-minilm-l6-v2", "test")})
	genDone := make(chan int, 1)
	go func() {
		status, _, _ := post(t, url+"/v1/completions", `{"prompt":"hi","max_tokens":300}`)
		genDone <- status
	}()
	waitFor(t, func() bool { return strings.Contains(metricsText(t, url), "mlxgo_decoding_rows 1") })
	if status, _, b := post(t, url+"/v1/embeddings", `{"input":"a cat"}`); status != 200 {
		t.Fatalf("embeddings: %d %s", status, b)
	}
	select {
	case status := <-genDone:
		t.Fatalf("the generation (status %d) ended before the embeddings request was answered", status)
	default:
	}
	if status := <-genDone; status != 200 {
		t.Errorf("generation: %d", status)
	}
}
