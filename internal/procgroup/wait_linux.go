package procgroup

import (
	"errors"
	"os"
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
	if !awaitExitPolled(pid) {
		var info unix.Siginfo
		for {
			err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
			if !errors.Is(err, syscall.EINTR) {
				break
			}
		}
	}
	_ = Kill(pid)
	return cmd.Wait()
}

// awaitExitPolled waits until child pid has ended, leaving it unreaped,
// through a pidfd in Go's network poller, and reports whether it could.
// A goroutine blocked in waitid holds its thread in a system call: the
// runtime's monitor then hands the thread's processor to another thread
// and keeps polling every 20 µs for a millisecond after each such call,
// over a hundred wake-ups for a short command. Parked in the poller, the
// goroutine holds nothing. Needs Linux 5.3 (pidfd_open and polling a
// pidfd) and 5.4 (waitid with P_PIDFD).
func awaitExitPolled(pid int) bool {
	fd, err := unix.PidfdOpen(pid, unix.O_NONBLOCK)
	if err != nil {
		if fd, err = unix.PidfdOpen(pid, 0); err != nil {
			return false
		}
		if err := unix.SetNonblock(fd, true); err != nil {
			unix.Close(fd)
			return false
		}
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	exited := false
	err = rc.Read(func(fd uintptr) bool {
		var info unix.Siginfo
		werr := unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOWAIT|unix.WNOHANG, nil)
		switch {
		case errors.Is(werr, syscall.EINTR):
			return false
		case werr != nil:
			return true // not to be waited for this way: fall back
		}
		// With WNOHANG and nothing to report, waitid leaves info zero.
		exited = info.Signo != 0
		return exited
	})
	return err == nil && exited
}
