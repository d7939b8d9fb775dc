package models_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models"
)

// loadL1 is how runCase loads a model: whole, or (in a rank of
// TestL1Sharded) this rank's tensor-parallel shard or pipeline stage.
var loadL1 = func(path string, opts models.LoadOptions) (models.Model, error) { return models.Load(path, opts) }

// shardedCases is a sharded oracle's index (sharded.py, run by mlx.launch
// with 2 ranks over the ring backend): kind "tensor" in sharded/, "pipeline"
// in pipeline/; each case's file is made relative to the cases directory
// runCase reads from.
func shardedCases(t *testing.T, kind string) map[string]oracleCase {
	t.Helper()
	dir, flag := "sharded", ""
	if kind == "pipeline" {
		dir, flag = "pipeline", " --pipeline"
	}
	index := filepath.Join(oracleDir(), dir, "index.json")
	cases := readCases[oracleCase](t, index, kind+"-parallel oracle fixtures", "make oracle (mlx.launch -n 2 --backend ring ... models/testdata/oracle/sharded.py"+flag+")")
	for n, c := range cases {
		c.File = filepath.Join("..", dir, c.File)
		cases[n] = c
	}
	return cases
}

// TestL1Sharded runs two ranks of this test binary over MLX's ring backend
// on loopback, each loading its tensor-parallel shard (models.LoadSharded)
// or its pipeline stage (models.LoadPipelined) of every sharded oracle
// case's model, and requires logits bit-identical to mlx-lm's
// model.shard(group) / model.model.pipeline(group) run by mlx.launch -n 2,
// at prefill and each of 32 decode steps (greedy and seeded-sampling
// tokens).
func TestL1Sharded(t *testing.T) {
	if k := os.Getenv("MLXGO_L1_RANK"); k != "" {
		l1Rank(t, k)
		return
	}
	mlxtest.Need(t)
	for _, kind := range []string{"tensor", "pipeline"} {
		t.Run(kind, func(t *testing.T) { l1Ranks(t, kind) })
	}
}

// l1Ranks starts the two ranks of one kind and checks every case passed on
// both.
func l1Ranks(t *testing.T, kind string) {
	cases := shardedCases(t, kind)
	var ports []string
	for range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, fmt.Sprintf("%q", l.Addr().String()))
		l.Close() // MLX's ring binds it
	}
	hf := filepath.Join(t.TempDir(), "hosts.json")
	if err := os.WriteFile(hf, []byte("[["+ports[0]+"],["+ports[1]+"]]"), 0o600); err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	outs := make([][]byte, 2)
	errs := make(chan error, 2)
	var cmds []*exec.Cmd
	for r := range 2 {
		c := exec.Command(exe, "-test.run=^TestL1Sharded$", "-test.v", "-test.count=1")
		c.Env = append(os.Environ(), "MLXGO_L1_RANK="+kind, fmt.Sprintf("MLX_RANK=%d", r), "MLX_HOSTFILE="+hf)
		cmds = append(cmds, c)
	}
	for i, c := range cmds {
		go func() {
			var err error
			outs[i], err = c.CombinedOutput()
			errs <- err
		}()
	}
	// A rank that is wedged is a failure with its output, not a hang.
	timeout := time.After(10 * time.Minute)
	for range 2 {
		select {
		case err := <-errs:
			if err != nil {
				t.Errorf("a rank failed: %v", err)
			}
		case <-timeout:
			for _, c := range cmds {
				c.Process.Kill()
			}
			t.Fatal("the ranks did not finish in 10 minutes")
		}
	}
	names := make([]string, 0, len(cases))
	for n := range cases {
		names = append(names, n)
	}
	sort.Strings(names)
	if kind == "pipeline" {
		names = append(names, "states-prefill", "states-prefill-qwen3_5-f32", "states-prefill-qwen3_next-f32",
			"refused", "qwen2-f32-gguf", "qwen3_moe-f32-gguf")
	}
	for r, out := range outs {
		for _, n := range names {
			if !strings.Contains(string(out), "--- PASS: TestL1Sharded/"+n+" ") {
				t.Errorf("rank %d: %s case %s did not pass", r, kind, n)
			}
		}
		if t.Failed() {
			t.Logf("rank %d output:\n%s", r, out)
		}
	}
}

