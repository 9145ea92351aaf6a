package main

import (
	"os/exec"
	"syscall"
)

// endWithParent has the kernel send cmd SIGTERM when the thread that
// started it ends, as it does when syncgen run is killed by a signal it
// cannot pass on (SIGKILL: the OOM killer, a CI runner's hard stop).
// mpirun then stops the ranks instead of running the job on without a
// parent. The caller keeps its goroutine on that thread until cmd has
// ended (runtime.LockOSThread): the signal follows the thread, not the
// process.
func endWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
