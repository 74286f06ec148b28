package agent_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/agent"
	"github.com/countbot/toolsvc/internal/agent/agenttest"
	"github.com/countbot/toolsvc/internal/callinfo"
	"github.com/countbot/toolsvc/internal/registry"
)

// asKey is a context of a tool call made with the key named key, as spawn's
// and workflow_run's are.
func asKey(key string) context.Context {
	return registry.WithCall(context.Background(), registry.Call{ID: "c-" + key, Tool: "spawn", Facts: callinfo.Facts{Key: key}})
}

// TestKeyMaxRunning: a key's own bound on its tasks running refuses one
// more of its tasks at once (and only its), a queued start waits for one of
// them to end, and a start that gives up leaves no slot taken.
func TestKeyMaxRunning(t *testing.T) {
	reg, _, _ := newRegistry(t, "list_dir")
	hang := agenttest.New(t, agenttest.Reply(agenttest.Response{Hang: true}))
	m := manager(t, hang, reg, t.TempDir(), func(o *agent.ManagerOptions) {
		o.MaxConcurrent = 5
		o.KeyLimits = func(key string) (int, int) {
			if key == "alice" {
				return 1, 0
			}
			return 0, 0
		}
	})
	first, err := m.StartWith(asKey("alice"), "slow", agent.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var kb *agent.KeyBusyError
	if _, err := m.StartWith(asKey("alice"), "another", agent.StartOptions{}); !errors.As(err, &kb) || kb.Max != 1 {
		t.Fatalf("alice's second start: %v, want KeyBusyError{1}", err)
	}
	for _, ctx := range []context.Context{asKey("bob"), asKey("bob"), context.Background()} {
		if _, err := m.StartWith(ctx, "other key", agent.StartOptions{}); err != nil {
			t.Fatalf("another key's start: %v", err)
		}
	}

	// A queued start that gives up takes nothing.
	ctx, cancel := context.WithTimeout(asKey("alice"), 50*time.Millisecond)
	_, err = m.StartWith(ctx, "queued", agent.StartOptions{Queue: true})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("queued start past its deadline: %v", err)
	}

	// A queued start waits for alice's task to end, then runs.
	started := make(chan error, 1)
	go func() {
		_, err := m.StartWith(asKey("alice"), "queued", agent.StartOptions{Queue: true})
		started <- err
	}()
	select {
	case err := <-started:
		t.Fatalf("queued start did not wait: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	if _, _, err := m.Cancel(context.Background(), first.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("queued start: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("queued start still waiting after alice's task ended")
	}
	if _, err := m.StartWith(asKey("alice"), "third", agent.StartOptions{}); !errors.As(err, &kb) {
		t.Fatalf("alice's start beside the queued one: %v, want KeyBusyError", err)
	}
}

// TestKeyMaxTurns: a key's own bound on turns stops its tasks when it is
// lower than the service's, says which bound it was, and is read as each
// task starts (a reload bounds the tasks started after it).
func TestKeyMaxTurns(t *testing.T) {
	reg, _, _ := newRegistry(t, "list_dir")
	var n atomic.Int64
	srv := agenttest.New(t, func(agenttest.Request) agenttest.Response {
		// A new path each turn: the loop never ends by itself.
		i := n.Add(1)
		return agenttest.Call("c", "list_dir", `{"path":"`+strings.Repeat("./", int(i%50))+`"}`)
	})
	var aliceTurns atomic.Int64
	aliceTurns.Store(2)
	m := manager(t, srv, reg, t.TempDir(), func(o *agent.ManagerOptions) {
		o.MaxTurns = 4
		o.MaxConcurrent = 3
		o.KeyLimits = func(key string) (int, int) {
			if key == "alice" {
				return 0, int(aliceTurns.Load())
			}
			return 0, 0
		}
	})
	run := func(key string) agent.Task {
		t.Helper()
		task, err := m.StartWith(asKey(key), "loop", agent.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		done, _ := m.Wait(context.Background(), task.ID)
		if done.Status != agent.StatusFailed || done.Error == nil || done.Error.Code != agent.FailMaxTurns {
			t.Fatalf("%s's task: %+v", key, done)
		}
		return done
	}
	if done := run("alice"); done.Turns != 2 || !strings.Contains(done.Error.Message, "subagents.max_turns") {
		t.Errorf("alice's task: %d turns, %q", done.Turns, done.Error.Message)
	}
	if done := run("bob"); done.Turns != 4 || !strings.Contains(done.Error.Message, "TOOLSVC_AGENT_MAX_TURNS") {
		t.Errorf("bob's task: %d turns, %q", done.Turns, done.Error.Message)
	}
	// A key's bound above the service's: the service's holds.
	aliceTurns.Store(10)
	if done := run("alice"); done.Turns != 4 || !strings.Contains(done.Error.Message, "TOOLSVC_AGENT_MAX_TURNS") {
		t.Errorf("alice's task after her bound rose: %d turns, %q", done.Turns, done.Error.Message)
	}
}
