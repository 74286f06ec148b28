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
	ctx := context.Background()
	now := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	mk := func(id, key string, created time.Time) approval.Approval {
		return approval.Approval{ID: id, Key: key, Tool: "exec", ArgumentsSHA256: "h1", Summary: "s", CallID: "c-" + id,
			Status: approval.StatusPending, CreatedAt: created, ExpiresAt: created.Add(time.Hour)}
	}
	for _, a := range []approval.Approval{mk("a1", "alice", now), mk("a2", "alice", now.Add(time.Minute)), mk("b1", "bob", now)} {
		if err := s.Create(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	// Find: the newest open one of the key's call, never another key's.
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
	// Use before a decision: refused.
	if _, err := s.Use(ctx, "a1", "call-x", now); !errors.Is(err, approval.ErrNotApproved) {
		t.Errorf("Use of a pending approval: %v", err)
	}
	// Decided once, from many goroutines at once: exactly one wins.
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for range 8 {
		wg.Go(func() {
			if _, err := s.Decide(ctx, "a1", approval.StatusApproved, "bob", "ok", now.Add(time.Second)); err == nil {
				mu.Lock()
				wins++
				mu.Unlock()
			} else if !errors.Is(err, approval.ErrDecided) {
				t.Errorf("Decide: %v", err)
			}
		})
	}
	wg.Wait()
	if wins != 1 {
		t.Errorf("%d decisions of one approval succeeded, want 1", wins)
	}
	a, err := s.Get(ctx, "a1")
	if err != nil || a.Status != approval.StatusApproved || a.DecidedBy != "bob" || a.Reason != "ok" || a.DecidedAt == nil {
		t.Errorf("after Decide: %+v, %v", a, err)
	}
	// Used once, from many goroutines at once: exactly one call runs.
	wins = 0
	for range 8 {
		wg.Go(func() {
			if _, err := s.Use(ctx, "a1", "call-1", now.Add(2*time.Second)); err == nil {
				mu.Lock()
				wins++
				mu.Unlock()
			} else if !errors.Is(err, approval.ErrUsed) {
				t.Errorf("Use: %v", err)
			}
		})
	}
	wg.Wait()
	if wins != 1 {
		t.Errorf("%d uses of one approval succeeded, want 1", wins)
	}
	// Expired: cannot be decided or used; Expire hands each one out once.
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
	// Prune deletes what ended before the time given.
	if err := s.Prune(ctx, now.Add(3*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "a1"); !errors.Is(err, approval.ErrNotFound) {
		t.Errorf("Get after Prune: %v", err)
	}
}
