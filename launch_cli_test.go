package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mlxgo/mlxgo/internal/testenv"
)

// smollm2Sharded is sharded.py --smollm2's reference: mlx-lm's SmolLM2 after
// model.shard(group) on 3 ranks (9 query heads do not split over 2).
type smollm2Sharded struct {
	Prompt    string `json:"prompt"`
	MaxTokens int    `json:"max_tokens"`
	Text      string `json:"text"`
	Shard     struct {
		Size int `json:"size"`
	} `json:"shard"`
}

func readSmolLM2Sharded(t *testing.T) (smollm2Sharded, string) {
	t.Helper()
	if _, err := installedPack(os.Getenv); err != nil {
		testenv.Missing(t, "native pack ("+err.Error()+")", "make native-install")
	}
	path := filepath.Join(oracleDir(), "sharded", "smollm2-3ranks.json")
	data, err := os.ReadFile(path)
	if err != nil {
		testenv.Missing(t, "sharded SmolLM2 reference "+path, "make oracle")
	}
	var ref smollm2Sharded
	if err := json.Unmarshal(data, &ref); err != nil {
		t.Fatal(err)
	}
	return ref, filepath.Join(oracleDir(), "models", "smollm2-q4_1")
}

// mlxgo launch -n 3 -- generate --shard tensor prints the text mlx-lm's
// sharded SmolLM2 generates on 3 ranks (mlx.launch), greedy.
func TestLaunchShardedSmolLM2(t *testing.T) {
	ref, model := readSmolLM2Sharded(t)
	bin := buildBinary(t)
	cmd := exec.Command(bin, "launch", "-n", strconv.Itoa(ref.Shard.Size), "--starting-port", "0", "--",
		"generate", "-m", model, "--shard", "tensor", "-p", ref.Prompt, "--max-tokens", strconv.Itoa(ref.MaxTokens), "--threads", "1", "--json-stats")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("mlxgo launch: %v\n%s", err, stderr.String())
	}
	if stdout.String() != ref.Text+"\n" {
		t.Fatalf("stdout %q, want mlx-lm's sharded %q", stdout.String(), ref.Text)
	}
	if strings.Contains(stderr.String(), "error") {
		t.Fatalf("stderr: %s", stderr.String())
	}
	// The composition records the parallelism; only rank 0 reports.
	var stats struct {
		Parallelism string `json:"parallelism"`
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &stats) != nil || stats.Parallelism != fmt.Sprintf("tensor x%d over ring", ref.Shard.Size) {
		t.Fatalf("stderr %q, want rank 0's one --json-stats line with parallelism tensor x%d over ring", stderr.String(), ref.Shard.Size)
	}
}

// rankPid finds the launched process with MLX_RANK=rank among parent's
// children (Linux /proc).
func rankPid(parent, rank int) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(stat)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 2 || f[1] != strconv.Itoa(parent) {
			continue
		}
		env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		for _, kv := range strings.Split(string(env), "\x00") {
			if kv == "MLX_RANK="+strconv.Itoa(rank) {
				return pid
			}
		}
	}
	return 0
}

