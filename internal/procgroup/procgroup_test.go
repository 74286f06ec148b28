//go:build unix

package procgroup

import (
	"bytes"
	"context"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestWaitKillsGroup starts a shell that leaves a background job holding
// its output pipe, and checks that Wait neither waits for the job nor
// leaves it alive.
func TestWaitKillsGroup(t *testing.T) {
	tests := []struct{ name, script string }{
		{"background job", "sleep 1000 & echo $!"},
		{"nested shells", "sh -c 'sleep 1000 & echo $!; wait' & wait"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := &lockedBuffer{}
			cmd := exec.CommandContext(context.Background(), "/bin/sh", "-c", tc.script)
			cmd.Stdout = out
			Prepare(cmd, time.Minute) // a WaitDelay this long would show as a hang
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pgid := cmd.Process.Pid
			done := make(chan error, 1)
			go func() { done <- Wait(cmd) }()
			if strings.Contains(tc.script, "wait") {
				// The shell waits for its job: end it as a timeout would.
				for out.Len() == 0 {
					time.Sleep(time.Millisecond)
				}
				Kill(pgid)
			}
			<-done
			if live := LiveMembers(pgid); len(live) > 0 {
				t.Errorf("alive after Wait: %v", live)
			}
			child, _ := strconv.Atoi(strings.TrimSpace(out.String()))
			if child <= 0 {
				t.Fatalf("output %q", out.String())
			}
		})
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Len()
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestKillRefusesLowIDs(t *testing.T) {
	for _, id := range []int{-1, 0, 1} {
		if Kill(id) == nil {
			t.Errorf("Kill(%d) accepted", id)
		}
	}
}
