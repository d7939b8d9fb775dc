package launch

import "syscall"

// setDeathSignal kills a rank when the launcher dies without stopping it
// (SIGKILL to the launcher): no rank outlives its job.
func setDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
