//go:build unix

package memory

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestNotARegularFile(t *testing.T) {
	s, dir := newStore(t)
	os.MkdirAll(filepath.Join(dir, Dir), 0o755)
	if err := syscall.Mkfifo(filepath.Join(dir, Path), 0o644); err != nil {
		t.Fatal(err)
	}
	// A FIFO would block an ordinary open; O_NONBLOCK and the type check
	// turn it into an error.
	var nr NotRegularError
	if _, err := s.Search(context.Background(), []string{"x"}, false, 5); !errors.As(err, &nr) {
		t.Errorf("search: %v", err)
	}
	if _, err := s.Write(context.Background(), "web", "x"); err == nil {
		t.Errorf("write to a FIFO succeeded")
	}
}
