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

// TestFolderConfines: a key's own folder is the root of every path it
// resolves, even in a workspace that is not restricted: its neighbour,
// the workspace above it and the host are out of reach by relative path,
// absolute path and symbolic link, for reading and for writing.
func TestFolderConfines(t *testing.T) {
	for _, restrict := range []bool{true, false} {
		base := t.TempDir()
		w, err := Open(filepath.Join(base, "ws"), restrict)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		alice, err := w.Folder("tenants/alice")
		if err != nil {
			t.Fatal(err)
		}
		bob, err := w.Folder("tenants/bob")
		if err != nil {
			t.Fatal(err)
		}
		if err := alice.WriteString(mustResolve(t, alice, "x.txt"), "alice's", false); err != nil {
			t.Fatal(err)
		}
		aliceX := filepath.Join(w.Dir(), "tenants", "alice", "x.txt")
		if data, err := os.ReadFile(aliceX); err != nil || string(data) != "alice's" {
			t.Fatalf("alice's file on disk: %q, %v", data, err)
		}
		if err := os.Symlink("../alice", filepath.Join(bob.Dir(), "toalice")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(aliceX, filepath.Join(bob.Dir(), "abs")); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"../alice/x.txt", aliceX, "/etc/passwd", "..", "../..", "toalice/x.txt", "abs"} {
			path, err := bob.Resolve(p)
			if err == nil {
				_, err = path.Stat()
			}
			var te *toolerr.Error
			if !errors.As(err, &te) || te.Code != toolerr.PathDenied {
				t.Errorf("restrict=%v: bob resolving %q: %v, want %s", restrict, p, err, toolerr.PathDenied)
			}
		}
		if err := bob.WriteString(bob.mustPath(t, "abs"), "bob's", false); err == nil {
			t.Errorf("restrict=%v: bob wrote through a link to alice's file", restrict)
		}
		if data, _ := os.ReadFile(aliceX); string(data) != "alice's" {
			t.Errorf("alice's file is now %q", data)
		}
		if !bob.Restricted() {
			t.Error("a key's own folder is not restricted")
		}
	}
}

func (w *Workspace) mustPath(t *testing.T, p string) Path {
	t.Helper()
	return Path{Root: w.Root(), Name: p, Display: p}
}

// TestFolderPrivate: the folder is made with mode 0700 (and made so again
// when it exists with a wider one), the folders above it with 0711; one
// Workspace serves each folder.
func TestFolderPrivate(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Windows has no Unix modes")
	}
	w, err := Open(filepath.Join(t.TempDir(), "ws"), true)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := os.MkdirAll(filepath.Join(w.Dir(), "team"), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(w.Dir(), "team"), 0o777); err != nil {
		t.Fatal(err)
	}
	for rel, want := range map[string]os.FileMode{"tenants/alice": 0o700, "team": 0o700} {
		f, err := w.Folder(rel)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(filepath.Join(w.Dir(), rel))
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, %v; want %v", rel, fi.Mode().Perm(), err, want)
		}
		if again, _ := w.Folder(rel); again != f {
			t.Errorf("%s opened twice", rel)
		}
	}
	if fi, err := os.Stat(filepath.Join(w.Dir(), "tenants")); err != nil || fi.Mode().Perm() != 0o711 {
		t.Errorf("tenants: %v, %v; want 0711", fi.Mode().Perm(), err)
	}
	if self, _ := w.Folder(""); self != w {
		t.Error(`Folder("") is not the workspace itself`)
	}
	for _, bad := range []string{"../x", "/abs", "a/../b", "a/"} {
		if _, err := w.Folder(bad); err == nil {
			t.Errorf("Folder(%q) accepted", bad)
		}
	}
}

// TestFolderReplacedByLink: a folder swapped for a symbolic link that
// leads out of the workspace (by a key that sees the whole workspace) is
// not followed: the key's calls find their folder unavailable instead of
// working on the link's target.
func TestFolderReplacedByLink(t *testing.T) {
	base := t.TempDir()
	w, err := Open(filepath.Join(base, "ws"), true)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	bob, err := w.Folder("tenants/bob")
	if err != nil {
		t.Fatal(err)
	}
	bob.pathEvery = time.Nanosecond
	outside := filepath.Join(base, "outside")
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(bob.Dir(), filepath.Join(base, "old-bob")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(w.Dir(), "tenants", "bob")); err != nil {
		t.Fatal(err)
	}
	p, err := bob.Resolve("secret")
	if err == nil {
		_, err = p.Stat()
	}
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("bob's folder swapped for a link out: %v, want unavailable", err)
	}
}
