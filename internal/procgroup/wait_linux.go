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
	err := WaitLeader(cmd)
	awaitGone(cmd.Process.Pid, 2*time.Second)
	return err
}

// WaitLeader is Wait without its last step: waiting until no member of
// the group is left alive, which takes a walk over every process of the
// system once a member is left as a zombie for another parent to reap.
// It is for callers that know by other means when the command's
// processes are gone (a control group seen empty, a PID namespace whose
// first process has ended).
func WaitLeader(cmd *exec.Cmd) error {
	pid := cmd.Process.Pid
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	_ = Kill(pid)
	return cmd.Wait()
}
