package launch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// The test binary doubles as a rank: with LAUNCH_TEST_ROLE set it plays one
// and exits.
func TestMain(m *testing.M) {
	switch os.Getenv("LAUNCH_TEST_ROLE") {
	case "":
		os.Exit(m.Run())
	case "env":
		hf, _ := os.ReadFile(os.Getenv("MLX_HOSTFILE"))
		fmt.Printf("rank=%s backend=%s hostfile=%s extra=%s\n", os.Getenv("MLX_RANK"), os.Getenv("MLXGO_BACKEND"),
			strings.TrimSpace(string(hf)), os.Getenv("EXTRA"))
		os.Exit(0)
	case "die1":
		// Rank 1 dies at once; rank 0 would run for a minute.
		if os.Getenv("MLX_RANK") == "1" {
			time.Sleep(200 * time.Millisecond)
			os.Exit(3)
		}
		time.Sleep(time.Minute)
		os.Exit(0)
	case "sleep":
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	os.Exit(99)
}

func TestParseHostfile(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     *Hostfile
		err      string
	}{
		{"list", `[{"ssh": "m1", "ips": ["10.0.0.1"]}, {"ssh": "m2", "ips": ["10.0.0.2", "10.0.1.2"]}]`,
			&Hostfile{Hosts: []Host{{"m1", []string{"10.0.0.1"}}, {"m2", []string{"10.0.0.2", "10.0.1.2"}}}}, ""},
		{"object", `{"backend": "ring", "envs": ["A=1"], "hosts": [{"ssh": "m1", "ips": ["::1"], "rdma": [null]}]}`,
			&Hostfile{Backend: "ring", Envs: []string{"A=1"}, Hosts: []Host{{"m1", []string{"::1"}}}}, ""},
		{"no ips", `[{"ssh": "m1"}]`, &Hostfile{Hosts: []Host{{"m1", nil}}}, ""},
		{"not json", `{`, nil, "not JSON"},
		{"empty", `[]`, nil, "no hosts"},
		{"no hosts key", `{"backend": "ring"}`, nil, `no "hosts"`},
		{"no ssh", `[{"ips": ["10.0.0.1"]}]`, nil, `no "ssh"`},
		{"bad ip", `[{"ssh": "m", "ips": ["10.0.0.300"]}]`, nil, "not an IP"},
		{"bad env", `{"envs": ["A B=1"], "hosts": [{"ssh": "m"}]}`, nil, "not a variable name"},
		{"number", `3`, nil, "want a list"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseHostfile("h.json", []byte(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.HasPrefix(err.Error(), "hostfile h.json: ") {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// The ring hostfile is mlx.launch's launch_ring: per rank, its ip:port list,
// ports counting up from the starting port over ranks, then IPs, then
// connections.
func TestPlanRing(t *testing.T) {
	hosts, err := HostsFromList("127.0.0.1", 2)
	if err != nil {
		t.Fatal(err)
	}
	ranks, err := Plan(hosts, Options{Backend: "ring", StartingPort: 32323})
	if err != nil {
		t.Fatal(err)
	}
	want := `[["127.0.0.1:32323"],["127.0.0.1:32324"]]`
	for i, r := range ranks {
		if r.Files["MLX_HOSTFILE"] != want || !r.Local || r.Rank != i {
			t.Fatalf("rank %d: %+v, want hostfile %s", i, r, want)
		}
	}
	if got := RingAddrs(ranks[1]); len(got) != 1 || got[0] != "127.0.0.1:32324" {
		t.Fatalf("RingAddrs = %v", got)
	}
	two := []Host{{"a", []string{"10.0.0.1", "10.0.1.1"}}, {"b", []string{"10.0.0.2"}}}
	ranks, err = Plan(two, Options{Backend: "ring", StartingPort: 5000, ConnectionsPerIP: 2})
	if err != nil {
		t.Fatal(err)
	}
	want = `[["10.0.0.1:5000","10.0.0.1:5001","10.0.1.1:5002","10.0.1.1:5003"],["10.0.0.2:5004","10.0.0.2:5005"]]`
	if ranks[0].Files["MLX_HOSTFILE"] != want || ranks[0].Local {
		t.Fatalf("hostfile %s, want %s", ranks[0].Files["MLX_HOSTFILE"], want)
	}
	one, _ := Plan(hosts[:1], Options{Backend: "ring", StartingPort: 1})
	if one[0].Files["MLX_HOSTFILE"] != "" {
		t.Fatalf("one rank: hostfile %q, want empty as mlx.launch writes", one[0].Files["MLX_HOSTFILE"])
	}
	for _, tc := range []struct {
		hosts []Host
		o     Options
		err   string
	}{
		{[]Host{{"name", nil}}, Options{Backend: "ring", StartingPort: 1}, "needs IP addresses"},
		{hosts, Options{Backend: "ring", StartingPort: 65535}, "out of range"},
		{hosts, Options{Backend: "mpi"}, "not started by mlxgo launch"},
		{hosts, Options{Backend: "tcp"}, "unknown backend"},
		{hosts, Options{Backend: "ring", StartingPort: 1, Env: []string{"X"}}, "not KEY=VALUE"},
		{nil, Options{Backend: "ring"}, "no hosts"},
	} {
		if _, err := Plan(tc.hosts, tc.o); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("Plan(%v, %+v) = %v, want %q", tc.hosts, tc.o, err, tc.err)
		}
	}
}

func TestPlanNCCL(t *testing.T) {
	hosts := []Host{{"g1", []string{"10.0.0.1"}}, {"g1", []string{"10.0.0.1"}}, {"g2", []string{"10.0.0.2"}}}
	ranks, err := Plan(hosts, Options{Backend: "nccl", NCCLPort: 12345, RanksPerHost: 2})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(ranks[2].Env, " ")
	want := "MLXGO_BACKEND=nccl NCCL_HOST_IP=10.0.0.1 NCCL_PORT=12345 MLX_WORLD_SIZE=3 CUDA_VISIBLE_DEVICES=0"
	if got != want {
		t.Fatalf("rank 2 env %q, want %q", got, want)
	}
}

// The command line a remote rank would run (no ssh here): mlx.launch's
// script, with the arguments quoted for bash.
func TestSSHCommand(t *testing.T) {
	hosts := []Host{{"mac1", []string{"10.0.0.1"}}, {"mac2", []string{"10.0.0.2"}}}
	o := Options{Backend: "ring", StartingPort: 32323, Env: []string{"A=x y"}, Cwd: "/srv/m",
		RemoteProgram: "/opt/mlxgo", Args: []string{"generate", "-p", "it's"}}
	ranks, err := Plan(hosts, o)
	if err != nil {
		t.Fatal(err)
	}
	got := SSHCommand(ranks[1], o)
	want := []string{"ssh", "-tt", "-o", "LogLevel=QUIET", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "mac2",
		"stty -echo; if [[ -d /srv/m ]]; then cd /srv/m; else echo 'Failed to change directory to' /srv/m >&2; exit 1; fi; " +
			"export A='x y'; export MLXGO_BACKEND=ring; " +
			`fname=$(mktemp); echo '[["10.0.0.1:32323"],["10.0.0.2:32324"]]' >$fname; export MLX_HOSTFILE=$fname; ` +
			`export MLX_RANK=1; cmd=(/opt/mlxgo generate -p 'it'"'"'s'); exec "${cmd[@]}"`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%q\nwant\n%q", got, want)
	}
}

func selfOptions(t *testing.T, role string) Options {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("LAUNCH_TEST_ROLE", role)
	port, err := FreePort(2)
	if err != nil {
		t.Fatal(err)
	}
	return Options{Backend: "ring", StartingPort: port, Program: exe, Env: []string{"EXTRA=e"}}
}

func runLocal(t *testing.T, ctx context.Context, o Options, n int) (string, error) {
	t.Helper()
	hosts, _ := HostsFromList("127.0.0.1", n)
	ranks, err := Plan(hosts, o)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err = Run(ctx, ranks, o, nil, &out, os.Stderr)
	return out.String(), err
}

func TestRunEnvironment(t *testing.T) {
	o := selfOptions(t, "env")
	out, err := runLocal(t, context.Background(), o, 2)
	if err != nil {
		t.Fatal(err)
	}
	for r := range 2 {
		want := fmt.Sprintf(`rank=%d backend=ring hostfile=[["127.0.0.1:%d"],["127.0.0.1:%d"]] extra=e`, r, o.StartingPort, o.StartingPort+1)
		if !strings.Contains(out, want+"\n") {
			t.Errorf("output %q lacks %q", out, want)
		}
	}
}

// A rank that dies stops the others at once and is named in the error.
func TestRunRankFailureStopsOthers(t *testing.T) {
	o := selfOptions(t, "die1")
	start := time.Now()
	_, err := runLocal(t, context.Background(), o, 2)
	if !errors.Is(err, ErrRankFailed) || !strings.Contains(err.Error(), "rank 1 exited with status 3") {
		t.Fatalf("err = %v, want rank 1's failure", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("took %v to stop, want < 10 s", d)
	}
}

// The launcher's signal (ctx) reaches every rank.
func TestRunCancelStopsAll(t *testing.T) {
	o := selfOptions(t, "sleep")
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	start := time.Now()
	_, err := runLocal(t, ctx, o, 3)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %v to stop, want < 5 s", d)
	}
}

func TestRunPortInUse(t *testing.T) {
	o := selfOptions(t, "env")
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", o.StartingPort+1))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	out, err := runLocal(t, context.Background(), o, 2)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("rank 1 cannot listen on 127.0.0.1:%d", o.StartingPort+1)) {
		t.Fatalf("err = %v, want the port in use named", err)
	}
	if out != "" {
		t.Fatalf("a rank ran: %q", out)
	}
}

func FuzzParseHostfile(f *testing.F) {
	f.Add([]byte(`[{"ssh": "m1", "ips": ["10.0.0.1"]}]`))
	f.Add([]byte(`{"backend": "ring", "envs": ["A=1"], "hosts": [{"ssh": "m1", "ips": ["::1"], "rdma": [null, "x"]}]}`))
	f.Add([]byte(`{"hosts": null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		hf, err := ParseHostfile("f", data)
		if err != nil {
			return
		}
		if len(hf.Hosts) == 0 {
			t.Fatal("accepted a hostfile without hosts")
		}
		for _, h := range hf.Hosts {
			if h.SSH == "" {
				t.Fatal("accepted a host without a name")
			}
		}
	})
}
