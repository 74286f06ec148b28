// Package storetest holds the checks every approval.Store must pass, run
// by each store's tests against the real thing (a folder, PostgreSQL).
package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/approval"
)

// Run checks s, which must be empty.
func Run(t *testing.T, s approval.Store) {
	now := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	mk := func(id, key string, created time.Time) approval.Approval {
		return approval.Approval{ID: id, Key: key, Tool: "exec", ArgumentsSHA256: "h1", Summary: "s", CallID: "c-" + id,
			Status: approval.StatusPending, CreatedAt: created, ExpiresAt: created.Add(time.Hour)}
	}
	for _, a := range []approval.Approval{mk("a1", "alice", now), mk("a2", "alice", now.Add(time.Minute)), mk("b1", "bob", now)} {
		if err := s.Create(context.Background(), a); err != nil {
			t.Fatal(err)
		}
	}
	finds(t, s, now)
	decideOnce(t, s, now)
	useOnce(t, s, now)
	expires(t, s, now)
}

// finds checks Find: the newest open approval of the key's call, never
// another key's or other arguments'; and Get of nothing.
func finds(t *testing.T, s approval.Store, now time.Time) {
	ctx := context.Background()
	if a, err := s.Find(ctx, "alice", "exec", "h1", now.Add(2*time.Minute)); err != nil || a.ID != "a2" {
		t.Errorf("Find = %s, %v; want a2", a.ID, err)
	}
	if _, err := s.Find(ctx, "carol", "exec", "h1", now); !errors.Is(err, approval.ErrNotFound) {
		t.Errorf("Find of another key: %v", err)
	}
	if _, err := s.Find(ctx, "alice", "exec", "h2", now); !errors.Is(err, approval.ErrNotFound) {
		t.Errorf("Find of other arguments: %v", err)
	}
	if _, err := s.Get(ctx, "nope"); !errors.Is(err, approval.ErrNotFound) {
		t.Errorf("Get of nothing: %v", err)
	}
	if n, err := s.Waiting(ctx, "alice", now); err != nil || n != 2 {
		t.Errorf("Waiting of alice = %d, %v; want 2", n, err)
	}
	if n, err := s.Waiting(ctx, "alice", now.Add(time.Hour+time.Minute)); err != nil || n != 0 {
		t.Errorf("Waiting of alice once both expired = %d, %v; want 0", n, err)
	}
}

// race runs fn from eight goroutines at once and returns how many
// succeeded; an error other than want fails the test.
func race(t *testing.T, want error, fn func() error) int {
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for range 8 {
		wg.Go(func() {
			err := fn()
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case !errors.Is(err, want):
				t.Errorf("%v, want nil or %v", err, want)
			}
		})
	}
	wg.Wait()
	return wins
}

// decideOnce checks that an approval cannot be used before a decision,
// and is decided once when many decide it at once.
func decideOnce(t *testing.T, s approval.Store, now time.Time) {
	ctx := context.Background()
	if _, err := s.Use(ctx, "a1", "call-x", now); !errors.Is(err, approval.ErrNotApproved) {
		t.Errorf("Use of a pending approval: %v", err)
	}
	wins := race(t, approval.ErrDecided, func() error {
		_, err := s.Decide(ctx, "a1", approval.StatusApproved, "bob", "ok", now.Add(time.Second))
		return err
	})
	if wins != 1 {
		t.Errorf("%d decisions of one approval succeeded, want 1", wins)
	}
	a, err := s.Get(ctx, "a1")
	if err != nil || a.Status != approval.StatusApproved || a.DecidedBy != "bob" || a.Reason != "ok" || a.DecidedAt == nil {
		t.Errorf("after Decide: %+v, %v", a, err)
	}
}

// useOnce checks that an approved approval runs one call when many use it
// at once.
func useOnce(t *testing.T, s approval.Store, now time.Time) {
	wins := race(t, approval.ErrUsed, func() error {
		_, err := s.Use(context.Background(), "a1", "call-1", now.Add(2*time.Second))
		return err
	})
	if wins != 1 {
		t.Errorf("%d uses of one approval succeeded, want 1", wins)
	}
}

// expires checks that an expired approval cannot be decided, that Expire
// hands each one out once, and that Prune deletes what ended.
func expires(t *testing.T, s approval.Store, now time.Time) {
	ctx := context.Background()
	if _, err := s.Decide(ctx, "b1", approval.StatusApproved, "carol", "", now.Add(2*time.Hour)); !errors.Is(err, approval.ErrExpired) {
		t.Errorf("Decide after the expiry: %v", err)
	}
	got, err := s.Expire(ctx, now.Add(90*time.Minute))
	if err != nil || len(got) != 2 {
		t.Errorf("Expire = %d approvals, %v; want a2 and b1", len(got), err)
	}
	if again, _ := s.Expire(ctx, now.Add(90*time.Minute)); len(again) != 0 {
		t.Errorf("a second Expire returned %d", len(again))
	}
	if p, _ := s.Pending(ctx); len(p) != 0 {
		t.Errorf("Pending after the expiry: %d", len(p))
	}
	if a, _ := s.Get(ctx, "b1"); a.Status != approval.StatusExpired {
		t.Errorf("b1 after Expire: %s", a.Status)
	}
	if err := s.Prune(ctx, now.Add(3*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "a1"); !errors.Is(err, approval.ErrNotFound) {
		t.Errorf("Get after Prune: %v", err)
	}
}
