package memory

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// TestShortWriteLeavesNoTornEntry cuts a write short after part of the line
// reached the file, as a full disk does: the file is cut back to what it
// held, the write fails, and the next write is whole.
func TestShortWriteLeavesNoTornEntry(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before string
	}{
		{"after complete lines", "2026-01-01|web|kept\n"},
		{"after a hand-edited last line", "2026-01-01|web|kept\nno newline"},
		{"new file", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, dir := newStore(t)
			if tc.before != "" {
				writeFile(t, dir, tc.before)
			}
			s.write = func(f *os.File, b []byte) (int, error) {
				n, _ := f.Write(b[:len(b)/2])
				return n, syscall.ENOSPC
			}
			_, err := s.Write(context.Background(), "web", "a fact that does not fit on the disk")
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("Write with a short write: %v, want ENOSPC", err)
			}
			if got := readFile(t, dir); got != tc.before {
				t.Fatalf("file after a failed write: %q, want %q", got, tc.before)
			}
			s.write = (*os.File).Write
			if _, err := s.Write(context.Background(), "web", "the next fact"); err != nil {
				t.Fatal(err)
			}
			lines, st, err := s.Range(context.Background(), 1, 100)
			if err != nil {
				t.Fatal(err)
			}
			last := lines[len(lines)-1].Text
			if !strings.HasSuffix(last, "|web|the next fact") || st.Unterminated != 0 {
				t.Fatalf("after the next write: last line %q, stats %+v", last, st)
			}
		})
	}
}

// TestFullDisk fills a real file system (a 64 KiB tmpfs) and writes an
// entry that needs a page more than is left: the kernel writes part of it
// and then fails, and the store cuts the file back. Mounting needs root.
func TestFullDisk(t *testing.T) {
	if os.Geteuid() != 0 || runtime.GOOS != "linux" {
		t.Skip("mounting a tmpfs needs root on Linux; TestShortWriteLeavesNoTornEntry covers the same with an injected short write")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v %s", err, out)
	}
	defer exec.Command("umount", dir).Run()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	s := New(root, Options{})
	ctx := context.Background()
	if _, err := s.Write(ctx, "web", "written before the disk filled"); err != nil {
		t.Fatal(err)
	}
	before := readFile(t, dir)
	// Fill the rest of the file system.
	fill, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 4096)
	for {
		if _, err := fill.Write(chunk); err != nil {
			break
		}
	}
	fill.Close()
	// The entry fills the memory file's page and needs two more.
	_, err = s.Write(ctx, "web", strings.Repeat("a long fact ", 1000))
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Write on a full disk: %v, want ENOSPC", err)
	}
	if got := readFile(t, dir); got != before {
		t.Fatalf("the file changed: %d bytes, want the %d it had", len(got), len(before))
	}
	res, err := s.Search(ctx, []string{"fact", "disk"}, false, 10)
	if err != nil || res.Total != 1 || res.Stats.Unterminated != 0 {
		t.Fatalf("after the failed write: %+v, %v", res, err)
	}
	// Space freed: writing works again.
	os.Remove(filepath.Join(dir, "filler"))
	if _, err := s.Write(ctx, "web", "written after space was freed"); err != nil {
		t.Fatal(err)
	}
}

// TestIndexMemory checks what the index of a 100,000-entry file holds:
// at most 1.5 times the file, by the capacity of its slices.
func TestIndexMemory(t *testing.T) {
	s, dir := newStore(t)
	bigFile(t, dir, 100000)
	if _, err := s.Search(context.Background(), []string{"needle"}, false, 15); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, Path))
	if err != nil {
		t.Fatal(err)
	}
	ratio := float64(s.idx.bytes()) / float64(fi.Size())
	t.Logf("index %d bytes for a %d-byte file: %.2fx", s.idx.bytes(), fi.Size(), ratio)
	if ratio > 1.5 {
		t.Errorf("the index holds %.2fx the file, more than 1.5x", ratio)
	}
}
