package approval_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/approval"
	"github.com/countbot/toolsvc/internal/approval/storetest"
)

func TestFileStore(t *testing.T) {
	dir := t.TempDir()
	s, err := approval.OpenFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	storetest.Run(t, s)
	// What is left survives a reopen; a file cut short is skipped.
	if err := os.WriteFile(filepath.Join(dir, "cut.json"), []byte(`{"approval_id":"cut"`), 0o600); err != nil {
		t.Fatal(err)
	}
	want := approval.Approval{ID: "kept", Key: "alice", Tool: "exec", Status: approval.StatusPending, CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}
	if err := s.Create(context.Background(), want); err != nil {
		t.Fatal(err)
	}
	again, err := approval.OpenFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := again.Get(context.Background(), "kept"); err != nil || got.Status != want.Status || got.Key != "alice" {
		t.Errorf("after a reopen: %+v, %v", got, err)
	}
}
