package pgstore_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/agent"
	"github.com/countbot/toolsvc/internal/pgstore"
	"github.com/countbot/toolsvc/internal/pgstore/pgtest"
	"github.com/countbot/toolsvc/internal/registry"
)

func open(t testing.TB, url, replica string) *pgstore.Store {
	t.Helper()
	s, err := pgstore.Open(context.Background(), pgstore.Options{URL: url, Replica: replica, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func running(id string) agent.Task {
	now := time.Now().UTC().Truncate(time.Microsecond)
	return agent.Task{ID: id, Task: "t", Status: agent.StatusRunning, CreatedAt: now, UpdatedAt: now, ToolCalls: []agent.CallRecord{}, Owner: "alice"}
}

// TestMigrationsOnceAcrossReplicas: replicas starting together apply each
// migration once, and a later start changes nothing.
func TestMigrationsOnceAcrossReplicas(t *testing.T) {
	url := pgtest.NewDatabase(t)
	var wg sync.WaitGroup
	for _, r := range []string{"a", "b", "c", "d"} {
		wg.Add(1)
		go func() { defer wg.Done(); open(t, url, r) }()
	}
	wg.Wait()
	open(t, url, "e")
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var rows, version int
	if err := conn.QueryRow(context.Background(), "SELECT count(*), max(version) FROM schema_migrations").Scan(&rows, &version); err != nil {
		t.Fatal(err)
	}
	if rows != 3 || version != 3 { // 0001_agents, 0002_rate_buckets, 0003_approvals
		t.Errorf("schema_migrations: %d rows, version %d", rows, version)
	}
}

func TestUnreachableAtStart(t *testing.T) {
	_, err := pgstore.Open(context.Background(), pgstore.Options{URL: "postgres://u:hunter2@127.0.0.1:1/db?connect_timeout=2", Log: zerolog.Nop()})
	if err == nil || !strings.Contains(err.Error(), "cannot reach PostgreSQL at 127.0.0.1:1/db") {
		t.Fatalf("error: %v", err)
	}
	if _, err := pgstore.Open(context.Background(), pgstore.Options{URL: "postgres://%zz", Log: zerolog.Nop()}); err == nil {
		t.Fatal("a URL that does not parse opened")
	}
}

// TestTasksAcrossReplicas: what one replica saves, another reads; only
// the running replica writes its task; events are numbered once.
func TestTasksAcrossReplicas(t *testing.T) {
	url := pgtest.NewDatabase(t)
	a, b := open(t, url, "a"), open(t, url, "b")
	ctx := context.Background()
	task := running("sa-000000000001")
	if err := a.Save(ctx, task, nil); err != nil {
		t.Fatal(err)
	}
	for n, typ := range []string{agent.EventTurn, agent.EventTurn, agent.EventTurn} {
		ev := agent.Event{Type: typ, Agent: task.ID, Time: time.Now().UTC(), Turn: n + 1}
		evs := []agent.NumberedEvent{{N: n + 1, Event: ev}}
		if err := a.Save(ctx, task, evs); err != nil {
			t.Fatal(err)
		}
		if err := a.Save(ctx, task, evs); err != nil { // a retry after a lost reply
			t.Fatal(err)
		}
	}
	got, ok, err := b.Get(ctx, task.ID)
	if err != nil || !ok || got.Owner != "alice" || got.Status != agent.StatusRunning || !got.CreatedAt.Equal(task.CreatedAt) {
		t.Fatalf("b reads %+v %v %v", got, ok, err)
	}
	evs, last, err := b.EventsAfter(ctx, task.ID, 1)
	if err != nil || last != 3 || len(evs) != 2 || evs[0].Turn != 2 || evs[1].Turn != 3 {
		t.Fatalf("events after 1: %+v, last %d, %v", evs, last, err)
	}
	// Another replica may not overwrite it.
	if err := b.Save(ctx, task, nil); !errors.Is(err, agent.ErrLost) {
		t.Fatalf("b overwrote a's task: %v", err)
	}
	task.Status, task.Answer = agent.StatusCompleted, "done"
	if err := a.Save(ctx, task, nil); err != nil {
		t.Fatal(err)
	}
	// Nor a itself once it ended.
	if err := a.Save(ctx, running(task.ID), nil); !errors.Is(err, agent.ErrLost) {
		t.Fatalf("an ended task went back to running: %v", err)
	}
	list, err := b.List(ctx)
	if err != nil || len(list) != 1 || list[0].Status != agent.StatusCompleted || list[0].Owner != "alice" {
		t.Fatalf("list %+v %v", list, err)
	}
	if _, ok, err := b.Get(ctx, "sa-00000000000f"); ok || err != nil {
		t.Fatalf("a missing task: %v %v", ok, err)
	}
}

// TestExpireOnce: when a replica stops renewing its task, replicas racing
// to notice mark it interrupted once, with one end event, and the old
// replica can no longer write it.
func TestExpireOnce(t *testing.T) {
	url := pgtest.NewDatabase(t)
	a := open(t, url, "a")
	var others []*pgstore.Store
	for _, r := range []string{"b", "c", "d"} {
		others = append(others, open(t, url, r))
	}
	ctx := context.Background()
	for _, id := range []string{"sa-000000000001", "sa-000000000002"} {
		if err := a.Save(ctx, running(id), nil); err != nil {
			t.Fatal(err)
		}
	}
	// One lease of a second: only tasks not renewed for that long expire.
	if ids, err := others[0].Expire(ctx, time.Hour); err != nil || len(ids) != 0 {
		t.Fatalf("fresh tasks expired: %v %v", ids, err)
	}
	var mu sync.Mutex
	var all []string
	var wg sync.WaitGroup
	for range 5 {
		for _, s := range others {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ids, err := s.Expire(ctx, 0)
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				all = append(all, ids...)
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	slices.Sort(all)
	if !slices.Equal(all, []string{"sa-000000000001", "sa-000000000002"}) {
		t.Fatalf("expired %v, want each task once", all)
	}
	got, _, _ := others[1].Get(ctx, "sa-000000000001")
	if got.Status != agent.StatusInterrupted || got.Error == nil || got.Error.Code != agent.FailInterrupted || got.FinishedAt == nil {
		t.Fatalf("expired task %+v", got)
	}
	evs, _, _ := others[2].EventsAfter(ctx, "sa-000000000001", 0)
	if len(evs) != 1 || evs[0].Type != agent.EventEnd || evs[0].Status != agent.StatusInterrupted {
		t.Fatalf("events %+v", evs)
	}
	late := []agent.NumberedEvent{{N: 7, Event: agent.Event{Type: agent.EventTurn, Agent: "sa-000000000001"}}}
	if err := a.Save(ctx, running("sa-000000000001"), late); !errors.Is(err, agent.ErrLost) {
		t.Fatalf("the old replica still writes: %v", err)
	}
	if evs, _, _ := others[2].EventsAfter(ctx, "sa-000000000001", 0); len(evs) != 1 {
		t.Fatalf("an event after the end: %+v", evs)
	}
	lost, _, err := a.Renew(ctx, []string{"sa-000000000001"})
	if err != nil || !slices.Equal(lost, []string{"sa-000000000001"}) {
		t.Fatalf("renew: lost %v, %v", lost, err)
	}
}

// TestCancelReachesTheRunningReplica: a cancellation asked on one replica
// arrives on the other's LISTEN channel and in its next renewal.
func TestCancelReachesTheRunningReplica(t *testing.T) {
	url := pgtest.NewDatabase(t)
	a, b := open(t, url, "a"), open(t, url, "b")
	ctx := context.Background()
	if err := a.Save(ctx, running("sa-000000000001"), nil); err != nil {
		t.Fatal(err)
	}
	// The listener may connect after Open returns: ask until it hears.
	got := ""
	for got == "" {
		if ok, err := b.RequestCancel(ctx, "sa-000000000001"); !ok || err != nil {
			t.Fatalf("request: %v %v", ok, err)
		}
		select {
		case got = <-a.Cancellations():
		case <-time.After(time.Second):
		}
	}
	if got != "sa-000000000001" {
		t.Fatalf("notified of %q", got)
	}
	lost, cancel, err := a.Renew(ctx, []string{"sa-000000000001"})
	if err != nil || len(lost) != 0 || !slices.Equal(cancel, []string{"sa-000000000001"}) {
		t.Fatalf("renew: lost %v cancel %v %v", lost, cancel, err)
	}
	if ok, err := b.RequestCancel(ctx, "sa-00000000000f"); ok || err != nil {
		t.Fatalf("canceling a missing task: %v %v", ok, err)
	}
}

// TestConversationSerialised: a second message of a session, on another
// replica, waits for the first and sees its exchange.
func TestConversationSerialised(t *testing.T) {
	url := pgtest.NewDatabase(t)
	ca, cb := open(t, url, "a").Conversations(nil), open(t, url, "b").Conversations(nil)
	ctx := context.Background()
	first, err := ca.Hold(ctx, "alice", "s1")
	if err != nil {
		t.Fatal(err)
	}
	second := make(chan agent.SessionHold)
	go func() {
		h, err := cb.Hold(ctx, "alice", "s1")
		if err != nil {
			t.Error(err)
		}
		second <- h
	}()
	// Another key's conversation in the same session is not held up.
	other, err := cb.Hold(ctx, "bob", "s1")
	if err != nil || len(other.Messages()) != 0 {
		t.Fatalf("bob: %v", err)
	}
	other.Release()
	if err := first.Save(ctx, []agent.Message{{Role: "user", Content: "one"}, {Role: "assistant", Content: "1"}}); err != nil {
		t.Fatal(err)
	}
	first.Release()
	h := <-second
	if m := h.Messages(); len(m) != 2 || m[0].Content != "one" {
		t.Fatalf("the second message saw %+v", m)
	}
	if err := h.Save(ctx, append(h.Messages(), agent.Message{Role: "user", Content: "two"})); err != nil {
		t.Fatal(err)
	}
	h.Release()
	// A hold released without saving keeps the history as it was.
	h, _ = ca.Hold(ctx, "alice", "s1")
	h.Release()
	h, _ = cb.Hold(ctx, "alice", "s1")
	defer h.Release()
	if m := h.Messages(); len(m) != 3 || m[2].Content != "two" {
		t.Fatalf("history %+v", m)
	}
}

// blockingModel replies only when its task is canceled.
type blockingModel struct{ started chan struct{} }

func (m blockingModel) Chat(ctx context.Context, _ []agent.Message, _ []registry.Definition) (agent.Reply, error) {
	m.started <- struct{}{}
	<-ctx.Done()
	return agent.Reply{}, ctx.Err()
}

type noTools struct{}

func (noTools) DefinitionsFor(string) []registry.Definition { return nil }
func (noTools) Invoke(context.Context, string, []byte, registry.Meta) registry.Result {
	return registry.Result{}
}

func manager(t *testing.T, s *pgstore.Store, replica string, model agent.Chatter) *agent.Manager {
	t.Helper()
	return managerWithLease(t, s, replica, model, 3*time.Second)
}

// managerWithLease is manager on any shared store, renewing its tasks'
// leases every third of lease.
func managerWithLease(t *testing.T, s agent.SharedStore, replica string, model agent.Chatter, lease time.Duration) *agent.Manager {
	t.Helper()
	m, err := agent.NewManager(agent.ManagerOptions{Store: s, Replica: replica, Lease: lease, Model: model, Tools: noTools{}, MaxConcurrent: 4, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return m
}

// TestManagersShareTasks: a task started on one replica is found,
// listed, followed and canceled through another.
func TestManagersShareTasks(t *testing.T) {
	url := pgtest.NewDatabase(t)
	model := blockingModel{started: make(chan struct{}, 1)}
	a := manager(t, open(t, url, "a"), "a", model)
	b := manager(t, open(t, url, "b"), "b", model)
	ctx := context.Background()
	task, err := a.Start("look around", "l")
	if err != nil {
		t.Fatal(err)
	}
	<-model.started
	got, ok, err := b.Find(ctx, task.ID)
	if err != nil || !ok || got.Status != agent.StatusRunning || got.Label != "l" {
		t.Fatalf("b finds %+v %v %v", got, ok, err)
	}
	list, err := b.List(ctx)
	if err != nil || len(list) != 1 || list[0].ID != task.ID {
		t.Fatalf("b lists %+v %v", list, err)
	}
	sub, ok, err := b.Subscribe(ctx, task.ID)
	if err != nil || !ok {
		t.Fatalf("subscribe: %v %v", ok, err)
	}
	defer sub.Close()
	done, ok, err := b.Cancel(ctx, task.ID)
	if err != nil || !ok || done.Status != agent.StatusCanceled {
		t.Fatalf("b cancels: %+v %v %v", done, ok, err)
	}
	var end agent.Event
	for end.Type != agent.EventEnd {
		end = <-sub.Events()
	}
	if end.Status != agent.StatusCanceled {
		t.Fatalf("end event %+v", end)
	}
	<-sub.Done()
}

// slowFirstSave is the store with a slow first save of each task, as on a
// loaded database: the lease loop runs meanwhile.
type slowFirstSave struct {
	*pgstore.Store
	delay time.Duration
	mu    sync.Mutex
	saved map[string]bool
}

func (s *slowFirstSave) Save(ctx context.Context, t agent.Task, evs []agent.NumberedEvent) error {
	s.mu.Lock()
	first := !s.saved[t.ID]
	s.saved[t.ID] = true
	s.mu.Unlock()
	if first {
		time.Sleep(s.delay)
	}
	return s.Store.Save(ctx, t, evs)
}

// TestLeaseLoopWaitsForFirstSave: a task whose first save is still on its
// way is not renewed, so not taken for lost by its own replica (found in
// no row, then marked interrupted a few milliseconds after it started).
func TestLeaseLoopWaitsForFirstSave(t *testing.T) {
	url := pgtest.NewDatabase(t)
	const lease = 300 * time.Millisecond // renewed every 100 ms
	s := &slowFirstSave{Store: open(t, url, "a"), delay: 4 * lease / 3, saved: map[string]bool{}}
	model := blockingModel{started: make(chan struct{}, 1)}
	m := managerWithLease(t, s, "a", model, lease)
	task, err := m.Start("look around", "l")
	if err != nil {
		t.Fatal(err)
	}
	<-model.started
	// Three more rounds of the lease loop, now that the row is there.
	time.Sleep(lease)
	got, ok, err := m.Find(context.Background(), task.ID)
	if err != nil || !ok || got.Status != agent.StatusRunning {
		t.Fatalf("the task a round after it started: %+v %v %v (want running)", got, ok, err)
	}
}
