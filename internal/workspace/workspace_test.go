package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/toolerr"
)

func TestReopenReplacedWorkspace(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ws")
	w, err := Open(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if runtime.GOOS == "linux" {
		// A deleted folder has no links: seen at once, without waiting for
		// the periodic comparison of the path.
		w.pathEvery = time.Hour
	}
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}

	// Deleted: every path is unavailable, not empty.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{".", "a.txt", "sub/b.txt"} {
		_, err := w.Resolve(p)
		var we *toolerr.Error
		if !errors.As(err, &we) || we.Code != toolerr.Unavailable || !errors.Is(err, ErrUnavailable) {
			t.Fatalf("Resolve(%q) with the workspace deleted: %v, want code %s", p, err, toolerr.Unavailable)
		}
	}
	if _, err := w.Current(); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Current with the workspace deleted: %v", err)
	}

	// Recreated: the new folder is used without a restart.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "b.txt"), []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := w.Resolve("b.txt")
	if err != nil {
		t.Fatalf("Resolve after recreating: %v", err)
	}
	data, err := p.Root.ReadFile(p.Name)
	if err != nil || string(data) != "new" {
		t.Fatalf("read through the reopened root: %q, %v", data, err)
	}
	if err := w.WriteString(mustResolve(t, w, "c.txt"), "written", false); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "c.txt")); err != nil || string(data) != "written" {
		t.Fatalf("write into the recreated folder: %q, %v", data, err)
	}
}

func TestReopenMovedWorkspace(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "ws")
	w, err := Open(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// Moved away and replaced by another folder: the old one still exists,
	// so only the device and inode comparison tells them apart, which is
	// made every PathCheckInterval; here at every call.
	w.pathEvery = 0
	if err := os.Rename(dir, filepath.Join(base, "ws.old")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "fresh"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	p := mustResolve(t, w, "fresh")
	if _, err := p.Stat(); err != nil {
		t.Fatalf("the replacing folder is not used: %v", err)
	}
}

func mustResolve(t *testing.T, w *Workspace, p string) Path {
	t.Helper()
	r, err := w.Resolve(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestIsTemp(t *testing.T) {
	for name, want := range map[string]bool{
		TempDir:                        true,
		".notes.md.tmp-0123456789ab":   true,
		".w.tmp-abcdefabcdef":          true,
		"notes.md.tmp-0123456789ab":    false, // not hidden
		".notes.md.tmp-0123456789AB":   false, // not our hex
		".notes.md.tmp-0123456789a":    false,
		".tmp-0123456789ab":            false,
		"notes.md":                     false,
		".toolsvc-tmpx":                false,
		".x.tmp-0123456789ab.bak":      false,
		".a.tmp-ffffffffffff":          true,
		".. .tmp-000000000000":         true,
		".notes.md.tmp-01234567-9ab":   false,
		".notes.md.tmp-0123456789ab\n": false,
		".notes.md.temp-0123456789ab":  false,
		".notes.md.tmp-0123456789ab/":  false,
		"":                             false,
	} {
		if got := IsTemp(name); got != want {
			t.Errorf("IsTemp(%q) = %v, want %v", name, got, want)
		}
		if got := IsTemp([]byte(name)); got != want {
			t.Errorf("IsTemp([]byte(%q)) = %v, want %v", name, got, want)
		}
	}
}

func TestWriteLeavesNoTemp(t *testing.T) {
	dir := t.TempDir()
	w, err := Open(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	p := mustResolve(t, w, "sub/f.txt")
	if err := w.WriteString(p, "one\n", false); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteString(p, "two\n", true); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "sub/f.txt")); string(data) != "one\ntwo\n" {
		t.Fatalf("content %q", data)
	}
	left, _ := os.ReadDir(filepath.Join(dir, TempDir))
	sub, _ := os.ReadDir(filepath.Join(dir, "sub"))
	if len(left) != 0 || len(sub) != 1 {
		t.Fatalf("temporary files left: %v in %s, %v in sub", left, TempDir, sub)
	}
}

func TestOpenRemovesStaleTemps(t *testing.T) {
	dir := t.TempDir()
	tmp := filepath.Join(dir, TempDir)
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(tmp, ".w.tmp-0123456789ab")
	other := filepath.Join(tmp, "not-ours.txt")
	for _, f := range []string{stale, other} {
		if err := os.WriteFile(f, []byte("half a file"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A write in progress in another process: its file is locked.
	busy := filepath.Join(tmp, ".w.tmp-ba5ba5ba5ba5")
	f, err := os.OpenFile(busy, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	unlock := lockTemp(f)
	defer unlock()

	w, err := Open(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale temporary file not removed: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("a file not named like ours was removed: %v", err)
	}
	if renameOpen {
		if _, err := os.Stat(busy); err != nil {
			t.Errorf("the temporary file of a write in progress was removed: %v", err)
		}
	}
}

// BenchmarkResolve measures Resolve, which checks with two stat calls that
// the workspace path still names the open folder.
func BenchmarkResolve(b *testing.B) {
	w, err := Open(b.TempDir(), true)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	for b.Loop() {
		if _, err := w.Resolve("notes/todo.md"); err != nil {
			b.Fatal(err)
		}
	}
}
