package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mlxgo/mlxgo/internal/testenv"
	"github.com/mlxgo/mlxgo/models/safetensors"
)

// tinyServed is the tiny seeded qwen2 (f32, 512 tokens, 4 query and 2 KV
// heads: it splits over 2 ranks both ways) in a directory named "tiny" with
// a tokenizer whose token i is the text "<iii>", so that served text maps
// back to token ids one to one.
func tinyServed(t *testing.T) string {
	t.Helper()
	if _, err := installedPack(os.Getenv); err != nil {
		testenv.Missing(t, "native pack ("+err.Error()+")", "make native-install")
	}
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	vocab := map[string]int{}
	for i := range 512 {
		vocab[fmt.Sprintf("<%03d>", i)] = i
	}
	tinyQwen2(t, dir, map[string]any{
		"version": "1.0", "added_tokens": []any{}, "decoder": map[string]any{"type": "Fuse"},
		"model": map[string]any{"type": "BPE", "vocab": vocab, "merges": []any{}},
	})
	return dir
}

// tinyQwen2 writes the oracle's tiny seeded qwen2 (f32) into dir with
// tokenizer as its tokenizer.json.
func tinyQwen2(t *testing.T, dir string, tokenizer map[string]any) {
	t.Helper()
	src := filepath.Join(oracleDir(), "models", "qwen2-f32")
	for _, f := range []string{"config.json", "model.safetensors"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			testenv.Missing(t, "tiny qwen2 "+src, "make oracle")
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tj, _ := json.Marshal(tokenizer)
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), tj, 0o600); err != nil {
		t.Fatal(err)
	}
}

var tinyToken = regexp.MustCompile(`<(\d{3})>`)

// tinyIDs reads the token ids back from tinyServed's text.
func tinyIDs(text string) []int32 {
	var ids []int32
	for _, m := range tinyToken.FindAllStringSubmatch(text, -1) {
		n, _ := strconv.Atoi(m[1])
		ids = append(ids, int32(n))
	}
	return ids
}

// startLaunched runs bin with args (a launch of serve ranks, or one serve)
// and returns the command and rank 0's URL once its ready line is on
// stderr; the rest of stderr goes to the returned log.
func startLaunched(t *testing.T, bin string, args ...string) (*exec.Cmd, string, *syncLog) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("cannot start %v: %v", args, err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() }) // the ranks die with the launcher
	urls := make(chan string, 1)
	log := &syncLog{}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			log.add(sc.Text() + "\n")
			if m := readyLine.FindStringSubmatch(sc.Text()); m != nil {
				urls <- m[1]
			}
		}
		close(urls)
	}()
	select {
	case u, ok := <-urls:
		if !ok {
			t.Fatalf("%v exited before it was ready:\n%s", args, log)
		}
		return cmd, u, log
	case <-time.After(3 * time.Minute):
		t.Fatalf("%v not ready after 3 minutes:\n%s", args, log)
	}
	return nil, "", nil
}

// syncLog is stderr collected by one goroutine and read by the test.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) add(s string) { l.mu.Lock(); l.b.WriteString(s); l.mu.Unlock() }
func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// complete posts a completion and returns the decoded response.
func complete(t *testing.T, url string, body map[string]any) map[string]any {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil || resp.StatusCode != 200 {
		t.Fatalf("POST %s: %d %s", url, resp.StatusCode, data)
	}
	return out
}