// Killing rank 1 in the middle of a generation ends the job with a clear
// error naming it, within 10 s, and leaves no rank running.
func TestLaunchRankKilled(t *testing.T) {
	ref, model := readSmolLM2Sharded(t)
	bin := buildBinary(t)
	cmd := exec.Command(bin, "launch", "-n", strconv.Itoa(ref.Shard.Size), "--starting-port", "0", "--",
		"generate", "-m", model, "--shard", "tensor", "-p", ref.Prompt, "--max-tokens", "5000", "--ignore-eos", "--threads", "1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	// Wait for generated text: the ranks are decoding.
	first := make(chan bool, 1)
	go func() {
		r := bufio.NewReader(out)
		_, err := r.ReadByte()
		first <- err == nil
		r.WriteTo(devNull{})
	}()
	select {
	case ok := <-first:
		if !ok {
			t.Fatalf("no output before exit:\n%s", stderr.String())
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("no output after 3 minutes:\n%s", stderr.String())
	}
	pid := rankPid(cmd.Process.Pid, 1)
	if pid == 0 {
		t.Fatal("cannot find rank 1's process")
	}
	var others []int
	for r := range ref.Shard.Size {
		if r != 1 {
			others = append(others, rankPid(cmd.Process.Pid, r))
		}
	}
	start := time.Now()
	syscall.Kill(pid, syscall.SIGKILL)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 1 {
			t.Fatalf("launcher ended with %v, want exit status 1", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("launcher still running 10 s after rank 1 was killed:\n%s", stderr.String())
	}
	t.Logf("stopped %v after the kill", time.Since(start))
	want := "mlxgo: error: rank failed: rank 1 was killed by signal killed; stopped the other ranks\n"
	if !strings.HasSuffix(stderr.String(), want) {
		t.Fatalf("stderr %q, want it to end with %q", stderr.String(), want)
	}
	for _, p := range others {
		if p != 0 && syscall.Kill(p, 0) == nil {
			if st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p)); !strings.Contains(string(st), ") Z ") {
				t.Errorf("rank process %d still runs", p)
			}
		}
	}
}

type devNull struct{}

func (devNull) Write(p []byte) (int, error) { return len(p), nil }

// Errors before any rank computes: each is one clear line, exit 1 or 2.
func TestLaunchErrors(t *testing.T) {
	bin := buildBinary(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`[{"ips": ["10.0.0.1"]}]`), 0o600)
	unreachable := filepath.Join(dir, "unreachable.json")
	os.WriteFile(unreachable, []byte(`[{"ssh": "127.0.0.1", "ips": ["127.0.0.1"]}, {"ssh": "mlxgo-no-such-host.invalid", "ips": ["127.0.0.1"]}]`), 0o600)
	lonely := filepath.Join(dir, "lonely.json")
	os.WriteFile(lonely, []byte(fmt.Sprintf(`[["127.0.0.1:%d"],["127.0.0.1:%d"]]`, port+1, port)), 0o600)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"port in use", []string{"launch", "-n", "2", "--starting-port", strconv.Itoa(port), "--", "generate", "-p", "x"}, 1,
			fmt.Sprintf("mlxgo: error: rank 0 cannot listen on 127.0.0.1:%d", port)},
		{"bad hostfile", []string{"launch", "--hostfile", bad, "--", "generate"}, 1, `mlxgo: error: hostfile ` + bad + `: host 0 has no "ssh" name`},
		{"missing hostfile", []string{"launch", "--hostfile", filepath.Join(dir, "none.json"), "--", "generate"}, 1, "mlxgo: error: cannot read hostfile"},
		{"no command", []string{"launch", "-n", "2"}, 2, "mlxgo: error: launch: no command to launch"},
		{"unknown backend", []string{"launch", "-n", "2", "--backend", "tcp", "--", "generate"}, 1, `mlxgo: error: unknown backend "tcp"`},
		{"unreachable host", []string{"launch", "--hostfile", unreachable, "--starting-port", "0", "--", "version"}, 1,
			"mlxgo: error: rank failed: rank 1 exited with status 255; stopped the other ranks"},
		{"shard alone", []string{"generate", "--shard", "tensor", "-m", filepath.Join(oracleDir(), "models", "llama-f32"), "-p", "x"}, 1,
			"cannot join the distributed group (start the ranks with mlxgo launch): mlx: distributed_init: [distributed] Couldn't initialize any backend"},
		// rank 1's address is taken by a listener that never answers: MLX's ring
		// would wait for it forever.
		{"peer never connects", []string{"generate", "--shard", "tensor", "-m", filepath.Join(oracleDir(), "models", "llama-f32"), "-p", "x"}, 1,
			"mlxgo: error: rank 0: the other ranks did not connect within 2s (ring backend)"},
		{"shard kind", []string{"generate", "--shard", "rows", "-p", "x"}, 2, `mlxgo: error: generate: invalid value "rows" for flag -shard: want tensor, pipeline or none`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, tc.args...)
			if tc.name == "peer never connects" {
				cmd.Env = append(os.Environ(), "MLX_RANK=0", "MLX_HOSTFILE="+lonely, "MLXGO_BACKEND=ring", "MLXGO_JOIN_TIMEOUT=2s")
			}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			done := make(chan error, 1)
			cmd.Start()
			go func() { done <- cmd.Wait() }()
			var err error
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("still running after 30 s: %s", stderr.String())
			}
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
			if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", code, stderr.String(), tc.code, tc.want)
			}
		})
	}
}

// TestLaunchPipelineSameText: `mlxgo launch -n 2 -- generate --shard
// pipeline` prints the text one `mlxgo generate` prints (a pipeline splits
// no sum, so its logits are the whole model's), greedy and seeded, on the
// tiny qwen2 with a byte-level tokenizer of its 256 bytes and a prefill in
// chunks of 4 (only the caches are evaluated between chunks: each rank's
// send must ride on them).
func TestLaunchPipelineSameText(t *testing.T) {
	if _, err := installedPack(os.Getenv); err != nil {
		testenv.Missing(t, "native pack ("+err.Error()+")", "make native-install")
	}
	dir := t.TempDir()
	// GPT-2's bytes_to_unicode: the byte-level alphabet, one token a byte.
	vocab := map[string]int{}
	n := 0
	for b := range 256 {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			vocab[string(rune(b))] = b
		} else {
			vocab[string(rune(256+n))] = b
			n++
		}
	}
	tinyQwen2(t, dir, map[string]any{
		"version": "1.0", "added_tokens": []any{},
		"pre_tokenizer": map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
		"decoder":       map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
		"model":         map[string]any{"type": "BPE", "vocab": vocab, "merges": []any{}},
	})
	bin := buildBinary(t)
	gen := []string{"generate", "-m", dir, "--raw", "-p", "a prompt of some thirty bytes", "--max-tokens", "32", "--prefill-step", "4", "--threads", "1"}
	for _, sampling := range [][]string{nil, {"--temp", "0.8", "--seed", "3"}} {
		args := append(slices.Clone(gen), sampling...)
		whole, err := exec.Command(bin, args...).Output()
		if err != nil || len(whole) == 0 {
			t.Fatalf("mlxgo generate %v: %v %q", sampling, err, whole)
		}
		cmd := exec.Command(bin, append([]string{"launch", "-n", "2", "--starting-port", "0", "--"}, append(args, "--shard", "pipeline")...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		piped, err := cmd.Output()
		if err != nil {
			t.Fatalf("mlxgo launch %v: %v\n%s", sampling, err, stderr.String())
		}
		if string(piped) != string(whole) {
			t.Fatalf("%v: pipeline printed %q, one process %q", sampling, piped, whole)
		}
	}
}
