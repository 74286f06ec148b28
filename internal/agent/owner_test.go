package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/countbot/toolsvc/internal/agent"
	"github.com/countbot/toolsvc/internal/agent/agenttest"
	"github.com/countbot/toolsvc/internal/callinfo"
	"github.com/countbot/toolsvc/internal/registry"
)

// TestTaskOwner: a task belongs to the key of the call that started it;
// its own tool calls carry that key into the audit log; the owner is kept
// in the task's file across a restart, and a file of before keys had names
// loads as a task without an owner.
func TestTaskOwner(t *testing.T) {
	reg, _, al := newRegistry(t, "list_dir")
	srv := agenttest.New(t,
		agenttest.Reply(agenttest.Message(`{"role":"assistant","content":"","tool_calls":[{"function":{"name":"list_dir","arguments":{"path":"."}}}]}`, "tool_calls")),
		agenttest.Reply(agenttest.Final("done")),
	)
	dir := t.TempDir()
	m := manager(t, srv, reg, dir, nil)
	ctx := registry.WithCall(context.Background(), registry.Call{ID: "c1", Tool: "spawn", Facts: callinfo.Facts{Key: "alice"}})
	task, err := m.StartWith(ctx, "look around", agent.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if task.Owner != "alice" {
		t.Errorf("started task's owner %q", task.Owner)
	}
	done, _ := m.Wait(context.Background(), task.ID)
	if done.Status != agent.StatusCompleted || done.Owner != "alice" {
		t.Fatalf("task %+v", done)
	}
	al.mu.Lock()
	if len(al.recs) != 1 || al.recs[0].Key != "alice" || al.recs[0].SessionID != task.ID {
		t.Errorf("the sub-agent's tool call was audited as %+v", al.recs)
	}
	al.mu.Unlock()
	if l := mustList(t, m); len(l) != 1 || l[0].Owner != "alice" {
		t.Errorf("list %+v", l)
	}

	// A file of before keys had names: no owner field.
	old := `{"id":"sa-00000000000a","task":"old","status":"completed","created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z","turns":1,"tool_call_count":0,"tool_calls":[]}`
	if err := os.WriteFile(filepath.Join(dir, "sa-00000000000a.json"), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	m.Close(context.Background())
	m2 := manager(t, srv, reg, dir, nil)
	if got, ok := m2.Get(task.ID); !ok || got.Owner != "alice" {
		t.Errorf("after a restart: %+v", got)
	}
	if got, ok := m2.Get("sa-00000000000a"); !ok || got.Owner != "" || got.Task != "old" {
		t.Errorf("old task: %+v %v", got, ok)
	}
	// Started outside any call (no key): no owner.
	bare, err := m2.Start("no call", "")
	if err != nil {
		t.Fatal(err)
	}
	if bare.Owner != "" {
		t.Errorf("task started outside a call has owner %q", bare.Owner)
	}
}

// mustList is m.List, which cannot fail with the file store.
func mustList(t *testing.T, m *agent.Manager) []agent.Summary {
	t.Helper()
	l, err := m.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return l
}
