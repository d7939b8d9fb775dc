package server

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mlxgo/mlxgo/mlx"
)

// loadFor is how long TestLoad runs; make test-load runs it for the
// issue's two minutes (go test ./server -run TestLoad -load 2m).
var loadFor = flag.Duration("load", 20*time.Second, "how long TestLoad sends requests")

// TestLoad: 32 clients send a mix of streamed chat completions, completions
// and embeddings to SmolLM2 (with --batch 8 --max-queue 16) and all-MiniLM
// for -load (20 s by default). Every answer is a 200, or a 429 with
// Retry-After once the bound is full; the engine never holds more than its
// bound; afterwards no row, queued job or place in the bound is left, and
// MLX's live arrays and active memory are back to their idle values.
func TestLoad(t *testing.T) {
	lm, tk := smollm2(t)
	em, dir := miniLM(t)
	if testing.Short() {
		t.Skip("a load test; not with -short")
	}
	sm, err := WithBatch(NewMLXModel(lm, tk, "smollm2", "test", 0), 8)
	if err != nil {
		t.Fatal(err)
	}
	url, s := startServer(t, Config{MaxQueue: 16, MaxTokens: 16, Model: sm, Embeddings: NewEmbeddings(em, dir, "all-minilm-l6-v2", "test")})
	bodies := []struct{ path, body string }{
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"Name a colour %d."}],"max_tokens":12,"stream":true,"temperature":0.7,"seed":%d}`},
		{"/v1/completions", `{"prompt":"Once upon a time %d","max_tokens":%d}`},
		{"/v1/embeddings", `{"input":["a cat %d","the quick brown fox jumps over the lazy dog %d"]}`},
	}
	// Idle figures after one request of each kind (first-call allocations).
	for i, b := range bodies {
		if status, _, out := post(t, url+b.path, fmt.Sprintf(b.body, i, 4)); status != 200 {
			t.Fatalf("warm-up %s: %d %s", b.path, status, out)
		}
	}
	waitFor(t, func() bool { return idle(s) })
	idleLive, idleActive := mlxFigures(t)

	var (
		ok, full, sent atomic.Int64
		peakHeld       atomic.Int64
		errMu          sync.Mutex
		errs           []string
	)
	fail := func(format string, args ...any) {
		errMu.Lock()
		defer errMu.Unlock()
		if len(errs) < 10 {
			errs = append(errs, fmt.Sprintf(format, args...))
		}
	}
	deadline := time.Now().Add(*loadFor)
	stopWatch := make(chan struct{})
	watched := make(chan struct{})
	go func() { // the bound, sampled while the clients run
		defer close(watched)
		for {
			select {
			case <-stopWatch:
				return
			case <-time.After(2 * time.Millisecond):
			}
			s.eng.mu.Lock()
			held := int64(s.eng.held)
			s.eng.mu.Unlock()
			if held > peakHeld.Load() {
				peakHeld.Store(held)
			}
		}
	}()
	var wg sync.WaitGroup
	for c := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; time.Now().Before(deadline); n++ {
				b := bodies[(c+n)%len(bodies)]
				sent.Add(1)
				status, hdr, text, err := send(url+b.path, fmt.Sprintf(b.body, c*1000+n, 1+(c+n)%16))
				switch {
				case err != nil:
					fail("%s: %v", b.path, err)
				case status == http.StatusTooManyRequests:
					if hdr.Get("Retry-After") == "" {
						fail("%s: 429 without Retry-After", b.path)
					}
					full.Add(1)
					time.Sleep(250 * time.Millisecond) // a client that backs off

				case status != 200:
					fail("%s: %d %s", b.path, status, text)
				case strings.HasSuffix(b.path, "chat/completions") && !strings.Contains(text, "data: [DONE]"):
					fail("%s: the stream did not end with [DONE]: %s", b.path, text)
				default:
					ok.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(stopWatch)
	<-watched
	t.Logf("%d requests in %v: %d answered, %d refused with 429; at most %d held (bound %d)",
		sent.Load(), *loadFor, ok.Load(), full.Load(), peakHeld.Load(), s.eng.capacity())
	for _, e := range errs {
		t.Error(e)
	}
	if p := peakHeld.Load(); p > int64(s.eng.capacity()) {
		t.Errorf("the engine held %d jobs, over its bound of %d", p, s.eng.capacity())
	}
	if ok.Load() < 32 {
		t.Errorf("%d requests answered, want at least one per client", ok.Load())
	}
	// The gauges are set by the engine after the step that ended the last
	// rows: wait for them too.
	gauges := []string{"mlxgo_active_rows 0\n", "mlxgo_decoding_rows 0\n", "mlxgo_queue_depth 0\n"}
	waitFor(t, func() bool {
		m := metricsText(t, url)
		for _, g := range gauges {
			if !strings.Contains(m, g) {
				return false
			}
		}
		return idle(s)
	})
	live, active := mlxFigures(t)
	if live != idleLive || active != idleActive {
		t.Errorf("MLX after the load: %d live arrays, %d bytes active; idle: %d, %d", live, active, idleLive, idleActive)
	}
}

// idle reports whether the engine holds no job and no row.
func idle(s *Server) bool {
	s.eng.mu.Lock()
	held := s.eng.held
	s.eng.mu.Unlock()
	// No place held: every job's final event was sent, so every row has
	// ended (the runner's own counts belong to the engine goroutine).
	return held == 0 && len(s.eng.queue) == 0 && len(s.eng.tasksq) == 0
}

// mlxFigures are MLX's live arrays and active memory, with freed buffers
// returned first so that only what is held counts.
func mlxFigures(t *testing.T) (live int64, active uint64) {
	t.Helper()
	err := mlx.Do(func() error {
		if err := mlx.ClearCache(); err != nil {
			return err
		}
		m, err := mlx.Memory()
		live, active = mlx.LiveArrays(), m.Active
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return live, active
}

// send posts body and reads the whole answer (a stream to its end).
func send(url, body string) (int, http.Header, string, error) {
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	var sb strings.Builder
	_, err = io.Copy(&sb, bufio.NewReader(resp.Body))
	return resp.StatusCode, resp.Header, sb.String(), err
}
