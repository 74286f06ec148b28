package procgroup

import (
	"errors"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Wait waits for cmd's process to end, kills what is left of its group
// (background jobs, grandchildren holding the pipes) and then reaps it with
// cmd.Wait. The leader is observed with WNOWAIT and stays a zombie until
// the group is killed, so its number cannot be reused for another group in
// between.
func Wait(cmd *exec.Cmd) error {
	pid := cmd.Process.Pid
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	_ = Kill(pid)
	err := cmd.Wait()
	awaitGone(pid, 2*time.Second)
	return err
}
