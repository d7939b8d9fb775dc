package server

import (
	"net/http"
	"slices"
	"sync"
	"testing"
)

// gatedBatch is a fakeBatch whose Steps wait on a gate: one long step (a
// long prefill chunk), during which requests keep arriving.
type gatedBatch struct {
	*fakeBatch
	gate chan struct{}
}

func (g *gatedBatch) Step() error {
	<-g.gate
	return g.fakeBatch.Step()
}

// TestQueueBoundCountsRows: with --batch 4 --max-queue 2 the engine holds
// 4 + 2 requests, running or queued, even when they all arrive during one
// step while only one row runs; the 7th gets 429. Before the bound counted
// rows, the queue channel alone (2) refused the 4th request.
func TestQueueBoundCountsRows(t *testing.T) {
	tk := testTokenizer(t)
	ids, _ := tk.Encode("ok", false)
	fake := &gatedBatch{fakeBatch: &fakeBatch{script: ids, max: 4}, gate: make(chan struct{})}
	url, s := startServer(t, Config{MaxQueue: 2, Model: Model{Tokenizer: tk, Runner: fake}})
	var open sync.Once
	release := func() { open.Do(func() { close(fake.gate) }) }
	t.Cleanup(release) // before the server stops, even when the test fails
	if got := s.eng.capacity(); got != 6 {
		t.Fatalf("capacity %d, want batch 4 + max-queue 2", got)
	}
	var wg sync.WaitGroup
	results := make([]int, 6)
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], _, _ = post(t, url+"/v1/completions", `{"prompt":"hi"}`)
		}()
		// The first is admitted and its step blocks the engine; the rest
		// wait in the queue.
		waitFor(t, func() bool { return (i == 0 && fake.Rows() == 1) || (i > 0 && len(s.eng.queue) == i) })
	}
	status, hdr, b := post(t, url+"/v1/completions", `{"prompt":"hi"}`)
	if status != http.StatusTooManyRequests || hdr.Get("Retry-After") == "" {
		t.Errorf("7th request: status %d, Retry-After %q: %s (want 429)", status, hdr.Get("Retry-After"), b)
	}
	release()
	wg.Wait()
	if !slices.Equal(results, []int{200, 200, 200, 200, 200, 200}) {
		t.Errorf("held requests ended with %v, want 200s", results)
	}
	// Every place is given back: another full set fits again.
	if status, _, b := post(t, url+"/v1/completions", `{"prompt":"hi"}`); status != 200 {
		t.Errorf("after the burst: %d %s", status, b)
	}
	s.eng.mu.Lock()
	held := s.eng.held
	s.eng.mu.Unlock()
	if held != 0 {
		t.Errorf("%d places still held after every request ended", held)
	}
}
