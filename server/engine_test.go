package server

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mlxgo/mlxgo/gen"
)

// TestDisconnectFreesRow: a client that leaves mid-stream ends its
// execution at the next token (active rows back to 0 in /metrics) and the
// next request is served.
func TestDisconnectFreesRow(t *testing.T) {
	tk := testTokenizer(t)
	ids, _ := tk.Encode(strings.Repeat("word ", 200), false)
	run := &scriptRunner{script: ids, delay: 10 * time.Millisecond}
	url, _ := startServer(t, Config{MaxTokens: 200, Model: Model{Tokenizer: tk, Runner: serial(run), ContextLength: 4096}})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/completions", strings.NewReader(`{"prompt":"hi","stream":true}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if _, err := resp.Body.Read(buf); err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(metricsText(t, url), "mlxgo_active_rows 0") {
		if time.Now().After(deadline) {
			t.Fatal("the row was not freed after the client left")
		}
		time.Sleep(10 * time.Millisecond)
	}
	status, _, b := post(t, url+"/v1/completions", `{"prompt":"hi","max_tokens":2}`)
	if status != 200 {
		t.Fatalf("next request: %d %s", status, b)
	}
	m := metricsText(t, url)
	for _, want := range []string{`mlxgo_requests_total{endpoint="/v1/completions",code="200"} 2`, "mlxgo_time_to_first_token_seconds_count 2", "# TYPE mlxgo_time_per_output_token_seconds histogram"} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q:\n%s", want, m)
		}
	}
}

type panicRunner struct{}

func (panicRunner) Run(context.Context, []int32, gen.Options, *uint64, func(int32) error) (Result, error) {
	return Result{}, nil
}

// TestPanicBecomes500: a panic in a handler is a 500 in OpenAI's shape.
func TestPanicBecomes500(t *testing.T) {
	s, err := New(Config{MaxTokens: 8, MaxQueue: 1, Model: Model{Tokenizer: testTokenizer(t), Runner: serial(panicRunner{})}})
	if err != nil {
		t.Fatal(err)
	}
	h := s.counted("/boom", func(http.ResponseWriter, *http.Request) { panic("boom") })
	rec := &recorder{header: http.Header{}}
	h.ServeHTTP(rec, httpRequest(t))
	if rec.status != 500 || !strings.Contains(rec.body.String(), `"type":"server_error"`) {
		t.Errorf("status %d body %s", rec.status, rec.body.String())
	}
}

func metricsText(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

type recorder struct {
	header http.Header
	status int
	body   strings.Builder
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
func (r *recorder) WriteHeader(s int)           { r.status = s }

func httpRequest(t *testing.T) *http.Request {
	req, err := http.NewRequest("GET", "/boom", nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}