// l1Rank is one rank of TestL1Sharded: every case of kind, in order,
// sharded over the group the environment describes.
func l1Rank(t *testing.T, kind string) {
	mlxtest.Need(t)
	cases := shardedCases(t, kind)
	var g *mlx.Group
	mlxtest.Do(t, func() (err error) {
		g, err = mlx.InitDistributed(true, "ring")
		return err
	})
	if g.Size() != 2 {
		t.Fatalf("group of %d ranks, want 2", g.Size())
	}
	loadL1 = func(path string, opts models.LoadOptions) (models.Model, error) {
		if kind == "pipeline" {
			return models.LoadPipelined(path, opts, g)
		}
		return models.LoadSharded(path, opts, g)
	}
	names := make([]string, 0, len(cases))
	for n := range cases {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		c := cases[name]
		t.Run(name, func(t *testing.T) {
			if kind == "pipeline" {
				// This stage's own calls: its caches are its layers'.
				if len(c.RankCalls) != g.Size() {
					t.Fatalf("the oracle has %d ranks' calls, want %d (make oracle)", len(c.RankCalls), g.Size())
				}
				c.Calls = nil
				if err := json.Unmarshal(c.RankCalls[g.Rank()], &c.Calls); err != nil {
					t.Fatal(err)
				}
			}
			runCase(t, c, filepath.Join(oracleDir(), c.Model), true)
		})
	}
	if c, ok := cases["qwen2-f32"]; ok && kind == "pipeline" {
		t.Run("states-prefill", func(t *testing.T) { statesPrefill(t, c) })
		// qwen3_5's rank 1 holds linear layers only: its send is tied to
		// an ArraysCache's conv state; qwen3_next's rank 1 ends on a KVCache.
		for _, n := range []string{"qwen3_5-f32", "qwen3_next-f32"} {
			t.Run("states-prefill-"+n, func(t *testing.T) { statesPrefill(t, cases[n]) })
		}
		// The GGUF forms of the float32 models (bit-identical to their
		// safetensors, TestGGUFArchitecturesEqualSafetensors) split the same.
		for _, n := range []string{"qwen2-f32", "qwen3_moe-f32"} {
			t.Run(n+"-gguf", func(t *testing.T) {
				_, file := tinyGGUF(t, n)
				runCase(t, cases[n], file, false)
			})
		}
		// An architecture without mlx-lm's PipelineMixin is refused by name.
		t.Run("refused", func(t *testing.T) {
			var err error
			mlxtest.Do(t, func() error {
				_, err = loadL1(filepath.Join(oracleDir(), "models", "llama-f32"), models.LoadOptions{})
				return nil
			})
			if err == nil || !strings.Contains(err.Error(), "cannot pipeline a llama model") {
				t.Fatalf("pipelined llama: %v, want cannot pipeline a llama model", err)
			}
		})
	}
}

// statesPrefill is generate's prefill on a pipeline stage: the prompt but
// its last token in one call of which only the caches are evaluated
// (kv.States, as gen's prefill and mlx-lm's generate_step do), then the
// last token, whose logits must be the oracle's prefill row. A rank's send
// is tied to its last cache (kv.DependOn): without it rank 0 would wait for
// a hidden state rank 1 never sent.
func statesPrefill(t *testing.T, c oracleCase) {
	fx := readFixture(t, filepath.Join(oracleDir(), "cases", c.File))
	mlxtest.Do(t, func() error {
		m, err := loadL1(filepath.Join(oracleDir(), c.Model), models.LoadOptions{Dtype: c.Dtype})
		if err != nil {
			return err
		}
		defer m.Close()
		caches := m.NewCaches(kv.Options{})
		defer kv.FreeAll(caches)
		s := mlx.NewScope()
		defer s.Close()
		n := len(fx.prompt)
		m.Forward(mlx.FromSlice(fx.prompt[:n-1], 1, n-1), caches)
		if err := mlx.Eval(kv.States(caches)...); err != nil {
			return err
		}
		logits := m.Forward(mlx.FromSlice(fx.prompt[n-1:], 1, 1), caches)
		row, err := mlx.AsType(mlx.Reshape(logits, -1), mlx.Float32).Float32s()
		if err != nil {
			return err
		}
		if i, d := compareRow(row, fx.logits[:fx.vocab]); i >= 0 {
			return fmt.Errorf("prefill row: first difference at vocab index %d: got %v, want %v; max abs diff %g", i, row[i], fx.logits[i], d)
		}
		return nil
	})
}
