package agent_test

import (
	"context"
	"testing"

	"github.com/countbot/toolsvc/internal/agent"
	"github.com/countbot/toolsvc/internal/agent/agenttest"
)

// TestSubscriptionNeverBlocksTheTask: a follower that reads nothing does
// not slow the task down: its queue fills, later events are dropped and
// counted, and the task runs to its end. The starter's hook gets every
// event, ending with the end event.
func TestSubscriptionNeverBlocksTheTask(t *testing.T) {
	reg, _, _ := newRegistry(t, "list_dir", "read_file")
	// Alternate two calls so that none is a duplicate: 60 turns of one
	// call each are 120 events, more than a follower's queue.
	n := 0
	subscribed := make(chan struct{})
	srv := agenttest.New(t, func(agenttest.Request) agenttest.Response {
		if n++; n == 1 {
			<-subscribed
		}
		if n > 60 {
			return agenttest.Final("done")
		}
		return agenttest.Call("c", []string{"list_dir", "read_file"}[n%2], `{"n":1}`)
	})
	var hooked []agent.Event
	m := manager(t, srv, reg, t.TempDir(), func(o *agent.ManagerOptions) { o.MaxTurns = 100 })
	// The starter's own hook sees every event. The model's first reply is
	// held until the follower is subscribed.
	task, err := m.StartWith(context.Background(), "many steps", agent.StartOptions{OnEvent: func(ev agent.Event) { hooked = append(hooked, ev) }})
	if err != nil {
		t.Fatal(err)
	}
	stuck, ok, _ := m.Subscribe(context.Background(), task.ID)
	if !ok {
		t.Fatal("no subscription")
	}
	close(subscribed)
	defer stuck.Close()
	done, _ := m.Wait(context.Background(), task.ID)
	if done.Status != agent.StatusCompleted || done.Turns != 61 {
		t.Fatalf("task %+v", done)
	}
	<-stuck.Done()
	queued := len(stuck.Events())
	if dropped := stuck.Dropped(); queued != 64 || int(dropped)+queued != len(hooked) {
		t.Errorf("a follower that never read: %d queued, %d dropped, %d events", queued, dropped, len(hooked))
	}
	if last := hooked[len(hooked)-1]; last.Type != agent.EventEnd || last.Status != agent.StatusCompleted || last.Answer != "done" {
		t.Errorf("last event %+v", last)
	}
	if len(hooked) != 61+60+1 {
		t.Errorf("%d events, want a turn per reply, a call per tool call and the end", len(hooked))
	}
	// A finished task: Done at once, no event.
	late, _, _ := m.Subscribe(context.Background(), task.ID)
	select {
	case <-late.Done():
	default:
		t.Error("a finished task's subscription is not done")
	}
	if len(late.Events()) != 0 {
		t.Error("a finished task's subscription has events")
	}
}
