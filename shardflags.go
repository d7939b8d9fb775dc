package main

import (
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"time"

	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models"
)

// shardFlags is generate's --shard: one rank of a distributed run, started
// by `mlxgo launch` or mlx.launch (whose environment names the rank and
// its peers). Rank 0 reads the prompt, encodes it and hands the ids to the
// others; every rank then runs the same steps on identical logits (all_sum
// leaves them equal on every rank) with the same sampling keys, and only
// rank 0 prints.
type shardFlags struct {
	kind string // "" (whole), "tensor", "pipeline"
	g    *mlx.Group
}

func (s *shardFlags) register(fs *flag.FlagSet) { fs.Var(s, "shard", "") }

// Set checks the kind as the flag is parsed, so a wrong one is a usage error.
func (s *shardFlags) Set(v string) error {
	switch v {
	case "", "none":
		s.kind = ""
	case "tensor", "pipeline":
		s.kind = v
	default:
		return fmt.Errorf("want tensor, pipeline or none")
	}
	return nil
}

func (s *shardFlags) String() string { return s.kind }

func (s *shardFlags) on() bool { return s.kind != "" }

// follower is a rank other than 0, known from the launcher's environment
// before MLX starts (MLX_RANK, the contract of every backend mlx.launch starts).
func (s *shardFlags) follower() bool {
	r := os.Getenv("MLX_RANK")
	return s.on() && r != "" && r != "0"
}

// prompt is the prompt text on rank 0 (and without --shard), "" on the
// other ranks, whose output is muted.
func (s *shardFlags) prompt(c *generateCommand, f *generateFlags) (string, error) {
	if !s.follower() {
		return c.readPrompt(f)
	}
	c.m.Stdout = io.Discard
	f.verbose, f.jsonStats = false, false
	return "", nil
}

// backend is the one `mlxgo launch` names (MLXGO_BACKEND), else MLX's first
// available ("any": an mlxgo started by mlx.launch).
func distributedBackend() string {
	if b := os.Getenv("MLXGO_BACKEND"); b != "" {
		return b
	}
	return "any"
}

// joinTimeout bounds the wait for the group to form: $MLXGO_JOIN_TIMEOUT
// (a Go duration), 60 s by default.
func joinTimeout() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("MLXGO_JOIN_TIMEOUT")); err == nil && d > 0 {
		return d
	}
	return 60 * time.Second
}

// load is models.Load, or with --shard this rank's shard of the model (on
// the executor).
func (s *shardFlags) load(path string, opts models.LoadOptions) (models.Model, error) {
	if !s.on() {
		return models.Load(path, opts)
	}
	// MLX's ring waits for its peers without a deadline, and a native call
	// cannot be interrupted: a peer that never connects ends the process.
	watchdog := time.AfterFunc(joinTimeout(), func() {
		fmt.Fprintf(os.Stderr, "mlxgo: error: rank %s: the other ranks did not connect within %v (%s backend); check the hostfile's addresses and ports\n",
			os.Getenv("MLX_RANK"), joinTimeout(), distributedBackend())
		os.Exit(1)
	})
	g, err := mlx.InitDistributed(true, distributedBackend())
	watchdog.Stop()
	if err != nil {
		return nil, fmt.Errorf("cannot join the distributed group (start the ranks with mlxgo launch): %w", err)
	}
	if g.Size() < 2 {
		return nil, fmt.Errorf("--shard %s needs 2 ranks or more, and this process is alone (start it with mlxgo launch -n 2)", s.kind)
	}
	s.g = g
	if s.kind == "pipeline" {
		return models.LoadPipelined(path, opts, g)
	}
	return models.LoadSharded(path, opts, g)
}

// parallelism is what the composition records.
func (s *shardFlags) parallelism() models.Parallelism {
	if s.g == nil {
		return models.Parallelism{}
	}
	return models.Parallelism{Kind: s.kind, Size: s.g.Size(), Rank: s.g.Rank(), Backend: s.g.Backend()}
}

// share runs encode on rank 0 and gives its ids to every rank (an all_sum
// to which the others add zeros), with the seed when sampling is unseeded
// (MLX's default keys need not agree across processes).
func (s *shardFlags) share(f *generateFlags, stderr io.Writer, encode func() ([]int32, error)) ([]int32, error) {
	if s.g == nil {
		return encode()
	}
	var ids []int32
	seed := int32(-1)
	if s.g.Rank() == 0 {
		var err error
		if ids, err = encode(); err != nil {
			return nil, err
		}
		if f.seed.set {
			seed = -1
		} else if f.sampler.Temp > 0 {
			seed = int32(rand.Uint32() >> 1)
		}
		if f.verbose {
			fmt.Fprintf(stderr, "parallel:    %s (rank 0 prints)\n", s.parallelism())
		}
	}
	// The message is the seed (+1; 0: none) and then the ids.
	got, err := mlx.Share(append([]int32{seed + 1}, ids...), s.g)
	if err != nil {
		return nil, fmt.Errorf("cannot share the prompt with the other ranks: %w", err)
	}
	if len(got) == 0 {
		return nil, fmt.Errorf("cannot share the prompt with the other ranks: an empty message")
	}
	if got[0] > 0 {
		f.seed.v, f.seed.set = uint64(got[0]-1), true
	}
	return got[1:], nil
}
