package mlx_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/native"
)

// With MLXGO_TEST_RANK_ROLE set the test binary is one rank of a ring group
// (TestRingCollectives starts two), prints what it computed and exits.
func TestMain(m *testing.M) {
	if role := os.Getenv("MLXGO_TEST_RANK_ROLE"); role != "" {
		os.Exit(rankRole(role))
	}
	os.Exit(m.Run())
}

// loadForRole loads the pack as mlxtest does, without a testing.T.
func loadForRole() error {
	p, err := native.Resolve(context.Background(), native.Options{NoDownload: true})
	if err != nil {
		return err
	}
	_, err = mlx.LoadPack(p)
	return err
}

func rankRole(role string) int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "rank:", err); return 1 }
	if err := loadForRole(); err != nil {
		return fail(err)
	}
	err := mlx.Do(func() error {
		g, err := mlx.InitDistributed(true, "ring")
		if err != nil {
			return err
		}
		defer g.Free()
		s := mlx.NewScope()
		defer s.Close()
		r := float32(g.Rank())
		x := mlx.FromSlice([]float32{r + 1, 10 * (r + 1)}, 2)
		sum, err := mlx.AllSum(x, g).Float32s()
		if err != nil {
			return err
		}
		gath, err := mlx.AllGather(x, g).Float32s()
		if err != nil {
			return err
		}
		mx, err := mlx.AllMax(x, g).Float32s()
		if err != nil {
			return err
		}
		// rank 0 sends, rank 1 receives.
		var got []float32
		if g.Rank() == 0 {
			err = mlx.Eval(mlx.Send(mlx.FromSlice([]float32{7, 8, 9}, 3), 1, g))
		} else {
			got, err = mlx.Recv([]int{3}, mlx.Float32, 0, g).Float32s()
		}
		if err != nil {
			return err
		}
		fmt.Printf("rank %d/%d sum=%v gather=%v max=%v recv=%v\n", g.Rank(), g.Size(), sum, gath, mx, got)
		if role == "die" && g.Rank() == 1 {
			os.Exit(9)
		}
		// Keep exchanging: with role "die" rank 1 is gone and rank 0's next
		// collective must fail, not hang.
		for range 20 {
			if _, err := mlx.AllSum(x, g).Float32s(); err != nil {
				return err
			}
			time.Sleep(50 * time.Millisecond)
		}
		return nil
	})
	if err != nil {
		return fail(err)
	}
	return 0
}

func ringRanks(t *testing.T, role string) []*exec.Cmd {
	t.Helper()
	var ports []int
	for range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
		defer l.Close()
	}
	hf := filepath.Join(t.TempDir(), "hosts.json")
	os.WriteFile(hf, []byte(fmt.Sprintf(`[["127.0.0.1:%d"],["127.0.0.1:%d"]]`, ports[0], ports[1])), 0o600)
	exe, _ := os.Executable()
	var cmds []*exec.Cmd
	for r := range 2 {
		c := exec.Command(exe)
		c.Env = append(os.Environ(), "MLXGO_TEST_RANK_ROLE="+role, fmt.Sprintf("MLX_RANK=%d", r), "MLX_HOSTFILE="+hf)
		cmds = append(cmds, c)
	}
	return cmds
}

// Two ranks over MLX's ring backend on loopback: every collective the shim
// binds gives what MLX defines.
func TestRingCollectives(t *testing.T) {
	mlxtest.Need(t)
	cmds := ringRanks(t, "ok")
	outs := make([][]byte, 2)
	errs := make(chan error, 2)
	for i, c := range cmds {
		go func() {
			var err error
			outs[i], err = c.CombinedOutput()
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("a rank failed: %v\n%s\n%s", err, outs[0], outs[1])
		}
	}
	want := []string{
		"rank 0/2 sum=[3 30] gather=[1 10 2 20] max=[2 20] recv=[]",
		"rank 1/2 sum=[3 30] gather=[1 10 2 20] max=[2 20] recv=[7 8 9]",
	}
	for i := range 2 {
		if !strings.Contains(string(outs[i]), want[i]) {
			t.Errorf("rank %d printed %q, want %q", i, outs[i], want[i])
		}
	}
}

// A peer that dies is an error at rank 0's next collective within seconds
// ("[ring] connection to a peer was lost"), never a hang.
func TestRingPeerLost(t *testing.T) {
	mlxtest.Need(t)
	cmds := ringRanks(t, "die")
	if err := cmds[1].Start(); err != nil {
		t.Fatal(err)
	}
	defer cmds[1].Wait()
	start := time.Now()
	out, err := cmds[0].CombinedOutput()
	if err == nil || !strings.Contains(string(out), "connection to a peer was lost") {
		t.Fatalf("rank 0: %v\n%s\nwant a lost-peer error", err, out)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("rank 0 took %v to fail, want < 10 s", d)
	}
}

func TestDistributedSingleton(t *testing.T) {
	mlxtest.Need(t)
	// A lone process: no launcher's environment.
	for _, k := range []string{"MLX_RANK", "MLX_HOSTFILE"} {
		if v, ok := os.LookupEnv(k); ok {
			os.Unsetenv(k)
			defer os.Setenv(k, v)
		}
	}
	err := mlx.Do(func() error {
		for _, tc := range []struct {
			backend string
			want    bool
		}{{"ring", true}, {"any", true}, {"nccl", false}, {"jaccl", false}} {
			got, err := mlx.DistributedAvailable(tc.backend)
			if err != nil || got != tc.want {
				return fmt.Errorf("DistributedAvailable(%q) = %v, %v; want %v (the CPU wheel's libmlx)", tc.backend, got, err, tc.want)
			}
		}
		if _, err := mlx.InitDistributed(true, "nccl"); err == nil {
			return fmt.Errorf("strict nccl init succeeded on a CPU build")
		}
		g, err := mlx.InitDistributed(false, "ring")
		if err != nil {
			return err
		}
		defer g.Free()
		if g.Rank() != 0 || g.Size() != 1 {
			return fmt.Errorf("a lone process is rank %d of %d, want 0 of 1", g.Rank(), g.Size())
		}
		s := mlx.NewScope()
		defer s.Close()
		v, err := mlx.AllSum(mlx.FromSlice([]float32{1.5, -2}, 2), g).Float32s()
		if err != nil || v[0] != 1.5 || v[1] != -2 {
			return fmt.Errorf("all_sum over one rank = %v, %v; want [1.5 -2]", v, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
