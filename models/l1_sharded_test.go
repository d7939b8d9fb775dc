package models_test

import (
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
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models"
)

// loadL1 is how runCase loads a model: whole, or (in a rank of
// TestL1Sharded) this rank's tensor-parallel shard.
var loadL1 = func(path string, opts models.LoadOptions) (models.Model, error) { return models.Load(path, opts) }

// shardedCases is the sharded oracle's index (sharded.py, run by mlx.launch
// with 2 ranks over the ring backend); each case's file is made relative to
// the cases directory runCase reads from.
func shardedCases(t *testing.T) map[string]oracleCase {
	t.Helper()
	index := filepath.Join(oracleDir(), "sharded", "index.json")
	cases := readCases[oracleCase](t, index, "sharded oracle fixtures", "make oracle (mlx.launch -n 2 --backend ring ... models/testdata/oracle/sharded.py)")
	for n, c := range cases {
		c.File = filepath.Join("..", "sharded", c.File)
		cases[n] = c
	}
	return cases
}

// TestL1Sharded runs two ranks of this test binary over MLX's ring backend
// on loopback, each loading its tensor-parallel shard of every sharded
// oracle case's model (models.LoadSharded), and requires logits
// bit-identical to mlx-lm's model.shard(group) run by mlx.launch -n 2, at
// prefill and each of 32 decode steps (greedy and seeded-sampling tokens).
func TestL1Sharded(t *testing.T) {
	if os.Getenv("MLXGO_L1_RANK") != "" {
		l1Rank(t)
		return
	}
	mlxtest.Need(t)
	cases := shardedCases(t)
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
		c.Env = append(os.Environ(), "MLXGO_L1_RANK=1", fmt.Sprintf("MLX_RANK=%d", r), "MLX_HOSTFILE="+hf)
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
	for r, out := range outs {
		for _, n := range names {
			if !strings.Contains(string(out), "--- PASS: TestL1Sharded/"+n+" ") {
				t.Errorf("rank %d: case %s did not pass", r, n)
			}
		}
		if t.Failed() {
			t.Logf("rank %d output:\n%s", r, out)
		}
	}
}

// l1Rank is one rank of TestL1Sharded: every case, in order, sharded over
// the group the environment describes.
func l1Rank(t *testing.T) {
	mlxtest.Need(t)
	cases := shardedCases(t)
	var g *mlx.Group
	mlxtest.Do(t, func() (err error) {
		g, err = mlx.InitDistributed(true, "ring")
		return err
	})
	if g.Size() != 2 {
		t.Fatalf("group of %d ranks, want 2", g.Size())
	}
	loadL1 = func(path string, opts models.LoadOptions) (models.Model, error) {
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
			runCase(t, c, filepath.Join(oracleDir(), c.Model), true)
		})
	}
}
