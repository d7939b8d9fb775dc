package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mlxgo/mlxgo/hub"
	"github.com/mlxgo/mlxgo/hub/hubtest"
	"github.com/mlxgo/mlxgo/internal/testenv"
)

// These tests run the mlxgo binary (testscript's copy on $PATH, see
// TestMain) against a local hub (hub/hubtest), as a user runs it.

type cli struct {
	t   *testing.T
	srv *hubtest.Server
	env map[string]string
	hub string // the hub cache
	bin string // the mlxgo to run
}

func newCLI(t *testing.T, srv *hubtest.Server) *cli {
	home := t.TempDir()
	c := &cli{t: t, srv: srv, bin: "mlxgo", hub: filepath.Join(home, "hub"), env: map[string]string{
		"HF_ENDPOINT": srv.URL(), "HF_HOME": home, "HF_HUB_CACHE": filepath.Join(home, "hub"),
		"HF_TOKEN": "", "HF_HUB_OFFLINE": "", "HF_HUB_ETAG_TIMEOUT": "2", "HF_HUB_DOWNLOAD_TIMEOUT": "1",
		"HF_HUB_DISABLE_PROGRESS_BARS": "1", "HF_HUB_DISABLE_TELEMETRY": "1",
	}}
	return c
}

func (c *cli) cmd(stdin string, args ...string) *exec.Cmd {
	cmd := exec.Command(c.bin, args...)
	cmd.Env = os.Environ()
	for k, v := range c.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdin = strings.NewReader(stdin)
	return cmd
}

