// Package launch starts the ranks of a distributed mlxgo job with mlx.launch's
// environment contract, so that MLX's own backends (ring over TCP, NCCL, ...)
// find their peers, and supervises them: a rank that fails stops the others,
// and a signal to the launcher reaches every rank. It never loads MLX and
// never carries data between ranks itself: the transport is MLX's.
//
// The contract, read from mlx 0.32.4's mlx/_distributed_utils/launch.py:
//   - every rank gets MLX_RANK;
//   - ring: MLX_HOSTFILE names a file holding a JSON list, per rank, of its
//     "ip:port" listening addresses (ports from --starting-port, one more per
//     rank and ip); a single rank gets an empty file;
//   - nccl: NCCL_HOST_IP and NCCL_PORT (rank 0's address), MLX_WORLD_SIZE and
//     CUDA_VISIBLE_DEVICES (rank modulo ranks per host);
//   - hosts other than 127.0.0.1 are reached over ssh with a bash script that
//     changes directory, exports the environment and execs the command.
package launch

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"strings"
)

// Host is one rank's machine: the name ssh reaches, and the IPs the ring
// backend listens on there.
type Host struct {
	SSH string
	IPs []string
}

// Hostfile is mlx.launch's JSON hostfile: either a list of hosts or an object
// with "backend", "envs" and "hosts". Each host is {"ssh": name, "ips": [...]}
// ("rdma" is JACCL's and is read but not used).
type Hostfile struct {
	Backend string
	Envs    []string
	Hosts   []Host
}

type hostJSON struct {
	SSH  *string         `json:"ssh"`
	IPs  []string        `json:"ips"`
	RDMA json.RawMessage `json:"rdma"`
}

// ParseHostfile reads a hostfile's bytes; name is only for messages.
func ParseHostfile(name string, data []byte) (*Hostfile, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("hostfile %s: %s", name, fmt.Sprintf(format, args...))
	}
	var raw json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, bad("not JSON: %v", err)
	}
	var hosts []hostJSON
	hf := &Hostfile{}
	switch t := strings.TrimSpace(string(raw)); {
	case strings.HasPrefix(t, "["):
		if err := json.Unmarshal(raw, &hosts); err != nil {
			return nil, bad("hosts: %v", err)
		}
	case strings.HasPrefix(t, "{"):
		var obj struct {
			Backend string      `json:"backend"`
			Envs    []string    `json:"envs"`
			Hosts   *[]hostJSON `json:"hosts"`
		}
		if err := json.Unmarshal(raw, &obj); err != nil {
			return nil, bad("%v", err)
		}
		if obj.Hosts == nil {
			return nil, bad(`no "hosts" list`)
		}
		hf.Backend, hf.Envs, hosts = obj.Backend, obj.Envs, *obj.Hosts
	default:
		return nil, bad("want a list of hosts or an object with \"hosts\"")
	}
	if len(hosts) == 0 {
		return nil, bad("no hosts")
	}
	for i, h := range hosts {
		if h.SSH == nil || *h.SSH == "" {
			return nil, bad("host %d has no \"ssh\" name", i)
		}
		for _, ip := range h.IPs {
			if _, err := netip.ParseAddr(ip); err != nil {
				return nil, bad("host %d (%s): %q is not an IP address", i, *h.SSH, ip)
			}
		}
		hf.Hosts = append(hf.Hosts, Host{SSH: *h.SSH, IPs: h.IPs})
	}
	for _, e := range hf.Envs {
		if _, err := envKey(e); err != nil {
			return nil, bad("%v", err)
		}
	}
	return hf, nil
}

// ReadHostfile parses the hostfile at path.
func ReadHostfile(path string) (*Hostfile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read hostfile: %w", err)
	}
	return ParseHostfile(path, data)
}

// HostsFromList is mlx.launch's --hosts: comma-separated names, each repeated
// n times (-n); a name that is an IP address is also the ring's address.
func HostsFromList(list string, n int) ([]Host, error) {
	if n < 1 {
		return nil, fmt.Errorf("the number of ranks per host must be positive, not %d", n)
	}
	var hosts []Host
	for _, h := range strings.Split(list, ",") {
		if h == "" {
			return nil, fmt.Errorf("empty host name in %q", list)
		}
		var ips []string
		if _, err := netip.ParseAddr(h); err == nil {
			ips = []string{h}
		}
		for range n {
			hosts = append(hosts, Host{SSH: h, IPs: ips})
		}
	}
	return hosts, nil
}

// envKey checks a KEY=VALUE entry and returns KEY.
func envKey(e string) (string, error) {
	k, _, ok := strings.Cut(e, "=")
	if !ok || k == "" {
		return "", fmt.Errorf("environment entry %q is not KEY=VALUE", e)
	}
	for _, c := range k {
		if !(c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return "", fmt.Errorf("environment entry %q: %q is not a variable name", e, k)
		}
	}
	return k, nil
}
