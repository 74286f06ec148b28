package audit

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestRetentionInterval: with RetentionInterval the log prunes old day
// folders by itself, at once and then every interval, and Close ends the
// rounds.
func TestRetentionInterval(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	dir := filepath.Join(t.TempDir(), "audit_logs")
	old := filepath.Join(dir, "2026-10-01")
	if err := os.MkdirAll(old, 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := New(Options{Dir: dir, RetentionDays: 30, RetentionInterval: 10 * time.Millisecond, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err := os.Stat(old); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the old day folder is still there")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// A folder made after the first round goes at a later one.
	older := filepath.Join(dir, "2026-09-01")
	if err := os.MkdirAll(older, 0o755); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err := os.Stat(older); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no later round")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}