// run runs mlxgo to the end: stdout, stderr, exit status.
func (c *cli) run(stdin string, args ...string) (string, string, int) {
	c.t.Helper()
	cmd := c.cmd(stdin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		c.t.Fatalf("mlxgo %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// ok runs mlxgo and requires success.
func (c *cli) ok(stdin string, args ...string) string {
	c.t.Helper()
	out, errs, code := c.run(stdin, args...)
	if code != 0 {
		c.t.Fatalf("mlxgo %s: exit %d\n%s", strings.Join(args, " "), code, errs)
	}
	return out
}

// python runs a script in the oracle venv with the same hub settings.
func (c *cli) python(script string) string {
	c.t.Helper()
	cmd := exec.Command(testenv.Python(c.t), "-c", script)
	cmd.Env = os.Environ()
	for k, v := range c.env {
		if v != "" {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	cmd.Env = append(cmd.Env, "HF_TOKEN=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		c.t.Fatalf("python: %v\n%s", err, out)
	}
	return string(out)
}

// synthRepo: a sharded safetensors model that needs no model data.
func synthRepo(srv *hubtest.Server) map[string][]byte {
	big := make([]byte, 6<<20)
	for i := range big {
		big[i] = byte(i * 31 >> 3)
	}
	files := map[string][]byte{
		"config.json":                      []byte(`{"model_type":"llama","quantization":{"bits":4,"group_size":64}}`),
		"tokenizer.json":                   []byte(`{"model":{}}`),
		"tokenizer_config.json":            []byte(`{}`),
		"model.safetensors.index.json":     []byte(`{"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}}`),
		"model-00001-of-00002.safetensors": big,
		"model-00002-of-00002.safetensors": big[:1<<20],
		"README.md":                        []byte("hi\n"),
	}
	srv.AddFiles("org/model", files)
	return files
}

const bigShard = "model-00001-of-00002.safetensors"

func blobOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestPullCLIKilledAndResumed(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			srv := hubtest.New()
			defer srv.Close()
			files := synthRepo(srv)
			c := newCLI(t, srv)
			if sig == syscall.SIGINT {
				// Ctrl-C handling is main's: run the binary a user gets.
				c.bin = buildBinary(t)
			}
			const cut = 2<<20 + 4321
			srv.SetFault(bigShard, hubtest.Fault{CorruptAt: -1, StallAfter: cut})
			cmd := c.cmd("", "pull", "org/model")
			var errb bytes.Buffer
			cmd.Stderr = &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			partial := filepath.Join(c.hub, "models--org--model", "blobs", blobOf(files[bigShard])+".incomplete")
			for end := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				if st, err := os.Stat(partial); err == nil && st.Size() == cut {
					break
				}
				if time.Now().After(end) {
					cmd.Process.Kill()
					t.Fatalf("%s never reached %d bytes; stderr: %s", partial, cut, errb.String())
				}
			}
			cmd.Process.Signal(sig)
			err := cmd.Wait()
			ee, _ := err.(*exec.ExitError)
			if sig == syscall.SIGINT {
				if ee == nil || ee.ExitCode() != 130 || !strings.Contains(errb.String(), "run it again to resume") {
					t.Fatalf("after Ctrl-C: %v, stderr %q; want exit 130 and a resume hint", err, errb.String())
				}
			} else if ee == nil {
				t.Fatalf("killed pull: %v", err)
			}
			if _, err := os.Stat(filepath.Join(c.hub, "models--org--model", "snapshots")); !os.IsNotExist(err) {
				t.Fatalf("an interrupted pull made a snapshot (%v)", err)
			}
			if !srv.WaitIdle(10 * time.Second) {
				t.Fatal("the server still sends the interrupted transfer")
			}
			srv.Release()
			srv.ResetCounters()
			path := strings.TrimSpace(c.ok("", "pull", "org/model"))
			if got, want := srv.Served(bigShard), int64(len(files[bigShard])-cut); got != want {
				t.Errorf("the resumed pull fetched %d bytes of %s, want %d (the rest)", got, bigShard, want)
			}
			if r := srv.Ranges(bigShard); len(r) != 1 || r[0] != fmt.Sprintf("bytes=%d-", cut) {
				t.Errorf("resumed with ranges %q", r)
			}
			b, err := os.ReadFile(filepath.Join(path, bigShard))
			if err != nil || !bytes.Equal(b, files[bigShard]) {
				t.Errorf("the resumed file differs (%v)", err)
			}
		})
	}
}

func TestPullCLICorrupt(t *testing.T) {
	srv := hubtest.New()
	defer srv.Close()
	synthRepo(srv)
	c := newCLI(t, srv)
	srv.SetFault(bigShard, hubtest.Fault{CorruptAt: 3 << 20, StallAfter: -1})
	_, errs, code := c.run("", "pull", "org/model")
	if code != 1 || strings.Count(errs, "mlxgo: error:") != 1 || !strings.Contains(errs, "mlxgo: error: cannot pull org/model@main: "+bigShard+": hash mismatch: sha256 ") {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	if _, err := os.Stat(filepath.Join(c.hub, "models--org--model", "snapshots")); !os.IsNotExist(err) {
		t.Fatalf("a corrupted pull linked files (%v)", err)
	}
	// generate -m finds nothing to run.
	if _, errs, code := c.run("", "generate", "-m", "org/model", "-p", "hi"); code != 1 || !strings.Contains(errs, "not in the Hugging Face cache") {
		t.Fatalf("generate after a refused pull: exit %d, %q", code, errs)
	}
}

func TestPullCLIErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		code  int
		want  string
		setup func(*hubtest.Server, *cli)
	}{
		{"401", []string{"pull", "org/model"}, 1, "mlxgo: error: cannot pull org/model@main: the hub answered 401 Unauthorized for org/model@main: the repository does not exist, or it is private or gated and needs a token (set HF_TOKEN",
			func(s *hubtest.Server, c *cli) { s.Token = "hf_x" }},
		{"token file", []string{"pull", "org/model"}, 0, "", func(s *hubtest.Server, c *cli) {
			s.Token = "hf_x"
			os.WriteFile(filepath.Join(c.env["HF_HOME"], "token"), []byte("hf_x\n"), 0o600)
		}},
		{"404 repo", []string{"pull", "org/absent"}, 1, "mlxgo: error: cannot pull org/absent@main: repository org/absent not found on http://127.0.0.1:", nil},
		{"404 revision", []string{"pull", "org/model@v2"}, 1, `mlxgo: error: cannot pull org/model@v2: revision "v2" not found in org/model (404)`, nil},
		{"500", []string{"pull", "org/model"}, 1, "mlxgo: error: cannot pull org/model@main: the hub answered 500 Internal Server Error for org/model@main", func(s *hubtest.Server, c *cli) { s.APIStatus = 500 }},
		{"file 500", []string{"pull", "org/model"}, 1, "mlxgo: error: cannot pull org/model@main: the hub answered 500 Internal Server Error for config.json of org/model@",
			func(s *hubtest.Server, c *cli) {
				s.SetFault("config.json", hubtest.Fault{Status: 500, CorruptAt: -1, StallAfter: -1})
			}},
		{"timeout", []string{"pull", "org/model"}, 1, "mlxgo: error: cannot pull org/model@main: no answer from 127.0.0.1:", func(s *hubtest.Server, c *cli) { s.APIStall = true }},
		{"stall", []string{"pull", "org/model"}, 1, "no data from 127.0.0.1:",
			func(s *hubtest.Server, c *cli) { s.SetFault(bigShard, hubtest.Fault{CorruptAt: -1, StallAfter: 1000}) }},
		{"unreachable", []string{"pull", "org/model"}, 1, "mlxgo: error: cannot pull org/model@main: cannot reach 127.0.0.1:1: connect: connection refused",
			func(s *hubtest.Server, c *cli) { c.env["HF_ENDPOINT"] = "http://127.0.0.1:1" }},
		{"offline", []string{"pull", "org/model"}, 1, "mlxgo: error: cannot pull org/model: HF_HUB_OFFLINE=1 forbids network access", func(s *hubtest.Server, c *cli) { c.env["HF_HUB_OFFLINE"] = "1" }},
		{"bad ref", []string{"pull", "org/a--b"}, 2, `mlxgo: error: pull: repo id "org/a--b" must not contain`, nil},
		{"no ref", []string{"pull"}, 2, "mlxgo: error: pull: want ORG/NAME[@REVISION]", nil},
		{"two files", []string{"pull", "org/model", "--file", "x.gguf"}, 1, `mlxgo: error: org/model has no GGUF file "x.gguf" (it has no .gguf file)`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := hubtest.New()
			defer srv.Close()
			synthRepo(srv)
			c := newCLI(t, srv)
			if tc.setup != nil {
				tc.setup(srv, c)
			}
			_, errs, code := c.run("", tc.args...)
			if code != tc.code || !strings.Contains(errs, tc.want) {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", code, errs, tc.code, tc.want)
			}
			// One error line, the last (progress lines come before it).
			lines := strings.Split(strings.TrimSpace(errs), "\n")
			if n := strings.Count(errs, "mlxgo: error:"); code != 0 && (n != 1 || !strings.HasPrefix(lines[len(lines)-1], "mlxgo: error:") && !strings.HasPrefix(lines[len(lines)-1], "mlxgo: hint:")) {
				t.Fatalf("want one error line, at the end: %q", errs)
			}
		})
	}
}

