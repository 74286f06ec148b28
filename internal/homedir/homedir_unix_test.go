//go:build unix

package homedir

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestPrepareCreatesAPrivateFolder(t *testing.T) {
	base := t.TempDir()
	got, err := Prepare(filepath.Join(base, "a", "home"), nil)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(got)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("HOME %s: %v, %v", got, fi, err)
	}
	// A second start finds the folder it made and keeps it.
	if again, err := Prepare(got, nil); err != nil || again != got {
		t.Fatalf("second Prepare: %q, %v", again, err)
	}
}

func TestPrepareRefuses(t *testing.T) {
	other := uint32(os.Geteuid() + 4242)
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string) // makes dir/home
		root  bool                           // needs root (chown to another user)
		want  string
	}{
		{name: "world-writable", want: "writable by group or others (mode 0777)", setup: func(t *testing.T, dir string) {
			mkdir(t, filepath.Join(dir, "home"), 0o777)
		}},
		{name: "group-writable", want: "writable by group or others (mode 0770)", setup: func(t *testing.T, dir string) {
			mkdir(t, filepath.Join(dir, "home"), 0o770)
		}},
		{name: "symlink to a good folder", want: "is a symbolic link", setup: func(t *testing.T, dir string) {
			mkdir(t, filepath.Join(dir, "real"), 0o700)
			symlink(t, filepath.Join(dir, "real"), filepath.Join(dir, "home"))
		}},
		{name: "dangling symlink", want: "is a symbolic link", setup: func(t *testing.T, dir string) {
			symlink(t, filepath.Join(dir, "nowhere"), filepath.Join(dir, "home"))
		}},
		{name: "file", want: "is not a folder", setup: func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "home"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "another owner", root: true, want: "belongs to uid", setup: func(t *testing.T, dir string) {
			mkdir(t, filepath.Join(dir, "home"), 0o700)
			chown(t, filepath.Join(dir, "home"), other)
		}},
		{name: "parent writable by others", want: "without the sticky bit", setup: func(t *testing.T, dir string) {
			mkdir(t, filepath.Join(dir, "shared"), 0o777)
		}},
		{name: "parent of another owner", root: true, want: "a parent of the HOME folder, belongs to uid", setup: func(t *testing.T, dir string) {
			mkdir(t, filepath.Join(dir, "shared"), 0o755)
			chown(t, filepath.Join(dir, "shared"), other)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.root && os.Geteuid() != 0 {
				t.Skip("needs root to give a folder to another user")
			}
			dir := t.TempDir()
			tc.setup(t, dir)
			target := filepath.Join(dir, "home")
			if strings.HasPrefix(tc.name, "parent") {
				target = filepath.Join(dir, "shared", "home")
			}
			before := snapshot(t, dir)
			_, err := Prepare(target, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Prepare = %v, want an error with %q", err, tc.want)
			}
			if after := snapshot(t, dir); after != before {
				t.Errorf("a refused folder was changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// TestPrepareForAnotherUser runs as root: a folder the service creates, or
// one root made beforehand, is given to the account commands run as; one
// a third user made is refused, not taken over.
func TestPrepareForAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	u := &User{Uid: 4243, Gid: 4243}
	dir := t.TempDir()
	got, err := Prepare(filepath.Join(dir, "new"), u)
	if err != nil {
		t.Fatal(err)
	}
	if uid := owner(t, got); uid != u.Uid {
		t.Errorf("created HOME belongs to %d, want %d", uid, u.Uid)
	}
	mkdir(t, filepath.Join(dir, "byroot"), 0o700)
	if got, err := Prepare(filepath.Join(dir, "byroot"), u); err != nil || owner(t, got) != u.Uid {
		t.Errorf("a folder root made was not given to the user: %v", err)
	}
	mkdir(t, filepath.Join(dir, "bythird"), 0o700)
	chown(t, filepath.Join(dir, "bythird"), 4244)
	if _, err := Prepare(filepath.Join(dir, "bythird"), u); err == nil || !strings.Contains(err.Error(), "belongs to uid 4244") {
		t.Errorf("a third user's folder was accepted: %v", err)
	}
	if uid := owner(t, filepath.Join(dir, "bythird")); uid != 4244 {
		t.Errorf("a third user's folder was taken over: owner %d", uid)
	}
}

// TestPrepareFollowsParentLinks accepts a parent reached through a link
// (as /tmp is on macOS) and returns the resolved path.
func TestPrepareFollowsParentLinks(t *testing.T) {
	dir := t.TempDir()
	mkdir(t, filepath.Join(dir, "real"), 0o755)
	symlink(t, filepath.Join(dir, "real"), filepath.Join(dir, "link"))
	got, err := Prepare(filepath.Join(dir, "link", "home"), nil)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := filepath.EvalSymlinks(filepath.Join(dir, "real"))
	if got != filepath.Join(want, "home") {
		t.Errorf("got %s, want %s", got, filepath.Join(want, "home"))
	}
}

func mkdir(t *testing.T, p string, mode os.FileMode) {
	t.Helper()
	if err := os.Mkdir(p, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil { // past the umask
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, p string) {
	t.Helper()
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}

func chown(t *testing.T, p string, uid uint32) {
	t.Helper()
	if err := os.Lchown(p, int(uid), int(uid)); err != nil {
		t.Fatal(err)
	}
}

func owner(t *testing.T, p string) uint32 {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Uid
}

// snapshot describes every entry under dir: name, mode and owner.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		fmt.Fprintf(&b, "%s %s uid %d; ", p, fi.Mode(), st.Uid)
		return nil
	})
	return b.String()
}
