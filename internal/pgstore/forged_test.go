package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/countbot/toolsvc/internal/agent"
	"github.com/countbot/toolsvc/internal/pgstore"
	"github.com/countbot/toolsvc/internal/pgstore/pgtest"
)

// forge sends NOTIFY toolsvc_cancel for id from a plain connection, as any
// role that can connect to the database can, without touching the row.
func forge(t *testing.T, url, id string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SELECT pg_notify('toolsvc_cancel', $1)", id); err != nil {
		t.Fatal(err)
	}
}

// waitListening returns once s's LISTEN connection is up: it asks, through
// other, to cancel a probe task s runs until s hears of it. Notifications
// committed from then on reach s.
func waitListening(t *testing.T, s, other *pgstore.Store) {
	t.Helper()
	ctx := context.Background()
	const probe = "sa-00000000beef"
	if err := s.Save(ctx, running(probe), nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(30 * time.Second)
	for {
		if ok, err := other.RequestCancel(ctx, probe); !ok || err != nil {
			t.Fatalf("probe: %v %v", ok, err)
		}
		select {
		case id := <-s.Cancellations():
			if id == probe {
				return
			}
			t.Fatalf("heard of %q while waiting for the probe", id)
		case <-time.After(time.Second):
		case <-deadline:
			t.Fatal("the LISTEN connection never heard the probe")
		}
	}
}

// TestForgedNotifyIgnored: a NOTIFY on the cancellation channel from a
// connection that did not set cancel_requested on the row is not passed
// on, for a task this replica runs or one it does not; a cancellation
// asked the legitimate way still is. PostgreSQL delivers notifications in
// commit order and the store reads them one at a time, so when the
// legitimate one arrives the forged ones before it were already judged.
func TestForgedNotifyIgnored(t *testing.T) {
	url := pgtest.NewDatabase(t)
	a, b := open(t, url, "a"), open(t, url, "b")
	waitListening(t, a, b)
	ctx := context.Background()
	const victim, other, target = "sa-000000000001", "sa-000000000002", "sa-000000000003"
	for _, id := range []string{victim, target} {
		if err := a.Save(ctx, running(id), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Save(ctx, running(other), nil); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{victim, other, "sa-00000000000f", "", "'; DROP TABLE agent_tasks; --"} {
		forge(t, url, id)
	}
	if ok, err := b.RequestCancel(ctx, target); !ok || err != nil {
		t.Fatalf("request: %v %v", ok, err)
	}
	select {
	case got := <-a.Cancellations():
		if got != target {
			t.Fatalf("a forged notification for %q was passed on", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the legitimate cancellation did not arrive")
	}
	select {
	case got := <-a.Cancellations():
		t.Fatalf("a second cancellation, of %q", got)
	case <-time.After(200 * time.Millisecond):
	}
	lost, cancel, err := a.Renew(ctx, []string{victim, target})
	if err != nil || len(lost) != 0 || len(cancel) != 1 || cancel[0] != target {
		t.Fatalf("renew: lost %v cancel %v %v", lost, cancel, err)
	}
}

// TestManagerIgnoresForgedNotify: a running task survives a forged NOTIFY
// and is still canceled promptly (well before the next lease renewal, so
// by the notification) when another replica is asked to cancel it.
func TestManagerIgnoresForgedNotify(t *testing.T) {
	url := pgtest.NewDatabase(t)
	sa, sb := open(t, url, "a"), open(t, url, "b")
	waitListening(t, sa, sb)
	const lease = time.Minute // renewals every 20 s: a prompt cancel came by NOTIFY
	model := blockingModel{started: make(chan struct{}, 2)}
	a := managerWithLease(t, sa, "a", model, lease)
	b := managerWithLease(t, sb, "b", model, lease)
	ctx := context.Background()
	victim, err := a.Start("look around", "victim")
	if err != nil {
		t.Fatal(err)
	}
	<-model.started
	sentinel, err := a.Start("look around", "sentinel")
	if err != nil {
		t.Fatal(err)
	}
	<-model.started
	forge(t, url, victim.ID)
	// The sentinel's legitimate cancellation is heard after the forged
	// notification, so once it has ended the forged one was acted on, or not.
	if done, ok, err := b.Cancel(ctx, sentinel.ID); err != nil || !ok || done.Status != agent.StatusCanceled {
		t.Fatalf("canceling the sentinel: %+v %v %v", done, ok, err)
	}
	time.Sleep(300 * time.Millisecond)
	if got, ok, err := a.Find(ctx, victim.ID); err != nil || !ok || got.Status != agent.StatusRunning {
		t.Fatalf("after a forged NOTIFY the task is %+v %v %v (want running)", got, ok, err)
	}
	start := time.Now()
	done, ok, err := b.Cancel(ctx, victim.ID)
	if err != nil || !ok || done.Status != agent.StatusCanceled {
		t.Fatalf("the legitimate cancel: %+v %v %v", done, ok, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the legitimate cancel took %v", d)
	}
}
