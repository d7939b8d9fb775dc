package main

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mlxgo/mlxgo/internal/testenv"
)

// buildBinary builds mlxgo as a user gets it (CGO_ENABLED=0) into a temp dir:
// signal handling is only real in a separate process.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mlxgo")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cannot build mlxgo: %v\n%s", err, out)
	}
	return bin
}

var readyLine = regexp.MustCompile(`mlxgo: serving \S+ on (http://\S+)`)

// startServe runs `mlxgo serve` on a free port and returns its base URL once
// the ready line is on stderr (startLaunched); the rest of stderr is in the log.
func startServe(t *testing.T, bin string, args ...string) (*exec.Cmd, string, *syncLog) {
	t.Helper()
	return startLaunched(t, bin, append([]string{"serve", "--port", "0"}, args...)...)
}

// waitExit waits for the process and returns its exit code, failing after d.
func waitExit(t *testing.T, cmd *exec.Cmd, d time.Duration) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatalf("wait: %v", err)
		}
		return 0
	case <-time.After(d):
		t.Fatalf("mlxgo serve still running %v after SIGTERM", d)
	}
	return -1
}

// TestServeSIGTERMDrains: SIGTERM while a stream is in flight lets it finish
// (its [DONE] arrives), refuses new connections, and exits 0; a stream that
// outlives --shutdown-grace is cut and the process still exits 0 promptly.
func TestServeSIGTERMDrains(t *testing.T) {
	if _, err := installedPack(os.Getenv); err != nil {
		testenv.Missing(t, "native pack ("+err.Error()+")", "make native-install")
	}
	gguf := testenv.DataFile(t, filepath.Join("smollm2", DefaultModelFile))
	bin := buildBinary(t)

	stream := func(base string, maxTokens string) (*http.Response, *bufio.Reader) {
		body := `{"prompt":"Once upon a time","max_tokens":` + maxTokens + `,"temperature":0,"stream":true}`
		resp, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatalf("request: %v", err)
		}
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		r := bufio.NewReader(resp.Body)
		for { // wait for the first token: the generation is in flight
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("stream ended before the first token: %v", err)
			}
			if strings.HasPrefix(line, "data: {") {
				return resp, r
			}
		}
	}

	for _, batch := range []string{"1", "8"} {
		t.Run("drain batch "+batch, func(t *testing.T) {
			cmd, base, log := startServe(t, bin, "-m", gguf, "--shutdown-grace", "60s", "--batch", batch)
			resp, r := stream(base, "6")
			defer resp.Body.Close()
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			rest, err := io.ReadAll(r)
			if err != nil {
				t.Fatalf("the in-flight stream broke after SIGTERM: %v", err)
			}
			if !strings.Contains(string(rest), "data: [DONE]") || !strings.Contains(string(rest), `"finish_reason":"`) {
				t.Fatalf("the in-flight stream did not finish after SIGTERM:\n%s", rest)
			}
			if code := waitExit(t, cmd, 30*time.Second); code != 0 {
				t.Fatalf("exit %d after SIGTERM, want 0; stderr:\n%s", code, log.String())
			}
			if _, err := http.Get(base + "/health"); err == nil {
				t.Fatal("the server still accepts connections after it exited")
			}
		})
	}

	t.Run("grace over", func(t *testing.T) {
		cmd, base, log := startServe(t, bin, "-m", gguf, "--shutdown-grace", "1s")
		resp, r := stream(base, "2000")
		defer resp.Body.Close()
		start := time.Now()
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, r) // the stream is cut when the grace period ends
		if code := waitExit(t, cmd, 30*time.Second); code != 0 {
			t.Fatalf("exit %d after SIGTERM, want 0; stderr:\n%s", code, log.String())
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Fatalf("took %v to stop with a 1s grace period", d)
		}
	})
}
