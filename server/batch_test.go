package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mlxgo/mlxgo/gen"
)

// batchFixture is an engine over a fakeBatch, driven without HTTP so that
// the order of submissions is exact.
type batchFixture struct {
	t    *testing.T
	fake *fakeBatch
	eng  *engine
	m    *metrics
}

func newBatchFixture(t *testing.T, fake *fakeBatch, maxQueue int) *batchFixture {
	t.Helper()
	if fake.script == nil {
		ids, err := testTokenizer(t).Encode(scriptText, false)
		if err != nil {
			t.Fatal(err)
		}
		fake.script = ids
	}
	m := newMetrics()
	return &batchFixture{t: t, fake: fake, eng: newEngine(fake, maxQueue, m), m: m}
}

// job makes a queued request whose prompt's first token is id (the fake
// logs rows by it), with events buffered as the handlers buffer them.
func (f *batchFixture) job(ctx context.Context, id int32, maxTokens, buffer int) *job {
	return &job{
		ctx: ctx, prompt: []int32{id, 7, 7}, opts: gen.Options{MaxTokens: maxTokens},
		text:   gen.NewTextStream(testTokenizer(f.t).NewDetokenizer(true), nil),
		events: make(chan event, buffer), queued: time.Now(), m: f.m,
	}
}

func (f *batchFixture) submit(j *job) {
	f.t.Helper()
	if err := f.eng.submit(j); err != nil {
		f.t.Fatalf("submit: %v", err)
	}
}

// start runs the engine goroutine until the test ends.
func (f *batchFixture) start() {
	go f.eng.run()
	f.t.Cleanup(f.eng.close)
}

// collect reads a job's events to the end, as a non-streaming handler does.
func collect(j *job) (string, event) {
	var text strings.Builder
	for {
		ev := j.next()
		if ev.done {
			return text.String(), ev
		}
		text.WriteString(ev.text)
	}
}

// TestBatchAdmission: jobs are admitted in the order they were queued, never
// more than the cap at once, each records the rows at its admission, and
// every one gets the whole script.
func TestBatchAdmission(t *testing.T) {
	for _, tc := range []struct {
		name       string
		rows, jobs int
	}{
		{"two rows, five jobs", 2, 5},
		{"three rows, seven jobs", 3, 7},
		{"eight rows, sixteen jobs", 8, 16},
		{"more rows than jobs", 8, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newBatchFixture(t, &fakeBatch{max: tc.rows}, tc.jobs)
			var jobs []*job
			for i := range tc.jobs {
				j := f.job(context.Background(), int32(100+i), 0, 64)
				f.submit(j)
				jobs = append(jobs, j)
			}
			f.start()
			for i, j := range jobs {
				text, ev := collect(j)
				if ev.err != nil || text != scriptText {
					t.Fatalf("job %d: text %q, err %v", i, text, ev.err)
				}
				if ev.res.Scheduling != SchedulingContinuous {
					t.Errorf("job %d scheduled %q, want %q", i, ev.res.Scheduling, SchedulingContinuous)
				}
				if want := i + 1; i < tc.rows && ev.res.BatchRows != want {
					t.Errorf("job %d admitted with %d rows, want %d", i, ev.res.BatchRows, want)
				}
				if ev.res.BatchRows < 1 || ev.res.BatchRows > tc.rows {
					t.Errorf("job %d: batch rows %d outside 1..%d", i, ev.res.BatchRows, tc.rows)
				}
			}
			var adds []string
			for _, e := range f.fake.events() {
				if strings.HasPrefix(e, "add ") {
					adds = append(adds, e)
				}
			}
			for i, a := range adds {
				if want := fmt.Sprintf("add %d", 100+i); a != want {
					t.Fatalf("admission %d is %q, want %q (order %v)", i, a, want, adds)
				}
			}
			if want := min(tc.rows, tc.jobs); f.fake.peakRows() != want {
				t.Errorf("peak rows %d, want %d", f.fake.peakRows(), want)
			}
			if got := f.m.maxRows.get(); got != float64(tc.rows) {
				t.Errorf("mlxgo_batch_max_rows %v, want %d", got, tc.rows)
			}
		})
	}
}

