package procgroup

import (
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestWaitLeader checks that WaitLeader returns the leader's exit status
// at once and kills the rest of its group, whose end it leaves to the
// caller to see.
func TestWaitLeader(t *testing.T) {
	cmd := exec.CommandContext(context.Background(), "/bin/sh", "-c", "sleep 1000 & exit 3")
	Prepare(cmd, time.Minute)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	err := WaitLeader(cmd)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("WaitLeader = %v, want exit status 3", err)
	}
	// The background job was killed with the group: wait for it to die.
	for i := 0; len(LiveMembers(pgid)) > 0; i++ {
		if i > 10000 {
			t.Fatalf("the group's job outlived its kill: %v", LiveMembers(pgid))
		}
		time.Sleep(time.Millisecond)
	}
}

// TestAwaitExitPolled: the wait through a pidfd returns once the child
// has ended, not before, and leaves it for Wait to reap; a process that
// is not a child is refused, for the blocking fallback.
func TestAwaitExitPolled(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "sleep 0.2; exit 5")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if !awaitExitPolled(cmd.Process.Pid) {
		t.Skip("no pidfd polling on this kernel: WaitLeader blocks in waitid instead")
	}
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT|unix.WNOHANG, nil)
	if err != nil || info.Signo == 0 {
		t.Errorf("returned before the child ended (%v)", err)
	}
	var exit *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &exit) || exit.ExitCode() != 5 {
		t.Errorf("the child was not left for Wait: %v", err)
	}
	if awaitExitPolled(1) {
		t.Error("a process that is not a child counted as waited for")
	}
}
