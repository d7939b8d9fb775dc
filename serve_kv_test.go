package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mlxgo/mlxgo/internal/testenv"
)

// lockedBuffer is a stderr that serve writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// serveInProcess runs `mlxgo serve --port 0 args...` in this process until
// the test ends and returns its base URL and stderr.
func serveInProcess(t *testing.T, args ...string) (string, *lockedBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &lockedBuffer{}
	done := make(chan int, 1)
	m := &Main{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: stderr}
	go func() { done <- m.Run(ctx, append([]string{"serve", "--port", "0"}, args...)) }()
	t.Cleanup(func() { cancel(); <-done })
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if m := readyLine.FindStringSubmatch(stderr.String()); m != nil {
			return m[1], stderr
		}
		select {
		case code := <-done:
			done <- code
			t.Fatalf("mlxgo serve exited %d before it was ready:\n%s", code, stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("mlxgo serve not ready after 2 minutes:\n%s", stderr.String())
	return "", nil
}

// TestServeKVBitsEqualsGenerate (L1 through generate, which models/l1_test.go
// holds bit-identical to mlx-lm's QuantizedKVCache): a served greedy
// completion with --kv-bits 8 (4) is the text `mlxgo generate --kv-bits 8`
// (4) prints for the same prompt, again when the prompt cache serves the
// quantized prefix, and with a kv_config.json beside the weights that
// lists every layer at those bits; x_mlxgo.kv_scheme says so.
func TestServeKVBitsEqualsGenerate(t *testing.T) {
	if _, err := installedPack(os.Getenv); err != nil {
		testenv.Missing(t, "native pack ("+err.Error()+")", "make native-install")
	}
	gguf := testenv.DataFile(t, filepath.Join("smollm2", DefaultModelFile))
	const prompt, maxTokens = "The capital of France is", "24"
	for _, bits := range []string{"8", "4"} {
		t.Run("kv-bits "+bits, func(t *testing.T) {
			kvArgs := []string{"--kv-bits", bits, "--quantized-kv-start", "0"}
			var stdout, stderr bytes.Buffer
			m := &Main{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr}
			if code := m.Run(context.Background(), append([]string{"generate", "-m", gguf, "--raw", "-p", prompt, "--max-tokens", maxTokens}, kvArgs...)); code != 0 {
				t.Fatalf("generate exit %d: %s", code, stderr.String())
			}
			want := strings.TrimSuffix(stdout.String(), "\n")
			if bits == "4" {
				// On this prompt 4-bit KV changes the text: the quantized
				// path really ran.
				stdout.Reset()
				if code := m.Run(context.Background(), []string{"generate", "-m", gguf, "--raw", "-p", prompt, "--max-tokens", maxTokens}); code != 0 || strings.TrimSuffix(stdout.String(), "\n") == want {
					t.Fatalf("generate without --kv-bits: exit %d, %q (the same text as 4-bit KV)", code, stdout.String())
				}
			}

			// kv_config.json beside a link to the weights: every layer at bits.
			dir := t.TempDir()
			if err := os.Symlink(gguf, filepath.Join(dir, filepath.Base(gguf))); err != nil {
				t.Fatal(err)
			}
			var layers []string
			for i := range 30 { // SmolLM2-135M's layers
				layers = append(layers, `{"layer_idx":`+itoa(i)+`,"bits":`+bits+`,"group_size":64}`)
			}
			os.WriteFile(filepath.Join(dir, "kv_config.json"), []byte("["+strings.Join(layers, ",")+"]"), 0o644)

			for _, tc := range []struct {
				name   string
				args   []string
				scheme string
			}{
				{"flags", append([]string{"-m", gguf}, kvArgs...), "quantized " + bits + "-bit affine g64 (mlx-lm's QuantizedKVCache) from 0 cached tokens"},
				{"kv_config.json", []string{"-m", filepath.Join(dir, filepath.Base(gguf)), "--quantized-kv-start", "0"}, "quantized per layer by kv_config.json (of 30 layers: 30 at " + bits + "-bit affine g64) from 0 cached tokens"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					url, _ := serveInProcess(t, tc.args...)
					for i, wantCached := range []bool{false, true} {
						resp, err := http.Post(url+"/v1/completions", "application/json",
							strings.NewReader(`{"prompt":"`+prompt+`","max_tokens":`+maxTokens+`,"temperature":0}`))
						if err != nil {
							t.Fatal(err)
						}
						var r struct {
							Choices []struct{ Text string }
							Usage   struct {
								Details struct {
									Cached int `json:"cached_tokens"`
								} `json:"prompt_tokens_details"`
							}
							X struct {
								KVScheme string `json:"kv_scheme"`
							} `json:"x_mlxgo"`
						}
						b, _ := io.ReadAll(resp.Body)
						resp.Body.Close()
						if resp.StatusCode != 200 || json.Unmarshal(b, &r) != nil || len(r.Choices) != 1 {
							t.Fatalf("request %d: %d %s", i, resp.StatusCode, b)
						}
						if r.Choices[0].Text != want {
							t.Errorf("request %d (cached %d): served %q\n generate printed %q", i, r.Usage.Details.Cached, r.Choices[0].Text, want)
						}
						if (r.Usage.Details.Cached > 0) != wantCached {
							t.Errorf("request %d: %d cached tokens", i, r.Usage.Details.Cached)
						}
						if !strings.Contains(r.X.KVScheme, tc.scheme) {
							t.Errorf("kv_scheme %q, want it to hold %q", r.X.KVScheme, tc.scheme)
						}
					}
				})
			}
		})
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }
