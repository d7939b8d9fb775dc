package main

import (
	"context"
	"fmt"
	"os"

	"github.com/mlxgo/mlxgo/internal/launch"
)

const launchUsage = `Usage: mlxgo launch [flags] -- <command> [arguments]

Starts a distributed mlxgo job: one process (rank) per host entry, with the
environment mlx.launch gives its processes (MLX_RANK, MLX_HOSTFILE, ...), so
that MLX's distributed backend connects them. Rank 0 reads stdin and prints the
output (serve: rank 0 serves HTTP); the other ranks follow it. When a rank
fails the others are stopped and the launcher exits 1 naming it; SIGINT/SIGTERM
stop every rank. Hosts other than 127.0.0.1 are reached over ssh, as mlx.launch
reaches them.

Flags:
	-n N                 ranks per host (default 1; with the default --hosts, N local ranks)
	--hosts LIST         comma-separated hosts (default 127.0.0.1)
	--hostfile FILE      mlx.launch's JSON hostfile: [{"ssh": "host", "ips": ["10.0.0.1"]}, ...]
	                     or {"backend": "ring", "envs": ["K=V"], "hosts": [...]}
	--backend NAME       ring (default, TCP) or nccl (CUDA); the hostfile's backend otherwise
	--starting-port P    ring: the first listening port, one more per rank and IP
	                     (default 32323; 0 picks free ports on this machine)
	--connections-per-ip N  ring: sockets per IP (default 1)
	--nccl-port P        nccl: rank 0's port (default 12345)
	--env KEY=VALUE      set in every rank (repeatable)
	--cwd DIR            working directory of every rank
	--mlxgo PATH         the mlxgo binary on remote hosts (default: mlxgo from their PATH)

Example:
	$ mlxgo launch -n 2 -- generate -m ./Qwen3-0.6B --shard tensor -p "Hello"
	$ mlxgo launch -n 2 -- serve -m ./Qwen2.5-0.5B --shard pipeline --batch 4
`

type launchCommand struct{ m *Main }

func (c *launchCommand) Run(ctx context.Context, args []string) error {
	fs := c.m.newFlagSet("launch", launchUsage)
	n := fs.Int("n", 1, "")
	hosts := fs.String("hosts", "127.0.0.1", "")
	hostfile := fs.String("hostfile", "", "")
	backend := fs.String("backend", "", "")
	port := fs.Int("starting-port", 32323, "")
	cpi := fs.Int("connections-per-ip", 1, "")
	ncclPort := fs.Int("nccl-port", 12345, "")
	var env stringList
	fs.Var(&env, "env", "")
	cwd := fs.String("cwd", "", "")
	remote := fs.String("mlxgo", "", "")
	if err := c.m.parseFlags(fs, args); err != nil {
		return err
	}
	rest := fs.Args()
	if len(rest) > 0 && rest[0] == "--" {
		rest = rest[1:]
	}
	if len(rest) == 0 {
		return usagef("no command to launch (mlxgo launch -n 2 -- generate ...)")
	}
	if rest[0] == "launch" {
		return usagef("cannot launch launch")
	}

	var hs []launch.Host
	var hostEnv []string
	var err error
	if *hostfile != "" {
		hf, err := launch.ReadHostfile(*hostfile)
		if err != nil {
			return err
		}
		hs, hostEnv = hf.Hosts, hf.Envs
		if *backend == "" {
			*backend = hf.Backend
		}
	} else if hs, err = launch.HostsFromList(*hosts, *n); err != nil {
		return usagef("%v", err)
	}
	if *backend == "" {
		*backend = "ring"
	}
	if *port == 0 {
		if *port, err = launch.FreePort(len(hs) * max(*cpi, 1)); err != nil {
			return err
		}
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("cannot find this mlxgo binary: %w", err)
	}
	wd, _ := os.Getwd()
	o := launch.Options{
		Backend: *backend, StartingPort: *port, ConnectionsPerIP: *cpi, NCCLPort: *ncclPort,
		RanksPerHost: *n, Env: append(hostEnv, env...), Cwd: *cwd,
		Program: self, RemoteProgram: *remote, Args: rest, LocalWorkingDir: wd,
	}
	ranks, err := launch.Plan(hs, o)
	if err != nil {
		return err
	}
	return launch.Run(ctx, ranks, o, c.m.Stdin, c.m.Stdout, c.m.Stderr)
}
