package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Grace is how long a rank has to exit after SIGTERM before it gets SIGKILL.
var Grace = 3 * time.Second

// ErrRankFailed marks a job that stopped because one of its ranks failed.
var ErrRankFailed = errors.New("rank failed")

// Run starts every rank and waits for them. Rank 0 reads stdin; every rank
// writes to stdout and stderr (mlxgo's followers print no output). When a
// rank fails, the others get SIGTERM (then SIGKILL after Grace) and Run
// returns an error naming the first rank that failed; when ctx ends (the
// launcher's SIGINT/SIGTERM), every rank gets SIGTERM the same way and Run
// returns ctx's error.
func Run(ctx context.Context, ranks []Rank, o Options, stdin io.Reader, stdout, stderr io.Writer) error {
	if err := checkPorts(ranks); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "mlxgo-launch-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	stdout, stderr = shared(stdout), shared(stderr)
	cmds := make([]*exec.Cmd, len(ranks))
	for i, r := range ranks {
		c, err := rankCommand(r, o, dir)
		if err != nil {
			return err
		}
		if i == 0 {
			c.Stdin = stdin
		}
		c.Stdout, c.Stderr = stdout, stderr
		setProcAttr(c)
		cmds[i] = c
	}

	type exit struct {
		rank int
		err  error
	}
	done := make(chan exit, len(cmds))
	started := 0
	var startErr error
	for i, c := range cmds {
		if err := c.Start(); err != nil {
			startErr = fmt.Errorf("cannot start rank %d: %w", i, err)
			break
		}
		started++
		go func() { done <- exit{i, c.Wait()} }()
	}

	running := started
	var first error // the first rank's failure, or why we stopped
	var killAt <-chan time.Time
	stopping := false
	stop := func() {
		if stopping {
			return
		}
		stopping = true
		for i := range started {
			if cmds[i].ProcessState == nil {
				signalRank(cmds[i], syscall.SIGTERM)
			}
		}
		killAt = time.After(Grace)
	}
	if startErr != nil {
		first = startErr
		stop()
	}
	ctxDone := ctx.Done()
	for running > 0 {
		select {
		case e := <-done:
			running--
			if e.err != nil && !stopping {
				first = fmt.Errorf("%w: rank %d %s; stopped the other ranks", ErrRankFailed, e.rank, describe(e.err))
				stop()
			}
		case <-ctxDone:
			ctxDone = nil
			if first == nil {
				first = ctx.Err()
			}
			stop()
		case <-killAt:
			killAt = nil
			for i := range started {
				if cmds[i].ProcessState == nil {
					signalRank(cmds[i], syscall.SIGKILL)
				}
			}
		}
	}
	return first
}

// shared lets every rank write to w: a file as it is (each rank writes to
// it directly), any other writer behind a lock.
func shared(w io.Writer) io.Writer {
	if _, ok := w.(*os.File); ok || w == nil {
		return w
	}
	return &lockedWriter{w: w}
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// describe says how a rank ended: "exited with status 1", "was killed by signal: killed".
func describe(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "was killed by signal " + ws.Signal().String()
		}
		return "exited with status " + strconv.Itoa(ee.ExitCode())
	}
	return "failed: " + err.Error()
}

// rankCommand is rank r's process: the program itself for a local rank (its
// files written under dir), ssh for a remote one.
func rankCommand(r Rank, o Options, dir string) (*exec.Cmd, error) {
	if !r.Local {
		argv := SSHCommand(r, o)
		c := exec.Command(argv[0], argv[1:]...)
		return c, nil
	}
	env := append(os.Environ(), r.Env...)
	for k, content := range r.Files {
		p := filepath.Join(dir, fmt.Sprintf("%s-%d.json", k, r.Rank))
		if err := os.WriteFile(p, []byte(content+"\n"), 0o600); err != nil {
			return nil, err
		}
		env = append(env, k+"="+p)
	}
	env = append(env, "MLX_RANK="+strconv.Itoa(r.Rank))
	c := exec.Command(o.Program, o.Args...)
	c.Env = env
	if o.Cwd != "" {
		c.Dir = o.Cwd
	}
	return c, nil
}

// checkPorts makes a port already taken on this machine a clear error before
// any rank starts (MLX's ring backend would retry binding and then fail with
// a message that names no rank).
func checkPorts(ranks []Rank) error {
	for _, r := range ranks {
		if !r.Local {
			continue
		}
		for _, a := range RingAddrs(r) {
			l, err := net.Listen("tcp", a)
			if err != nil {
				return fmt.Errorf("rank %d cannot listen on %s (%v): choose other ports with --starting-port", r.Rank, a, errors.Unwrap(err))
			}
			l.Close()
		}
	}
	return nil
}

// FreePort finds a port the ring can start at with n consecutive free ports
// on 127.0.0.1 (for --starting-port 0).
func FreePort(n int) (int, error) {
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if p+n > 65535 {
			continue
		}
		ok := true
		for i := 1; i < n && ok; i++ {
			l2, err := net.Listen("tcp", joinHostPort("127.0.0.1", p+i))
			if err != nil {
				ok = false
				break
			}
			l2.Close()
		}
		if ok {
			return p, nil
		}
	}
	return 0, fmt.Errorf("no %d consecutive free ports on 127.0.0.1", n)
}
