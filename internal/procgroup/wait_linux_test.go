package procgroup

import (
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"
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