// TestBatchCancelFreesRow: a cancelled job ends at the next Step and its row
// goes to the job waiting in the queue while the other row still runs.
func TestBatchCancelFreesRow(t *testing.T) {
	long := make([]int32, 400)
	for i := range long {
		long[i] = 1234 // any token: the text is not checked here
	}
	f := newBatchFixture(t, &fakeBatch{max: 2, script: long, delay: time.Millisecond}, 4)
	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	a := f.job(ctxA, 1, 0, 64)
	b := f.job(context.Background(), 2, 0, 64)
	c := f.job(context.Background(), 3, 5, 64)
	for _, j := range []*job{a, b, c} {
		f.submit(j)
	}
	f.start()
	if ev := a.next(); ev.done {
		t.Fatalf("job a ended before its first token: %v", ev.err)
	}
	cancelA()
	if _, ev := collect(c); ev.err != nil || ev.res.Stats.GeneratedTokens != 5 {
		t.Fatalf("job c: %+v", ev)
	}
	log := f.fake.events()
	endA, addC, endB := slices.Index(log, "end 1 context canceled"), slices.Index(log, "add 3"), slices.IndexFunc(log, func(s string) bool { return strings.HasPrefix(s, "end 2") })
	if endA < 0 || addC < endA || (endB >= 0 && endB < addC) {
		t.Errorf("want a cancelled, then c admitted while b runs; log %v", log)
	}
	if _, ev := collect(b); ev.err != nil || ev.res.Stats.GeneratedTokens != len(long) {
		t.Errorf("job b after the cancel: %+v", ev)
	}
}

// TestBatchSlowClient: a client that does not read its events does not
// stall the other rows; what it missed waits for it, in order.
func TestBatchSlowClient(t *testing.T) {
	f := newBatchFixture(t, &fakeBatch{max: 2}, 4)
	slow := f.job(context.Background(), 1, 0, 1)
	fast := f.job(context.Background(), 2, 0, 1)
	f.submit(slow)
	f.submit(fast)
	f.start()
	if text, ev := collect(fast); ev.err != nil || text != scriptText {
		t.Fatalf("fast client: %q %v", text, ev.err)
	}
	if text, ev := collect(slow); ev.err != nil || text != scriptText {
		t.Errorf("slow client got %q %v, want the whole script", text, ev.err)
	}
}

// TestBatchStepError: a failed Step ends every row with its error, and the
// engine goes on with the next job.
func TestBatchStepError(t *testing.T) {
	f := newBatchFixture(t, &fakeBatch{max: 2}, 4)
	boom := &failingBatch{fakeBatch: f.fake, failAt: 3}
	f.eng = newEngine(boom, 4, f.m)
	a := f.job(context.Background(), 1, 0, 64)
	b := f.job(context.Background(), 2, 2, 64)
	f.submit(a)
	f.start()
	if _, ev := collect(a); ev.err == nil || !strings.Contains(ev.err.Error(), "step failed") {
		t.Fatalf("job a: err %v, want the step's error", ev.err)
	}
	f.submit(b)
	if _, ev := collect(b); ev.err != nil || ev.res.Stats.GeneratedTokens != 2 {
		t.Errorf("job b after the failure: %+v", ev)
	}
}

// failingBatch fails its failAt-th Step.
type failingBatch struct {
	*fakeBatch
	steps, failAt int
}

func (f *failingBatch) Step() error {
	if f.steps++; f.steps == f.failAt {
		return errors.New("step failed: out of memory")
	}
	return f.fakeBatch.Step()
}

// TestBatchQueueFull: with every row taken and the queue full, a request
// gets 429 with Retry-After; the others finish once the batch moves.
func TestBatchQueueFull(t *testing.T) {
	tk := testTokenizer(t)
	ids, _ := tk.Encode("ok", false)
	fake := &fakeBatch{script: ids, max: 2, hold: make(chan struct{})}
	url, s := startServer(t, Config{MaxQueue: 1, Model: Model{Tokenizer: tk, Runner: fake}})
	var wg sync.WaitGroup
	results := make([]int, 3)
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], _, _ = post(t, url+"/v1/completions", `{"prompt":"hi"}`)
		}()
		// Wait until the first two hold rows and the third is queued.
		waitFor(t, func() bool { return (i < 2 && fake.Rows() == i+1) || (i == 2 && len(s.eng.queue) == 1) })
	}
	status, hdr, b := post(t, url+"/v1/completions", `{"prompt":"hi"}`)
	if status != http.StatusTooManyRequests || hdr.Get("Retry-After") == "" {
		t.Errorf("status %d, Retry-After %q: %s", status, hdr.Get("Retry-After"), b)
	}
	close(fake.hold)
	wg.Wait()
	if !slices.Equal(results, []int{200, 200, 200}) {
		t.Errorf("admitted and queued requests ended with %v, want 200s", results)
	}
}

