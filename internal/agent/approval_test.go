package agent_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/agent"
	"github.com/countbot/toolsvc/internal/agent/agenttest"
	"github.com/countbot/toolsvc/internal/approval"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/toolerr"
)

// fakeApprovals holds every exec call that presents no approval, as
// approval.Service does with an "exec: always" rule, and is the waiter the
// manager is given: Wait returns once decide is called, or ctx ends. Only
// the call presenting the approval runs, and only once it is approved.
type fakeApprovals struct {
	mu       sync.Mutex
	decision approval.Approval // Status empty: undecided
	decided  chan struct{}
	waits    int
	presents []string // the approval IDs calls presented
	failures int      // Waits that fail before one answers (a store that is away)
}

const heldID = "ap-0001"

func newFakeApprovals() *fakeApprovals { return &fakeApprovals{decided: make(chan struct{})} }

func (f *fakeApprovals) Hold(_ context.Context, c registry.HoldCall) registry.HoldOutcome {
	if c.Tool != "exec" {
		return registry.HoldOutcome{Run: true}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if c.Facts.Approval == "" {
		exp := time.Now().Add(time.Hour)
		return registry.HoldOutcome{Held: &registry.Hold{ID: heldID, ArgumentsSHA256: strings.Repeat("a", 64), Summary: "run the command: " + string(c.Args),
			ExpiresAt: exp, Message: "This call of exec waits for a person's approval and has not run."}}
	}
	f.presents = append(f.presents, c.Facts.Approval)
	switch f.decision.Status {
	case approval.StatusApproved:
		return registry.HoldOutcome{Run: true}
	case approval.StatusRejected:
		return registry.HoldOutcome{Code: toolerr.ApprovalRejected, Message: "a person rejected this call of exec (approval " + heldID + ", by bob); the reason given: " + f.decision.Reason}
	}
	return registry.HoldOutcome{Code: toolerr.ApprovalExpired, Message: "approval " + heldID + " expired before it was used."}
}

func (f *fakeApprovals) Wait(ctx context.Context, id string) (approval.Approval, error) {
	f.mu.Lock()
	f.waits++
	if f.failures > 0 {
		f.failures--
		f.mu.Unlock()
		return approval.Approval{}, context.DeadlineExceeded // what a store's query past its own timeout says
	}
	f.mu.Unlock()
	select {
	case <-f.decided:
		f.mu.Lock()
		defer f.mu.Unlock()
		a := f.decision
		a.ID, a.Tool = id, "exec"
		return a, nil
	case <-ctx.Done():
		return approval.Approval{ID: id, Tool: "exec", Status: approval.StatusPending}, ctx.Err()
	}
}

func (f *fakeApprovals) decide(status, by, reason string) {
	f.mu.Lock()
	f.decision = approval.Approval{Status: status, DecidedBy: by, Reason: reason}
	f.mu.Unlock()
	close(f.decided)
}

func (f *fakeApprovals) counts() (waits int, presents []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.waits, append([]string(nil), f.presents...)
}

// waitStatus polls the task until its status is want.
func waitStatus(t *testing.T, m *agent.Manager, id, want string) agent.Task {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		task, _ := m.Get(id)
		if task.Status == want {
			return task
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s is %s, want %s: %+v", id, task.Status, want, task)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// approvalsManager is a manager whose model calls exec once and then
// answers, with the fake approvals holding exec and waited on.
func approvalsManager(t *testing.T, mod func(*agent.ManagerOptions)) (*agent.Manager, *agenttest.Server, *fakeTool, *fakeApprovals, string) {
	t.Helper()
	reg, tools, _ := newRegistry(t, "exec", "list_dir")
	f := newFakeApprovals()
	reg.SetHolder(f)
	srv := agenttest.New(t,
		agenttest.Reply(agenttest.Call("call_exec", "exec", `{"command":"make deploy"}`)),
		agenttest.Reply(agenttest.Final("Deployed, or said why not.")),
	)
	dir := t.TempDir()
	m := manager(t, srv, reg, dir, func(o *agent.ManagerOptions) {
		o.Approvals = f
		o.MaxTurns = 2 // the call's turn and the answer's: the wait is no turn
		if mod != nil {
			mod(o)
		}
	})
	return m, srv, tools["exec"], f, dir
}

// TestTaskWaitsForApproval: a held call makes the task waiting_approval
// (in Get, List, its file and its events, naming the approval, tool and
// summary) for longer than its own timeout, which stands still meanwhile;
// once approved the call is sent again with the approval, runs once, its
// result goes to the model as the call's result, and the task completes
// within its bound of turns.
func TestTaskWaitsForApproval(t *testing.T) {
	const timeout = 400 * time.Millisecond
	m, srv, exec, f, dir := approvalsManager(t, func(o *agent.ManagerOptions) { o.Timeout = timeout })
	var (
		evMu sync.Mutex
		evs  []agent.Event
	)
	task, err := m.StartWith(context.Background(), "Deploy.", agent.StartOptions{OnEvent: func(ev agent.Event) {
		evMu.Lock()
		evs = append(evs, ev)
		evMu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	sub, ok, err := m.Subscribe(context.Background(), task.ID)
	if !ok || err != nil {
		t.Fatalf("subscribe: %v %v", ok, err)
	}
	defer sub.Close()

	w := waitStatus(t, m, task.ID, agent.StatusWaitingApproval)
	if w.Approval == nil || w.Approval.ID != heldID || w.Approval.Tool != "exec" || !strings.Contains(w.Approval.Summary, "make deploy") || w.Approval.ExpiresAt == nil {
		t.Fatalf("the waiting task's approval: %+v", w.Approval)
	}
	select {
	case ev := <-sub.Events():
		for ev.Type != agent.EventWaitingApproval {
			ev = <-sub.Events()
		}
		if ev.Approval == nil || ev.Approval.ID != heldID || ev.Approval.Tool != "exec" || !strings.Contains(ev.Approval.Summary, "make deploy") {
			t.Errorf("the waiting_approval event: %+v", ev.Approval)
		}
		assertHas(t, "its text", ev.Text(), "waits for a person's approval", heldID, "exec", "make deploy")
	case <-time.After(5 * time.Second):
		t.Fatal("no event")
	}
	if l := mustList(t, m); len(l) != 1 || l[0].Status != agent.StatusWaitingApproval || l[0].Approval == nil || l[0].Approval.ID != heldID {
		t.Errorf("listed: %+v", l)
	}

	// Past the task's own timeout, it still waits: a person's time is
	// not the task's.
	time.Sleep(2 * timeout)
	if got, _ := m.Get(task.ID); got.Status != agent.StatusWaitingApproval {
		t.Fatalf("after twice its timeout, waiting: %+v", got)
	}
	// Its file was written once it waited (after it said so in memory).
	if onDisk := readTask(t, dir, task.ID); onDisk.Status != agent.StatusWaitingApproval || onDisk.Approval == nil {
		t.Errorf("on disk: %+v", onDisk)
	}
	if len(exec.calls()) != 0 || len(srv.Requests()) != 1 {
		t.Fatalf("while held: exec ran %d times, the model was asked %d times", len(exec.calls()), len(srv.Requests()))
	}

	f.decide(approval.StatusApproved, "bob", "fine")
	done, _ := m.Wait(context.Background(), task.ID)
	if done.Status != agent.StatusCompleted || done.Turns != 2 || done.Answer != "Deployed, or said why not." || done.Approval != nil {
		t.Fatalf("after approval: %+v", done)
	}
	if c := exec.calls(); len(c) != 1 || c[0] != `{"command":"make deploy"}` {
		t.Errorf("exec ran %q", c)
	}
	if waits, presents := f.counts(); waits != 1 || len(presents) != 1 || presents[0] != heldID {
		t.Errorf("waits %d, approvals presented %v", waits, presents)
	}
	if len(done.ToolCalls) != 1 || done.ToolCalls[0].Status != "success" || done.ToolCalls[0].ApprovalID != heldID || done.CallCount != 1 {
		t.Errorf("the task's calls: %+v (%d)", done.ToolCalls, done.CallCount)
	}
	// The model was given the call's result, not the hold.
	reqs := srv.Requests()
	msgs := messagesOf(t, reqs[len(reqs)-1])
	last := msgs[len(msgs)-1]
	if last.Role != "tool" || last.ToolCallID != "call_exec" || !strings.Contains(last.Content, "result of exec") {
		t.Errorf("the tool message the model got: %+v", last)
	}

	evMu.Lock()
	var types []string
	for _, ev := range evs {
		types = append(types, ev.Type)
		if ev.Type == agent.EventResumed {
			if ev.Approval == nil || ev.Approval.Status != approval.StatusApproved || ev.Approval.DecidedBy != "bob" || ev.Approval.ID != heldID {
				t.Errorf("the resumed event: %+v", ev.Approval)
			}
			assertHas(t, "its text", ev.Text(), heldID, "approved by bob", "running again")
		}
	}
	evMu.Unlock()
	if got, want := strings.Join(types, " "), "turn waiting_approval resumed tool_call turn end"; got != want {
		t.Errorf("events: %s, want %s", got, want)
	}
}

// TestTaskApprovalRejectedOrExpired: a rejection (with its reason) or an
// expiry goes to the model as the call's result, the call does not run,
// and the task goes on to its answer.
func TestTaskApprovalRejectedOrExpired(t *testing.T) {
	for _, tt := range []struct {
		status, reason string
		want           []string
	}{
		{approval.StatusRejected, "no deploys on Fridays", []string{"rejected", "no deploys on Fridays", "bob"}},
		{approval.StatusExpired, "", []string{"expired"}},
	} {
		t.Run(tt.status, func(t *testing.T) {
			m, srv, exec, f, _ := approvalsManager(t, nil)
			task, err := m.Start("Deploy.", "")
			if err != nil {
				t.Fatal(err)
			}
			waitStatus(t, m, task.ID, agent.StatusWaitingApproval)
			by := "bob"
			if tt.status == approval.StatusExpired {
				by = ""
			}
			f.decide(tt.status, by, tt.reason)
			done, _ := m.Wait(context.Background(), task.ID)
			if done.Status != agent.StatusCompleted {
				t.Fatalf("task: %+v", done)
			}
			if len(exec.calls()) != 0 {
				t.Errorf("exec ran: %q", exec.calls())
			}
			code := "approval_" + tt.status
			if len(done.ToolCalls) != 1 || done.ToolCalls[0].ErrorCode != code || done.ToolCalls[0].ApprovalID != heldID {
				t.Errorf("the task's calls: %+v", done.ToolCalls)
			}
			reqs := srv.Requests()
			msgs := messagesOf(t, reqs[len(reqs)-1])
			assertHas(t, "the tool message the model got", msgs[len(msgs)-1].Content, tt.want...)
		})
	}
}

// TestTaskCanceledWhileWaiting: DELETE of a waiting task cancels it at
// once; the held call is recorded as held, and never runs.
func TestTaskCanceledWhileWaiting(t *testing.T) {
	m, _, exec, _, dir := approvalsManager(t, nil)
	task, err := m.Start("Deploy.", "")
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, m, task.ID, agent.StatusWaitingApproval)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	done, ok, err := m.Cancel(ctx, task.ID)
	if !ok || err != nil || done.Status != agent.StatusCanceled || done.Approval != nil {
		t.Fatalf("canceled: %+v %v", done, err)
	}
	if len(done.ToolCalls) != 1 || done.ToolCalls[0].Status != registry.StatusApprovalRequired || done.ToolCalls[0].ApprovalID != heldID {
		t.Errorf("the task's calls: %+v", done.ToolCalls)
	}
	if len(exec.calls()) != 0 {
		t.Errorf("exec ran: %q", exec.calls())
	}
	if onDisk := readTask(t, dir, task.ID); onDisk.Status != agent.StatusCanceled || onDisk.Approval != nil {
		t.Errorf("on disk: %+v", onDisk)
	}
}

// TestTaskApprovalWaitRetries: a wait that fails (the store of approvals
// is away) is tried again, and the task resumes once it answers.
func TestTaskApprovalWaitRetries(t *testing.T) {
	m, _, exec, f, _ := approvalsManager(t, nil)
	f.failures = 1
	task, err := m.Start("Deploy.", "")
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, m, task.ID, agent.StatusWaitingApproval)
	f.decide(approval.StatusApproved, "bob", "")
	done, _ := m.Wait(context.Background(), task.ID)
	if done.Status != agent.StatusCompleted || len(exec.calls()) != 1 {
		t.Fatalf("task: %+v, exec ran %d times", done, len(exec.calls()))
	}
	if waits, _ := f.counts(); waits != 2 {
		t.Errorf("waits: %d, want 2 (one failed)", waits)
	}
}

// TestLoopWithoutWaiter: without a waiter (send_message's conversations)
// the model gets the hold itself, as before.
func TestLoopWithoutWaiter(t *testing.T) {
	reg, tools, _ := newRegistry(t, "exec")
	reg.SetHolder(newFakeApprovals())
	srv := agenttest.New(t,
		agenttest.Reply(agenttest.Call("call_exec", "exec", `{"command":"make deploy"}`)),
		agenttest.Reply(agenttest.Final("It waits for approval.")),
	)
	obs := &nopObserver{}
	out := (&agent.Loop{Model: newClient(srv, nil), Tools: reg, Allowed: subagentTools, MaxTurns: 3}).Run(context.Background(), "sa-000000000010", "Deploy.", obs)
	if out.Failure != nil || len(tools["exec"].calls()) != 0 {
		t.Fatalf("outcome %+v, exec ran %d times", out, len(tools["exec"].calls()))
	}
	if got := strings.Join(obs.calls, ","); got != "exec:approval_required:" {
		t.Errorf("calls: %s", got)
	}
}