// oracleTokens reads a 2-rank oracle case of models/testdata/oracle/sharded.py
// (mlx.launch -n 2 of mlx-lm's sharded or pipelined model): its prompt ids
// and greedy tokens.
func oracleTokens(t *testing.T, kind, name string) (prompt, tokens []int32) {
	t.Helper()
	path := filepath.Join(oracleDir(), kind, name+".safetensors")
	f, err := safetensors.Open(path)
	if err != nil {
		testenv.Missing(t, "2-rank oracle "+path, "make oracle")
	}
	defer f.Close()
	read := func(k string) []int32 {
		ti, ok := f.Tensor(k)
		if !ok {
			t.Fatalf("%s holds no %s", path, k)
		}
		b := f.Data(ti)
		ids := make([]int32, len(b)/4)
		for i := range ids {
			ids[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
		}
		return ids
	}
	prompt, tokens = read("prompt_ids"), read("tokens")
	return prompt, tokens
}

// TestServeSharded: `mlxgo launch -n 2 -- serve --shard tensor|pipeline
// --batch 4` on the tiny qwen2 answers with mlx-lm's 2-rank greedy tokens
// and, to the official openai client's 8 concurrent requests (greedy and
// seeded, streamed and not, stop strings), what one serve process answers.
func TestServeSharded(t *testing.T) {
	dir := tinyServed(t)
	py := testenv.Python(t)
	if err := exec.Command(py, "-c", "import openai").Run(); err != nil {
		testenv.Missing(t, "the openai package in .venv", ".venv/bin/pip install openai==2.8.1")
	}
	bin := buildBinary(t)
	_, one, _ := startLaunched(t, bin, "serve", "--port", "0", "-m", dir, "--threads", "1", "--batch", "4")
	for _, tc := range []struct{ kind, oracle string }{{"tensor", "sharded"}, {"pipeline", "pipeline"}} {
		t.Run(tc.kind, func(t *testing.T) {
			_, url, log := startLaunched(t, bin, "launch", "-n", "2", "--starting-port", "0", "--",
				"serve", "--port", "0", "-m", dir, "--threads", "1", "--batch", "4", "--shard", tc.kind)
			prompt, want := oracleTokens(t, tc.oracle, "qwen2-f32")
			body := map[string]any{"prompt": prompt, "max_tokens": len(want), "temperature": 0}
			r := complete(t, url, body)
			text := r["choices"].([]any)[0].(map[string]any)["text"].(string)
			if got := tinyIDs(text); !slices.Equal(got, want) {
				t.Fatalf("2 ranks served tokens %v, mlx-lm's 2-rank model %v", got, want)
			}
			if w := complete(t, one, body)["choices"].([]any)[0].(map[string]any)["text"].(string); w != text {
				t.Fatalf("2 ranks served %q, one process %q", text, w)
			}
			par := fmt.Sprintf("%s x2 over ring", tc.kind)
			if p := r["x_mlxgo"].(map[string]any)["parallelism"]; p != par {
				t.Fatalf("x_mlxgo.parallelism %v, want %q", p, par)
			}
			cmd := exec.Command(py, filepath.Join(testenv.RepoRoot(), "server", "testdata", "openai_sharded.py"), one+"/v1", url+"/v1", par)
			cmd.Env = append(os.Environ(), "OPENAI_LOG=")
			out, err := cmd.CombinedOutput()
			t.Logf("%s", out)
			if err != nil {
				t.Fatalf("openai client checks failed: %v\n%s", err, log)
			}
		})
	}
}

// TestServeShardedRankKilled: rank 1 SIGKILLed while rank 0 streams ends
// the streamed and the plain request with an OpenAI error, and the job
// (launcher exit 1) within 10 s; SIGTERM to the launcher of a healthy job
// stops every rank, rank 0 first dismissing the others.
func TestServeShardedRankKilled(t *testing.T) {
	dir := tinyServed(t)
	bin := buildBinary(t)
	t.Run("kill", func(t *testing.T) {
		cmd, url, log := startLaunched(t, bin, "launch", "-n", "2", "--starting-port", "0", "--",
			"serve", "--port", "0", "-m", dir, "--threads", "1", "--batch", "4", "--shard", "tensor")
		type answer struct {
			body string
			err  error
		}
		post := func(stream bool, got chan<- answer, first chan<- bool) {
			b, _ := json.Marshal(map[string]any{"prompt": []int{1, 2, 3}, "max_tokens": 1900, "temperature": 0, "stream": stream})
			resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(string(b)))
			if err != nil {
				got <- answer{err: err}
				return
			}
			defer resp.Body.Close()
			rd := bufio.NewReader(resp.Body)
			if stream {
				line, _ := rd.ReadString('\n') // the first chunk: the ranks are decoding
				first <- strings.HasPrefix(line, "data: {")
				rest, _ := io.ReadAll(rd)
				got <- answer{body: line + string(rest)}
				return
			}
			data, _ := io.ReadAll(rd)
			got <- answer{body: fmt.Sprintf("%d %s", resp.StatusCode, data)}
		}
		streamed, plain, first := make(chan answer, 1), make(chan answer, 1), make(chan bool, 1)
		go post(true, streamed, first)
		select {
		case ok := <-first:
			if !ok {
				t.Fatalf("no stream chunk:\n%s", log)
			}
		case <-time.After(2 * time.Minute):
			t.Fatalf("no stream chunk after 2 minutes:\n%s", log)
		}
		go post(false, plain, nil)
		time.Sleep(300 * time.Millisecond) // the plain request joins the batch
		pid := rankPid(cmd.Process.Pid, 1)
		if pid == 0 {
			t.Fatal("cannot find rank 1's process")
		}
		start := time.Now()
		syscall.Kill(pid, syscall.SIGKILL)
		if code := waitExit(t, cmd, 10*time.Second); code != 1 {
			t.Fatalf("launcher exit status %d, want 1:\n%s", code, log)
		}
		t.Logf("launcher exited %v after the kill", time.Since(start))
		errLine := regexp.MustCompile(`"error":\{"message":"a rank of the distributed model failed: [^"]+","type":"server_error","param":null,"code":"rank_failed"\}`)
		for name, ch := range map[string]chan answer{"streamed": streamed, "plain": plain} {
			a := <-ch
			if a.err != nil || !errLine.MatchString(a.body) {
				t.Errorf("%s request got %v %q, want an OpenAI error naming the failed rank", name, a.err, tail(a.body, 400))
			}
			if name == "plain" && !strings.HasPrefix(a.body, "503 ") {
				t.Errorf("plain request got %q, want status 503", tail(a.body, 200))
			}
		}
		if !strings.Contains(log.String(), "mlxgo: error: stopped serving: a rank of the distributed model failed") ||
			!strings.HasSuffix(log.String(), "mlxgo: error: rank failed: rank 1 was killed by signal killed; stopped the other ranks\n") {
			t.Errorf("stderr does not name the failure:\n%s", log)
		}
	})
	t.Run("sigterm", func(t *testing.T) {
		cmd, url, log := startLaunched(t, bin, "launch", "-n", "2", "--starting-port", "0", "--",
			"serve", "--port", "0", "-m", dir, "--threads", "1", "--shard", "pipeline")
		complete(t, url, map[string]any{"prompt": []int{1, 2, 3}, "max_tokens": 4})
		ranks := []int{rankPid(cmd.Process.Pid, 0), rankPid(cmd.Process.Pid, 1)}
		// Idle, the follower sleeps between rank 0's idle hand-overs rather
		// than spin in a waiting collective (MLX's ring polls): a few
		// percent of a core, not most of one.
		before := cpuTicks(t, ranks[1])
		time.Sleep(5 * time.Second)
		if used := cpuTicks(t, ranks[1]) - before; used > 100 {
			t.Errorf("the idle follower used %d clock ticks of CPU in 5 s, want at most 100 (1 s)", used)
		} else {
			t.Logf("the idle follower used %d clock ticks of CPU in 5 s", used)
		}
		start := time.Now()
		cmd.Process.Signal(syscall.SIGTERM)
		code := waitExit(t, cmd, 10*time.Second)
		t.Logf("launcher exited %d %v after SIGTERM", code, time.Since(start))
		if strings.Contains(log.String(), "rank failed") || strings.Contains(log.String(), "stopped serving") {
			t.Errorf("a clean stop reported a failure:\n%s", log)
		}
		for _, p := range ranks {
			if p == 0 {
				t.Fatal("cannot find a rank's process")
			}
			if syscall.Kill(p, 0) == nil {
				if st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p)); !strings.Contains(string(st), ") Z ") {
					t.Errorf("rank process %d still runs", p)
				}
			}
		}
	})
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// TestServeShardedSmolLM2: `mlxgo launch -n 3 -- serve --shard tensor` on
// the real SmolLM2 (9 query heads: 3 ranks) answers a chat completion with
// the text mlx-lm's 3-rank sharded SmolLM2 generates (sharded.py --smollm2,
// greedy), from the same prompt ids.
func TestServeShardedSmolLM2(t *testing.T) {
	ref, model := readSmolLM2Sharded(t)
	bin := buildBinary(t)
	_, url, log := startLaunched(t, bin, "launch", "-n", strconv.Itoa(ref.Shard.Size), "--starting-port", "0", "--",
		"serve", "--port", "0", "-m", model, "--threads", "1", "--batch", "4", "--shard", "tensor")
	b, _ := json.Marshal(map[string]any{"messages": []map[string]string{{"role": "user", "content": ref.Prompt}},
		"max_tokens": ref.MaxTokens, "temperature": 0})
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
		X struct {
			Parallelism string `json:"parallelism"`
		} `json:"x_mlxgo"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || len(r.Choices) != 1 {
		t.Fatalf("chat completion: %v %+v\n%s", err, r, log)
	}
	if got := r.Choices[0].Message.Content; got != ref.Text {
		t.Fatalf("3 ranks served %q, mlx-lm's 3-rank SmolLM2 %q", got, ref.Text)
	}
	if want := fmt.Sprintf("tensor x%d over ring", ref.Shard.Size); r.X.Parallelism != want {
		t.Fatalf("x_mlxgo.parallelism %q, want %q", r.X.Parallelism, want)
	}
	t.Logf("%d prompt tokens, %q", r.Usage.PromptTokens, ref.Text)

	// Structured output: every rank compiles the grammar rank 0 hands over
	// and masks the same logits; the answer is the schema's JSON.
	b, _ = json.Marshal(map[string]any{
		"messages": []map[string]string{{"role": "user", "content": "Name a colour."}}, "max_tokens": 24, "temperature": 0,
		"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "colour", "schema": map[string]any{
			"type": "object", "properties": map[string]any{"colour": map[string]any{"type": "string", "maxLength": 6}},
			"required": []string{"colour"}, "additionalProperties": false}}},
	})
	resp2, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp2.Body.Close()
	var s struct {
		Choices []struct {
			FinishReason string                   `json:"finish_reason"`
			Message      struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if err := json.NewDecoder(resp2.Body).Decode(&s); err != nil || len(s.Choices) != 1 {
		t.Fatalf("structured chat completion: %v %+v\n%s", err, s, log)
	}
	var colour struct{ Colour *string }
	c := s.Choices[0]
	if err := json.Unmarshal([]byte(c.Message.Content), &colour); err != nil || colour.Colour == nil || c.FinishReason != "stop" {
		t.Fatalf("structured output on 3 ranks: %q (finish %s), want the schema's JSON: %v", c.Message.Content, c.FinishReason, err)
	}
	t.Logf("structured output on 3 ranks: %s", c.Message.Content)
}

// cpuTicks is a process's user + system CPU time in clock ticks.
func cpuTicks(t *testing.T, pid int) int {
	t.Helper()
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+2:]))
	u, _ := strconv.Atoi(f[11])
	k, _ := strconv.Atoi(f[12])
	return u + k
}
