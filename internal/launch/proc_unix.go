//go:build unix

package launch

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts each rank in its own process group, so that the launcher
// alone decides when a rank is signalled (and a signal reaches the rank's
// children too).
func setProcAttr(c *exec.Cmd) {
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setDeathSignal(c.SysProcAttr)
}

func signalRank(c *exec.Cmd, sig syscall.Signal) {
	if c.Process != nil {
		syscall.Kill(-c.Process.Pid, sig)
	}
}
