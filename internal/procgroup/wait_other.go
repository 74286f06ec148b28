//go:build unix && !linux

package procgroup

import (
	"os/exec"
	"time"
)

// Wait waits for cmd's process to end, kills what is left of its group
// (background jobs, grandchildren holding the pipes) and reaps it. Without
// waitid's WNOWAIT the leader is reaped first, so a process that left the
// group in between is out of reach; the group is still killed at once.
func Wait(cmd *exec.Cmd) error {
	pid := cmd.Process.Pid
	err := cmd.Wait()
	_ = Kill(pid)
	awaitGone(pid, 2*time.Second)
	return err
}
