package launch

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Options are the launcher's choices (mlx.launch's flags of the same names).
type Options struct {
	Backend          string   // "ring" (default) or "nccl"
	StartingPort     int      // ring: the first rank's first port
	ConnectionsPerIP int      // ring: addresses per IP (default 1)
	NCCLPort         int      // nccl: rank 0's port
	RanksPerHost     int      // nccl: CUDA_VISIBLE_DEVICES is rank modulo this
	Env              []string // KEY=VALUE for every rank, after the hostfile's
	Cwd              string   // working directory on every host ("" keeps the launcher's, if it exists there)
	Program          string   // the mlxgo to run: local ranks run this path, remote ones RemoteProgram
	RemoteProgram    string   // the mlxgo on remote hosts (default "mlxgo" from their PATH)
	Args             []string // the subcommand and its arguments
	LocalWorkingDir  string   // the launcher's directory, for remote ranks when Cwd is empty
}

// Rank is how one rank is started: Env on top of the launcher's own
// environment, and Files (variable → content) written to temporary files
// whose paths the variables then hold.
type Rank struct {
	Rank  int
	Host  Host
	Local bool // 127.0.0.1: started directly, not over ssh
	Env   []string
	Files map[string]string
}

// Backends the launcher can start. mpi (mpirun owns process start-up) and
// jaccl (Thunderbolt RDMA) are MLX's too; they are refused with a message
// until a machine here can run them.
var Backends = []string{"ring", "nccl"}

// Plan works out every rank's environment, as mlx.launch does.
func Plan(hosts []Host, o Options) ([]Rank, error) {
	if len(hosts) == 0 {
		return nil, fmt.Errorf("no hosts")
	}
	for _, e := range o.Env {
		if _, err := envKey(e); err != nil {
			return nil, err
		}
	}
	ranks := make([]Rank, len(hosts))
	for i, h := range hosts {
		ranks[i] = Rank{Rank: i, Host: h, Local: h.SSH == "127.0.0.1", Files: map[string]string{}}
		ranks[i].Env = append(ranks[i].Env, o.Env...)
		ranks[i].Env = append(ranks[i].Env, "MLXGO_BACKEND="+o.Backend)
	}
	switch o.Backend {
	case "ring":
		cpi := max(o.ConnectionsPerIP, 1)
		port := o.StartingPort
		var ring [][]string
		for i, h := range hosts {
			if len(h.IPs) == 0 {
				return nil, fmt.Errorf("the ring backend needs IP addresses, and host %d (%s) has none: give its \"ips\" in a hostfile", i, h.SSH)
			}
			var node []string
			for _, ip := range h.IPs {
				for range cpi {
					if port < 1 || port > 65535 {
						return nil, fmt.Errorf("port %d is out of range (--starting-port %d, %d addresses)", port, o.StartingPort, len(hosts)*len(h.IPs)*cpi)
					}
					node = append(node, joinHostPort(ip, port))
					port++
				}
			}
			ring = append(ring, node)
		}
		content := ""
		if len(ring) > 1 {
			b, _ := json.Marshal(ring)
			content = string(b)
		}
		for i := range ranks {
			ranks[i].Files["MLX_HOSTFILE"] = content
		}
	case "nccl":
		if len(hosts[0].IPs) == 0 {
			return nil, fmt.Errorf("the nccl backend needs rank 0's IP address, reachable from every rank")
		}
		per := max(o.RanksPerHost, 1)
		for i := range ranks {
			ranks[i].Env = append(ranks[i].Env,
				"NCCL_HOST_IP="+hosts[0].IPs[0], fmt.Sprintf("NCCL_PORT=%d", o.NCCLPort),
				fmt.Sprintf("MLX_WORLD_SIZE=%d", len(hosts)), fmt.Sprintf("CUDA_VISIBLE_DEVICES=%d", i%per))
		}
	case "mpi", "jaccl", "jaccl-ring":
		return nil, fmt.Errorf("backend %s is not started by mlxgo launch yet (use mlx.launch; an mlxgo started by it joins)", o.Backend)
	default:
		return nil, fmt.Errorf("unknown backend %q (want one of %s)", o.Backend, strings.Join(Backends, ", "))
	}
	return ranks, nil
}

// RingAddrs are the addresses a ring rank listens on, from its MLX_HOSTFILE
// content: what the launcher checks are free before it starts local ranks.
func RingAddrs(r Rank) []string {
	var ring [][]string
	if json.Unmarshal([]byte(r.Files["MLX_HOSTFILE"]), &ring) != nil || r.Rank >= len(ring) {
		return nil
	}
	return ring[r.Rank]
}

func joinHostPort(ip string, port int) string {
	if strings.Contains(ip, ":") {
		return fmt.Sprintf("[%s]:%d", ip, port)
	}
	return fmt.Sprintf("%s:%d", ip, port)
}

// RemoteScript is the bash script a remote rank runs, as mlx.launch's
// make_launch_script: disable echo (ssh -tt), go to the directory, export
// the environment, write each file to a temporary file, export MLX_RANK, and
// exec the program.
func RemoteScript(r Rank, o Options) string {
	var b strings.Builder
	b.WriteString("stty -echo; ")
	d := o.Cwd
	if d == "" {
		d = o.LocalWorkingDir
	}
	if d != "" {
		q := shellQuote(d)
		fmt.Fprintf(&b, "if [[ -d %s ]]; then cd %s; ", q, q)
		if o.Cwd != "" {
			fmt.Fprintf(&b, "else echo 'Failed to change directory to' %s >&2; exit 1; ", q)
		}
		b.WriteString("fi; ")
	}
	for _, e := range r.Env {
		k, v, _ := strings.Cut(e, "=")
		fmt.Fprintf(&b, "export %s=%s; ", k, shellQuote(v))
	}
	names := make([]string, 0, len(r.Files))
	for k := range r.Files {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(&b, "fname=$(mktemp); echo %s >$fname; export %s=$fname; ", shellQuote(r.Files[k]), k)
	}
	fmt.Fprintf(&b, "export MLX_RANK=%d; ", r.Rank)
	prog := o.RemoteProgram
	if prog == "" {
		prog = "mlxgo"
	}
	argv := append([]string{prog}, o.Args...)
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = shellQuote(a)
	}
	fmt.Fprintf(&b, "cmd=(%s); exec \"${cmd[@]}\"", strings.Join(q, " "))
	return b.String()
}

// SSHCommand is the command line that starts a remote rank.
func SSHCommand(r Rank, o Options) []string {
	return []string{"ssh", "-tt", "-o", "LogLevel=QUIET", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", r.Host.SSH, RemoteScript(r, o)}
}

// shellQuote quotes s for bash as Python's shlex.quote does.
func shellQuote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("@%+=:,./-_", c)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}
