package approval_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/approval"
	"github.com/countbot/toolsvc/internal/audit"
	"github.com/countbot/toolsvc/internal/registry"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newService(t testing.TB, rules map[string]approval.Rule) (*approval.Service, *clock, *[]audit.Approval) {
	t.Helper()
	s, err := approval.OpenFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{t: time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)}
	var entries []approval.Entry
	for name, r := range rules {
		entries = append(entries, approval.Entry{Name: name, Match: func(tool string) bool { return tool == name }, Rule: r})
	}
	var mu sync.Mutex
	var recs []audit.Approval
	n := 0
	svc := approval.New(approval.Options{Store: s, TTL: time.Hour, Now: c.now, Poll: 10 * time.Millisecond,
		Rules:    func(key string) (approval.Rules, bool) { return approval.NewRules(entries...), key == "carol" },
		Approver: func(key string) bool { return key == "bob" || key == "carol" },
		NewID:    func() string { n++; return fmt.Sprintf("ap-%d", n) },
		Record:   func(_ approval.Approval, r audit.Approval) { mu.Lock(); recs = append(recs, r); mu.Unlock() },
	})
	return svc, c, &recs
}

func call(key, tool, args string) registry.HoldCall {
	return registry.HoldCall{CallID: "c", Tool: tool, Facts: registry.Meta{Key: key}, Args: []byte(args)}
}

// TestServiceExpiry: an approval nobody decides expires at its time: it
// cannot be decided then, the sweep records it once, the call sent again
// asks anew, and one presented by ID says it expired.
func TestServiceExpiry(t *testing.T) {
	svc, c, recs := newService(t, map[string]approval.Rule{"exec": {Kind: approval.Always}})
	ctx := context.Background()
	out := svc.Hold(ctx, call("alice", "exec", `{"command":"ls"}`))
	if out.Held == nil {
		t.Fatalf("not held: %+v", out)
	}
	id := out.Held.ID
	c.add(time.Hour)
	if _, err := svc.Decide(ctx, "bob", id, "approve", ""); !errors.Is(err, approval.ErrExpired) {
		t.Errorf("a decision after the expiry: %v", err)
	}
	if err := svc.Sweep(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	_ = svc.Sweep(ctx, time.Hour)
	if len(*recs) != 1 || (*recs)[0].Outcome != "expired" || (*recs)[0].ID != id {
		t.Errorf("records after two sweeps: %+v", *recs)
	}
	p := call("alice", "exec", `{"command":"ls"}`)
	p.Facts.Approval = id
	if out := svc.Hold(ctx, p); out.Code != approval.CodeExpired {
		t.Errorf("the expired approval presented: %+v", out)
	}
	if out := svc.Hold(ctx, call("alice", "exec", `{"command":"ls"}`)); out.Held == nil || out.Held.ID == id {
		t.Errorf("the call sent again after the expiry: %+v", out)
	}
}

// TestServiceWaitWakes: Wait returns as soon as the approval is decided,
// and at its expiry when nobody decides.
func TestServiceWaitWakes(t *testing.T) {
	svc, _, _ := newService(t, map[string]approval.Rule{"exec": {Kind: approval.Always}})
	ctx := context.Background()
	id := svc.Hold(ctx, call("alice", "exec", `{}`)).Held.ID
	done := make(chan approval.Approval)
	go func() {
		a, _ := svc.Wait(ctx, id)
		done <- a
	}()
	time.Sleep(20 * time.Millisecond)
	if _, err := svc.Decide(ctx, "bob", id, "reject", "no"); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-done:
		if a.Status != approval.StatusRejected || a.Reason != "no" {
			t.Errorf("Wait returned %+v", a)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return after the decision")
	}
}

// TestServiceRules: destructive and argument patterns hold what they
// name only; self_approve is the key's.
func TestServiceRules(t *testing.T) {
	pat, err := approval.ParseRule([]any{map[string]any{"path": "deploy/*"}, map[string]any{"command": "git push*"}})
	if err != nil {
		t.Fatal(err)
	}
	svc, _, _ := newService(t, map[string]approval.Rule{"write_file": pat, "exec": pat, "edit_file": {Kind: approval.Destructive}})
	ctx := context.Background()
	for _, tc := range []struct {
		c    registry.HoldCall
		held bool
	}{
		{call("alice", "write_file", `{"path":"deploy/a.yaml"}`), true},
		{call("alice", "write_file", `{"path":"./x/../deploy/a.yaml"}`), true},
		{call("alice", "write_file", `{"path":"notes/a.txt"}`), false},
		{call("alice", "exec", `{"command":"git   push origin main"}`), true},
		{call("alice", "exec", `{"command":"git status"}`), false},
		{call("alice", "edit_file", `{}`), false},
		{call("alice", "read_file", `{"path":"deploy/a.yaml"}`), false},
	} {
		out := svc.Hold(ctx, tc.c)
		if (out.Held != nil) != tc.held || (!tc.held && !out.Run) {
			t.Errorf("%s %s: %+v, want held %v", tc.c.Tool, tc.c.Args, out, tc.held)
		}
	}
	d := call("alice", "edit_file", `{}`)
	d.Destructive = true
	if out := svc.Hold(ctx, d); out.Held == nil {
		t.Errorf("a destructive call under destructive: %+v", out)
	}
	// carol may decide her own; bob may not his.
	c := call("carol", "write_file", `{"path":"deploy/c"}`)
	if _, err := svc.Decide(ctx, "carol", svc.Hold(ctx, c).Held.ID, "approve", ""); err != nil {
		t.Errorf("carol decides her own with self_approve: %v", err)
	}
	b := call("bob", "write_file", `{"path":"deploy/b"}`)
	if _, err := svc.Decide(ctx, "bob", svc.Hold(ctx, b).Held.ID, "approve", ""); !errors.Is(err, approval.ErrOwnCall) {
		t.Errorf("bob decides his own: %v", err)
	}
	if _, err := svc.Decide(ctx, "alice", svc.Hold(ctx, b).Held.ID, "approve", ""); !errors.Is(err, approval.ErrNotApprover) {
		t.Errorf("alice decides: %v", err)
	}
}

// TestServiceBoundsWaiting: a key may have MaxWaiting approvals waiting;
// the next held call is refused (busy) with what to do, until one is
// decided; another key is not held back.
func TestServiceBoundsWaiting(t *testing.T) {
	svc, _, _ := newService(t, map[string]approval.Rule{"exec": {Kind: approval.Always}})
	ctx := context.Background()
	var first string
	for i := range approval.MaxWaiting {
		out := svc.Hold(ctx, call("alice", "exec", fmt.Sprintf(`{"command":"echo %d"}`, i)))
		if out.Held == nil {
			t.Fatalf("call %d: %+v", i, out)
		}
		if i == 0 {
			first = out.Held.ID
		}
	}
	out := svc.Hold(ctx, call("alice", "exec", `{"command":"echo one more"}`))
	if out.Run || out.Held != nil || out.Code != "busy" || !strings.Contains(out.Message, "Next:") {
		t.Fatalf("one call past the bound: %+v", out)
	}
	if out := svc.Hold(ctx, call("bob", "exec", `{"command":"echo one more"}`)); out.Held == nil {
		t.Errorf("another key's call: %+v", out)
	}
	if _, err := svc.Decide(ctx, "bob", first, "reject", ""); err != nil {
		t.Fatal(err)
	}
	if out := svc.Hold(ctx, call("alice", "exec", `{"command":"echo one more"}`)); out.Held == nil {
		t.Errorf("after a decision: %+v", out)
	}
}
