//go:build unix

package mcpmount

import (
	"context"
	"testing"

	"github.com/countbot/toolsvc/internal/procgroup"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/toolerr"
)

// TestCloseLeavesNoProcess: Close stops the server and what it started in
// the background (here a sleep its shell left behind); a call after Close
// gets an error result.
func TestCloseLeavesNoProcess(t *testing.T) {
	e := newEnv(t, "none")
	cfg := fakeConfig(t, "raw", nil)
	exe := cfg.Command
	cfg.Command = "/bin/sh"
	cfg.Args = []string{"-c", `sleep 1000 & exec "$0"`, exe}
	s := e.start(t, "fake", cfg)
	reg := registryOf(t, s)
	if r := invoke(reg, context.Background(), "fake__echo", `{"text":"up"}`); r.Result != "up" {
		t.Fatalf("echo: %+v", r)
	}
	s.mu.Lock()
	pgid := s.conn.child.proc.Pid()
	s.mu.Unlock()
	if len(procgroup.LiveMembers(pgid)) < 2 {
		t.Fatalf("expected the server and its sleep in group %d", pgid)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if live := procgroup.LiveMembers(pgid); len(live) > 0 {
		t.Errorf("processes left after Close: %v", live)
	}
	if r := invoke(reg, context.Background(), "fake__echo", `{"text":"up"}`); r.Status != registry.StatusError || r.Error.Code != toolerr.Unavailable {
		t.Errorf("call after Close: %+v", r)
	}
}
