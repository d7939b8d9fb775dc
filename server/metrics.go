package server

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"sync"
)

// metrics are the server's Prometheus series, written by hand in the text
// exposition format (version 0.0.4) to keep the binary on the standard
// library.
type metrics struct {
	mu              sync.Mutex
	requests        map[[2]string]float64 // (endpoint, status code) -> count
	promptTokens    *counter
	generatedTokens *counter
	cacheHitTokens  *counter
	ttft            *histogram
	tokenLatency    *histogram
	queueDepth      *gauge
	activeRows      *gauge // rows holding the engine: prefilling or decoding
	decodingRows    *gauge // rows past their prefill
	maxRows         *gauge // the concurrency cap (--batch)
	ranks           *gauge // processes the model is split over (serve --shard; 1 alone)
	cacheBytes      *gauge
	activeMemory    *gauge
	peakMemory      *gauge
	spec            specMetrics // speculative decoding (speculative.go)
}

func newMetrics() *metrics {
	latency := []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	return &metrics{
		requests:        map[[2]string]float64{},
		promptTokens:    &counter{},
		generatedTokens: &counter{},
		cacheHitTokens:  &counter{},
		ttft:            newHistogram(latency),
		tokenLatency:    newHistogram(latency),
		queueDepth:      &gauge{},
		activeRows:      &gauge{},
		decodingRows:    &gauge{},
		maxRows:         &gauge{},
		ranks:           &gauge{},
		cacheBytes:      &gauge{},
		activeMemory:    &gauge{},
		peakMemory:      &gauge{},
	}
}

func (m *metrics) request(endpoint string, status int) {
	m.mu.Lock()
	m.requests[[2]string{endpoint, strconv.Itoa(status)}]++
	m.mu.Unlock()
}

type counter struct {
	mu sync.Mutex
	v  float64
}

func (c *counter) add(v float64) { c.mu.Lock(); c.v += v; c.mu.Unlock() }
func (c *counter) get() float64  { c.mu.Lock(); defer c.mu.Unlock(); return c.v }

type gauge struct{ counter }

func (g *gauge) set(v float64) { g.mu.Lock(); g.v = v; g.mu.Unlock() }

// histogram has cumulative buckets, as Prometheus reads them.
type histogram struct {
	mu     sync.Mutex
	bounds []float64
	counts []uint64 // per bucket, not cumulative; the last is +Inf
	sum    float64
	n      uint64
}

func newHistogram(bounds []float64) *histogram {
	return &histogram{bounds: bounds, counts: make([]uint64, len(bounds)+1)}
}

func (h *histogram) observe(v float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.counts[sort.SearchFloat64s(h.bounds, v)]++
	h.sum += v
	h.n++
}

func (h *histogram) write(w io.Writer, name, help string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name)
	var cum uint64
	for i, b := range h.bounds {
		cum += h.counts[i]
		fmt.Fprintf(w, "%s_bucket{le=\"%s\"} %d\n", name, formatFloat(b), cum)
	}
	fmt.Fprintf(w, "%s_bucket{le=\"+Inf\"} %d\n%s_sum %s\n%s_count %d\n", name, h.n, name, formatFloat(h.sum), name, h.n)
}

func formatFloat(v float64) string {
	if math.IsInf(v, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// write prints every series in a stable order.
func (m *metrics) write(w io.Writer) {
	fmt.Fprintf(w, "# HELP mlxgo_requests_total HTTP requests by endpoint and status code.\n# TYPE mlxgo_requests_total counter\n")
	m.mu.Lock()
	keys := make([][2]string, 0, len(m.requests))
	for k := range m.requests {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i][0] != keys[j][0] {
			return keys[i][0] < keys[j][0]
		}
		return keys[i][1] < keys[j][1]
	})
	for _, k := range keys {
		fmt.Fprintf(w, "mlxgo_requests_total{endpoint=%q,code=%q} %s\n", k[0], k[1], formatFloat(m.requests[k]))
	}
	m.mu.Unlock()
	for _, s := range []struct {
		name, typ, help string
		c               *counter
	}{
		{"mlxgo_prompt_tokens_total", "counter", "Prompt tokens of completed executions, cached ones included.", m.promptTokens},
		{"mlxgo_generation_tokens_total", "counter", "Tokens generated.", m.generatedTokens},
		{"mlxgo_prompt_cache_hit_tokens_total", "counter", "Prompt tokens served from the prompt cache.", m.cacheHitTokens},
		{"mlxgo_queue_depth", "gauge", "Requests waiting for the engine.", &m.queueDepth.counter},
		{"mlxgo_active_rows", "gauge", "Rows the engine holds, prefilling or decoding.", &m.activeRows.counter},
		{"mlxgo_decoding_rows", "gauge", "Rows the engine is decoding (past their prefill).", &m.decodingRows.counter},
		{"mlxgo_batch_max_rows", "gauge", "Rows the engine admits at most (the concurrency cap, --batch).", &m.maxRows.counter},
		{"mlxgo_parallel_ranks", "gauge", "Processes the model is split over (serve --shard; 1: one process).", &m.ranks.counter},
		{"mlxgo_prompt_cache_bytes", "gauge", "Bytes of KV held by the prompt cache.", &m.cacheBytes.counter},
		{"mlxgo_mlx_active_memory_bytes", "gauge", "MLX active memory after the last execution.", &m.activeMemory.counter},
		{"mlxgo_mlx_peak_memory_bytes", "gauge", "MLX peak memory after the last execution.", &m.peakMemory.counter},
	} {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n%s %s\n", s.name, s.help, s.name, s.typ, s.name, formatFloat(s.c.get()))
	}
	m.ttft.write(w, "mlxgo_time_to_first_token_seconds", "Time from admission to the queue until the first token.")
	m.tokenLatency.write(w, "mlxgo_time_per_output_token_seconds", "Time between consecutive generated tokens.")
	m.spec.write(w)
}
