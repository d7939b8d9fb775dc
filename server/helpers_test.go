package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mlxgo/mlxgo/gen"
	"github.com/mlxgo/mlxgo/internal/testenv"
	"github.com/mlxgo/mlxgo/tok"
)

// scriptRunner stands in for the model: it "generates" the tokens of a fixed
// text, so the HTTP layer (framing, stop strings, usage, errors) is tested
// without MLX. It honours MaxTokens, cancellation and ErrStop as
// gen.Generate does.
type scriptRunner struct {
	script  []int32
	delay   time.Duration
	block   chan struct{} // when set, Run waits on it before the first token
	mu      sync.Mutex
	prompts [][]int32
}

func (r *scriptRunner) Run(ctx context.Context, prompt []int32, o gen.Options, seed *uint64, emit func(int32) error) (Result, error) {
	r.mu.Lock()
	r.prompts = append(r.prompts, prompt)
	r.mu.Unlock()
	if r.block != nil {
		select {
		case <-r.block:
		case <-ctx.Done():
			return Result{Stats: gen.Stats{PromptTokens: len(prompt), FinishReason: gen.FinishCancelled}}, ctx.Err()
		}
	}
	st := gen.Stats{PromptTokens: len(prompt), FinishReason: gen.FinishStop}
	for i, id := range r.script {
		if i == o.MaxTokens {
			st.FinishReason = gen.FinishLength
			break
		}
		if r.delay > 0 {
			time.Sleep(r.delay)
		}
		st.GeneratedTokens++
		if err := emit(id); err != nil {
			if err == gen.ErrStop {
				break
			}
			st.FinishReason = gen.FinishCancelled
			return Result{Stats: st}, err
		}
		if err := ctx.Err(); err != nil {
			st.FinishReason = gen.FinishCancelled
			return Result{Stats: st}, err
		}
	}
	return Result{Stats: st}, nil
}

const scriptText = "Hello there! The answer is 42. END of the script, more text after it."

var (
	tokOnce sync.Once
	tokQwen *tok.Tokenizer
	tokErr  error
)

// testTokenizer is Qwen3's tokenizer (it has a chat template), loaded once.
func testTokenizer(t testing.TB) *tok.Tokenizer {
	t.Helper()
	dir := testenv.DataFile(t, "tokenizers/qwen3")
	tokOnce.Do(func() { tokQwen, tokErr = tok.Load(dir) })
	if tokErr != nil {
		t.Fatalf("cannot load the qwen3 tokenizer: %v", tokErr)
	}
	return tokQwen
}

// startServer runs a Server on a loopback port and stops it with the test.
func startServer(t testing.TB, cfg Config) (url string, s *Server) {
	t.Helper()
	if cfg.Model.Tokenizer == nil {
		cfg.Model.Tokenizer = testTokenizer(t)
	}
	if cfg.Model.Runner == nil {
		ids, err := cfg.Model.Tokenizer.Encode(scriptText, false)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Model.Runner = serial(&scriptRunner{script: ids})
	}
	if cfg.Model.Fingerprint == nil {
		cfg.Model.Fingerprint = func() (string, error) { return "sha256:test", nil }
	}
	if cfg.MaxTokens == 0 {
		cfg.MaxTokens = 64
	}
	if cfg.MaxQueue == 0 {
		cfg.MaxQueue = 4
	}
	if cfg.Model.ContextLength == 0 {
		cfg.Model.ContextLength = 256
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	url, stop := runServer(t, s)
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Serve returned %v", err)
		}
	})
	return url, s
}

// post sends a JSON body and returns the status, headers and body.
func post(t testing.TB, url, body string, hdr ...string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// sseEvents splits a stream into its data payloads, checking the framing:
// every event is one "data: " line followed by a blank line.
func sseEvents(t testing.TB, body []byte) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(body))
	expectBlank := false
	for sc.Scan() {
		line := sc.Text()
		if expectBlank {
			if line != "" {
				t.Fatalf("SSE event not followed by a blank line: %q", line)
			}
			expectBlank = false
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("SSE line is not a data line: %q", line)
		}
		out = append(out, data)
		expectBlank = true
	}
	return out
}

func decodeJSON(t testing.TB, b []byte) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("cannot decode %q: %v", b, err)
	}
	return v
}

// runServer serves s on a loopback port until stop, which cancels Serve's
// context (a signal, as far as the server knows) and returns Serve's error.
func runServer(t testing.TB, s *Server) (url string, stop func() error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	ready := make(chan string, 1)
	go func() { done <- s.Serve(ctx, ln, func(u string) { ready <- u }) }()
	url = <-ready
	return url, func() error {
		cancel()
		return <-done
	}
}