func TestPullCLIConcurrent(t *testing.T) {
	srv := hubtest.New()
	defer srv.Close()
	files := synthRepo(srv)
	c := newCLI(t, srv)
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for range 2 {
		cmd := c.cmd("", "pull", "--json", "org/model")
		out, errb := &bytes.Buffer{}, &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = out, errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, out)
	}
	var paths []string
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("pull %d: %v", i, err)
		}
		var res hub.Result
		if err := json.Unmarshal(outs[i].Bytes(), &res); err != nil {
			t.Fatalf("pull %d printed %q: %v", i, outs[i], err)
		}
		paths = append(paths, res.Path)
	}
	if paths[0] != paths[1] {
		t.Fatalf("two snapshots: %v", paths)
	}
	snaps, _ := os.ReadDir(filepath.Join(c.hub, "models--org--model", "snapshots"))
	if len(snaps) != 1 {
		t.Fatalf("%d snapshots", len(snaps))
	}
	for name, b := range files {
		got, err := os.ReadFile(filepath.Join(paths[0], name))
		if name == "README.md" {
			if err == nil {
				t.Errorf("README.md was pulled")
			}
			continue
		}
		if err != nil || !bytes.Equal(got, b) {
			t.Errorf("%s differs (%v)", name, err)
		}
		if n := srv.Served(name); n != int64(len(b)) {
			t.Errorf("%s: %d bytes served for two pulls, want %d (once)", name, n, len(b))
		}
	}
	left, _ := filepath.Glob(filepath.Join(c.hub, "models--org--model", "blobs", "*.incomplete"))
	if len(left) != 0 {
		t.Errorf("partial files left: %v", left)
	}
	out := c.ok("", "ls")
	if !strings.Contains(out, "org/model") || !strings.Contains(out, "main (") || !strings.Contains(out, "4-bit g64") {
		t.Errorf("ls:\n%s", out)
	}
}
