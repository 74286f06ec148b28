package pgstore_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/agent"
	"github.com/countbot/toolsvc/internal/pgstore/pgtest"
)

// TestWaitingTaskIsHeld: a task waiting for an approval is held by its
// replica as a running one is: every replica reads it as
// waiting_approval with its approval, its lease is renewed, its
// cancellation can be asked, it can be saved again as running, and once
// its replica stops renewing it, it expires as interrupted without the
// approval it waited for.
func TestWaitingTaskIsHeld(t *testing.T) {
	url := pgtest.NewDatabase(t)
	a, b := open(t, url, "a"), open(t, url, "b")
	ctx := context.Background()
	const id = "sa-000000000001"
	task := running(id)
	exp := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	task.Status = agent.StatusWaitingApproval
	task.Approval = &agent.ApprovalWait{ID: "ap-1", Tool: "exec", Summary: "run the command: make deploy", ExpiresAt: &exp}
	if err := a.Save(ctx, task, nil); err != nil {
		t.Fatal(err)
	}
	got, ok, err := b.Get(ctx, id)
	if err != nil || !ok || got.Status != agent.StatusWaitingApproval || got.Approval == nil || got.Approval.ID != "ap-1" {
		t.Fatalf("the other replica reads %+v, %v %v", got, ok, err)
	}
	list, err := b.List(ctx)
	if err != nil || len(list) != 1 || list[0].Status != agent.StatusWaitingApproval || list[0].Approval == nil || list[0].Approval.Summary != "run the command: make deploy" {
		t.Fatalf("the other replica lists %+v, %v", list, err)
	}
	if lost, _, err := a.Renew(ctx, []string{id}); err != nil || len(lost) != 0 {
		t.Fatalf("renewing the waiting task: lost %v, %v", lost, err)
	}
	if ok, err := b.RequestCancel(ctx, id); !ok || err != nil {
		t.Fatalf("asking to cancel the waiting task: %v %v", ok, err)
	}
	// Back to running (the decision came), then waiting again: a's to
	// write all along.
	if err := a.Save(ctx, running(id), nil); err != nil {
		t.Fatalf("saved as running again: %v", err)
	}
	if err := a.Save(ctx, task, nil); err != nil {
		t.Fatalf("saved as waiting again: %v", err)
	}
	ids, err := b.Expire(ctx, 0)
	if err != nil || !slices.Equal(ids, []string{id}) {
		t.Fatalf("expired %v, %v", ids, err)
	}
	got, _, _ = b.Get(ctx, id)
	if got.Status != agent.StatusInterrupted || got.Approval != nil {
		t.Fatalf("the expired task: %+v", got)
	}
}
