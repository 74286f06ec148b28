package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// waitSpare waits until a thread confined ahead is ready, and reports
// whether one became ready.
func waitSpare(s *Sandbox) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		s.spareMu.Lock()
		ready := s.spare != nil
		s.spareMu.Unlock()
		if ready {
			return true
		}
	}
	return false
}

// TestSpareIsUsed: once a command has run, the next one starts from a
// thread confined ahead, and takes it.
func TestSpareIsUsed(t *testing.T) {
	for _, mode := range []Mode{None, Landlock, Bwrap} {
		t.Run(string(mode), func(t *testing.T) {
			af := newAttackFixture(t)
			s := newForTest(t, mode, Options{Workspace: af.ws})
			t.Cleanup(s.Close)
			if _, ok := s.FreshTemp(); !ok {
				t.Skipf("no temporary folder made by the sandbox here (uid %d): commands confine a thread each", os.Geteuid())
			}
			if out := runIn(t, s, af.ws, "echo first"); out != "first\n" {
				t.Fatalf("first command: %q", out)
			}
			if !waitSpare(s) {
				t.Fatal("no spare was made after the first command")
			}
			s.spareMu.Lock()
			ready := s.spare
			s.spareMu.Unlock()
			if out := runIn(t, s, af.ws, `echo x > "$TMPDIR/f" && cat "$TMPDIR/f" && echo y > ws.txt && cat ws.txt`); out != "x\ny\n" {
				t.Fatalf("command on a spare: %q", out)
			}
			s.spareMu.Lock()
			defer s.spareMu.Unlock()
			if s.spare == ready {
				t.Error("the command did not take the spare that was ready")
			}
		})
	}
}

// TestSpareFollowsReplacedPaths: a path that a waiting spare's mounts or
// rules were built for is removed and made again (a private folder, a
// private file, the mount point of the commands' tmpfs). The spare's
// cover would no longer be over the new path, so the command must not
// run on it: the new private content stays unreadable, and the command
// still works.
func TestSpareFollowsReplacedPaths(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("private paths are covered by mounts only for a root service")
	}
	af := newAttackFixture(t)
	dir, file := filepath.Join(af.ws, "keys"), filepath.Join(af.ws, "token.txt")
	write := func(key, token string) {
		t.Helper()
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for p, c := range map[string]string{filepath.Join(dir, "id"): key, file: token} {
			tmp := p + ".new"
			if err := os.WriteFile(tmp, []byte(c), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, p); err != nil { // a new file in the old one's place
				t.Fatal(err)
			}
		}
	}
	write("OLD-KEY", "OLD-TOKEN")
	s := newForTest(t, Landlock, Options{Workspace: af.ws, Private: []string{dir, file}})
	t.Cleanup(s.Close)
	if !s.mountns {
		t.Skipf("no private mounts here: %s", s.Describe())
	}
	runIn(t, s, af.ws, "true")
	for _, replace := range []struct {
		name string
		do   func()
	}{
		{"private file", func() { write("OLD-KEY", "NEW-TOKEN") }},
		{"private folder", func() {
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			write("NEW-KEY", "NEW-TOKEN")
		}},
		{"tmpfs mount point", func() {
			d, _ := s.FreshTemp()
			if err := os.Remove(d); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		if !waitSpare(s) {
			t.Fatal("no spare was made")
		}
		replace.do()
		out := runIn(t, s, af.ws, `cat keys/id token.txt; echo x > "$TMPDIR/t" && echo visible > ok.txt && cat ok.txt`)
		if strings.Contains(out, "NEW-") || strings.Contains(out, "OLD-") {
			t.Errorf("%s replaced: a private path's content reached the command:\n%s", replace.name, out)
		}
		if !strings.Contains(out, "visible") {
			t.Errorf("%s replaced: the command did not run as it should:\n%s", replace.name, out)
		}
	}
}

// TestMarksSeeReplacement: a marked path replaced by another file is
// seen as changed, even where the file system gives the new file the
// freed inode number of the old (ext4 does at once), since the mark holds
// the old file open.
func TestMarksSeeReplacement(t *testing.T) {
	for _, c := range []struct {
		name    string
		exists  bool
		change  func(p string) error
		changed bool
	}{
		{"untouched folder", true, func(string) error { return nil }, false},
		{"still missing", false, func(string) error { return nil }, false},
		{"made since", false, func(p string) error { return os.Mkdir(p, 0o700) }, true},
		{"removed", true, os.Remove, true},
		{"replaced by a link", true, func(p string) error {
			if err := os.Remove(p); err != nil {
				return err
			}
			return os.Symlink("/etc", p)
		}, true},
		{"replaced by a folder", true, func(p string) error {
			if err := os.Remove(p); err != nil {
				return err
			}
			return os.Mkdir(p, 0o700)
		}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "d")
			if c.exists {
				if err := os.Mkdir(p, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			marks := []fileMark{markPath(p, false)}
			defer closeMarks(marks)
			if err := c.change(p); err != nil {
				t.Fatal(err)
			}
			if got := !unchanged(marks); got != c.changed {
				t.Errorf("changed = %v, want %v", got, c.changed)
			}
		})
	}
}