// TestBatchDisconnect: a client leaving mid-stream frees its row (active
// rows drop in /metrics) while the other stream runs on and finishes.
func TestBatchDisconnect(t *testing.T) {
	tk := testTokenizer(t)
	ids, _ := tk.Encode(strings.Repeat("word ", 100), false)
	fake := &fakeBatch{script: ids, max: 4, delay: 5 * time.Millisecond}
	url, _ := startServer(t, Config{MaxTokens: 100, Model: Model{Tokenizer: tk, Runner: fake, ContextLength: 4096}})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/completions", strings.NewReader(`{"prompt":"hi","stream":true}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	// The stream holds its row before the other comes: 2 rows at its admission.
	waitFor(t, func() bool { return strings.Contains(metricsText(t, url), "mlxgo_active_rows 1") })
	other := make(chan []byte, 1)
	go func() {
		_, _, b := postNoFatal(url+"/v1/completions", `{"prompt":"hello","max_tokens":60}`)
		other <- b
	}()
	waitFor(t, func() bool { return strings.Contains(metricsText(t, url), "mlxgo_active_rows 2") })
	if _, err := resp.Body.Read(make([]byte, 64)); err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	waitFor(t, func() bool { return strings.Contains(metricsText(t, url), "mlxgo_active_rows 1") })
	select {
	case b := <-other:
		t.Fatalf("the other stream ended before the disconnect was seen: %s", b)
	default:
	}
	if b := string(<-other); !strings.Contains(b, `"finish_reason":"length"`) || !strings.Contains(b, `"completion_tokens":60`) ||
		!strings.Contains(b, `"scheduling":"continuous","batch_rows":2`) {
		t.Errorf("the other request did not finish: %s", b)
	}
	// The response can end before the engine's gauge counts the row gone
	// (seen once, on a machine loaded by other tests).
	waitFor(t, func() bool { return strings.Contains(metricsText(t, url), "mlxgo_active_rows 0") })
	if m := metricsText(t, url); !strings.Contains(m, "mlxgo_batch_max_rows 4") {
		t.Errorf("metrics after both ended:\n%s", m)
	}
}

// TestBatchShutdown: on shutdown, rows that finish within the grace period
// finish; rows that do not are cancelled when it is over, and Serve
// returns nil either way.
func TestBatchShutdown(t *testing.T) {
	for _, tc := range []struct {
		name   string
		grace  time.Duration
		tokens int
		want   string // in the body, or "" for a cut stream
	}{
		{"finish within grace", 5 * time.Second, 40, `"finish_reason":"length"`},
		{"cancelled after grace", 100 * time.Millisecond, 2000, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tk := testTokenizer(t)
			ids, _ := tk.Encode(strings.Repeat("word ", tc.tokens), false)
			fake := &fakeBatch{script: ids, max: 2, delay: 2 * time.Millisecond}
			s, err := New(Config{MaxTokens: tc.tokens, MaxQueue: 2, ShutdownGrace: tc.grace,
				Model: Model{Tokenizer: tk, Runner: fake, ContextLength: 4096}})
			if err != nil {
				t.Fatal(err)
			}
			url, stop := runServer(t, s)
			bodies := make(chan string, 2)
			for _, p := range []string{"a", "b"} {
				go func() {
					_, _, b := postNoFatal(url+"/v1/completions", `{"prompt":"`+p+`","stream":true}`)
					bodies <- string(b)
				}()
			}
			waitFor(t, func() bool { return fake.Rows() == 2 })
			start := time.Now()
			if err := stop(); err != nil {
				t.Fatalf("Serve: %v", err)
			}
			if took := time.Since(start); took > tc.grace+2*time.Second {
				t.Errorf("shutdown took %v with a grace of %v", took, tc.grace)
			}
			for range 2 {
				b := <-bodies
				if tc.want != "" && !strings.Contains(b, tc.want) {
					t.Errorf("in-flight stream did not finish: %.200s", b)
				}
				if tc.want == "" && strings.Contains(b, "[DONE]") {
					t.Errorf("a %d-token stream finished within %v: %.200s", tc.tokens, tc.grace, b)
				}
			}
			if n := fake.Rows(); n != 0 {
				t.Errorf("%d rows left after shutdown", n)
			}
		})
	}
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting for the engine")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// postNoFatal is post for goroutines that may outlive a failing test: a
// connection cut by the shutdown is an empty body, not a test failure.
func postNoFatal(url, body string) (int, http.Header, []byte) {
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, nil, nil
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, resp.Header, []byte(b.String())
}

// TestBatchRequestTimeout: a row past --request-timeout is a 504 and ends at
// the engine's next step (its row freed); a quick one is unaffected.
func TestBatchRequestTimeout(t *testing.T) {
	tk := testTokenizer(t)
	ids, _ := tk.Encode(strings.Repeat("word ", 100), false)
	fake := &fakeBatch{script: ids, max: 2, delay: 5 * time.Millisecond}
	url, _ := startServer(t, Config{MaxTokens: 100, RequestTimeout: 150 * time.Millisecond,
		Model: Model{Tokenizer: tk, Runner: fake, ContextLength: 4096}})
	for _, tc := range []struct {
		name, body string
		status     int
	}{
		{"past the timeout", `{"prompt":"slow"}`, http.StatusGatewayTimeout},
		{"within it", `{"prompt":"quick","max_tokens":3}`, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if status, _, b := postNoFatal(url+"/v1/completions", tc.body); status != tc.status {
				t.Errorf("status %d, want %d: %s", status, tc.status, b)
			}
		})
	}
	waitFor(t, func() bool { return fake.Rows() == 0 })
	if log := strings.Join(fake.events(), "\n"); !strings.Contains(log, "deadline exceeded") {
		t.Errorf("no row ended by its deadline:\n%s", log)
	}
}
