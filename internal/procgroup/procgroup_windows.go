package procgroup

import (
	"errors"
	"os"
	"os/exec"
	"time"
)

// Windows has no process groups to signal (a job object would be the
// equivalent, which toolsvc does not use): the command itself is killed,
// and what it started in the background may outlive it.

// Prepare makes cmd's cancellation kill the process; waitDelay bounds how
// long Wait then waits for the output pipes.
func Prepare(cmd *exec.Cmd, waitDelay time.Duration) {
	cmd.Cancel = func() error { return cmd.Process.Kill() }
	cmd.WaitDelay = waitDelay
}

// Kill kills the process pgid (there is no group). A process that is
// already gone is not an error.
func Kill(pgid int) error {
	if pgid <= 1 {
		return errors.New("procgroup: refusing to kill a process id <= 1")
	}
	p, err := os.FindProcess(pgid)
	if err != nil {
		return nil
	}
	defer p.Release()
	if err := p.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}

// Alive reports false: there is no group to look at.
func Alive(int) bool { return false }

// Wait waits for cmd's process to end.
func Wait(cmd *exec.Cmd) error { return cmd.Wait() }

// LiveMembers returns nil: there is no group to look at.
func LiveMembers(int) []int { return nil }
