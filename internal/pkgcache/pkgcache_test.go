//go:build unix

package pkgcache

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/countbot/toolsvc/internal/homedir"
)

// newCaches returns caches below a fresh data folder.
func newCaches(t *testing.T, owner *homedir.User) (*Caches, string) {
	t.Helper()
	data, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(data, "mcp-cache")
	c, err := New(root, owner)
	if err != nil {
		t.Fatal(err)
	}
	return c, root
}

func TestEscape(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"memory", "memory"},
		{"server-everything_2", "server-everything_2"},
		{".", "%2E"},
		{"..", "%2E%2E"},
		{"../etc", "%2E%2E%2Fetc"},
		{"tenants/alice", "tenants%2Falice"},
		{"ci.bot", "ci%2Ebot"},
		{"%2E", "%252E"},
		{"a b\x00", "a%20b%00"},
		{"é", "%C3%A9"},
		{"", ""},
	} {
		if got := escape(tc.in); got != tc.want {
			t.Errorf("escape(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestFolders: each server, and each key's instance of a server, gets a
// folder of its own, mode 0700, the same one at every call, none inside
// another's, whatever the names hold.
func TestFolders(t *testing.T) {
	c, root := newCaches(t, nil)
	cases := []struct {
		name     string
		get      func() (*Folder, error)
		want     string // below root
		inFolder string // the folder of the server's own, holding the marker
	}{
		{"server", func() (*Folder, error) { return c.Server("memory") }, "memory/server", "memory"},
		{"another server", func() (*Folder, error) { return c.Server("everything") }, "everything/server", "everything"},
		{"key", func() (*Folder, error) { return c.Key("notes", "alice") }, "notes/key-alice", "notes"},
		{"another key", func() (*Folder, error) { return c.Key("notes", "bob") }, "notes/key-bob", "notes"},
		{"no key", func() (*Folder, error) { return c.Key("notes", "") }, "notes/key-", "notes"},
		{"the per_key server's listing instance", func() (*Folder, error) { return c.Server("notes") }, "notes/server", "notes"},
		{"a key name with a dot", func() (*Folder, error) { return c.Key("notes", "ci.bot") }, "notes/key-ci%2Ebot", "notes"},
		{"a name that climbs", func() (*Folder, error) { return c.Server("..") }, "%2E%2E/server", "%2E%2E"},
		{"a key that climbs", func() (*Folder, error) { return c.Key("notes", "../../memory/server") }, "notes/key-%2E%2E%2F%2E%2E%2Fmemory%2Fserver", "notes"},
	}
	seen := map[string]string{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := tc.get()
			if err != nil {
				t.Fatal(err)
			}
			if want := filepath.Join(root, filepath.FromSlash(tc.want)); f.Dir != want {
				t.Errorf("Dir = %s, want %s", f.Dir, want)
			}
			if want := filepath.Join(root, tc.inFolder, filepath.Base(f.Dir)+".starting"); f.marker != want {
				t.Errorf("marker = %s, want %s", f.marker, want)
			}
			for _, d := range []string{root, filepath.Dir(f.Dir), f.Dir} {
				if fi, err := os.Lstat(d); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
					t.Errorf("%s: %v, %v; want a folder of mode 0700", d, fi, err)
				}
			}
			again, err := tc.get()
			if err != nil || again.Dir != f.Dir {
				t.Errorf("a second call: %v, %v; want %s", again, err, f.Dir)
			}
			if other, ok := seen[f.Dir]; ok {
				t.Errorf("%s shares %s with %s", tc.name, f.Dir, other)
			}
			for d := range seen {
				if strings.HasPrefix(f.Dir, d+"/") || strings.HasPrefix(d, f.Dir+"/") {
					t.Errorf("%s and %s: one holds the other", f.Dir, d)
				}
			}
			seen[f.Dir] = tc.name
		})
	}
	if _, err := c.Server(""); err == nil {
		t.Error("a server without a name got a cache")
	}
}

// TestFoldersRefused: a cache, a server's folder or the root that is a
// symbolic link (planted by whoever could write there) or writable by
// others is refused rather than used, and nothing is made through it.
func TestFoldersRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plant func(t *testing.T, root, elsewhere string)
		want  string
	}{
		{"cache is a link", func(t *testing.T, root, elsewhere string) {
			mkdir(t, filepath.Join(root, "memory"), 0o700)
			symlink(t, elsewhere, filepath.Join(root, "memory", "server"))
		}, "symbolic link"},
		{"server's folder is a link", func(t *testing.T, root, elsewhere string) {
			symlink(t, elsewhere, filepath.Join(root, "memory"))
		}, "symbolic link"},
		{"root is a link", func(t *testing.T, root, elsewhere string) {
			symlink(t, elsewhere, root)
		}, "symbolic link"},
		{"cache is writable by others", func(t *testing.T, root, _ string) {
			mkdir(t, filepath.Join(root, "memory", "server"), 0o777)
		}, "writable by group or others"},
		{"cache is a file", func(t *testing.T, root, _ string) {
			mkdir(t, filepath.Join(root, "memory"), 0o700)
			if err := os.WriteFile(filepath.Join(root, "memory", "server"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "not a folder"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, root := newCaches(t, nil)
			elsewhere := t.TempDir()
			tc.plant(t, root, elsewhere)
			f, err := c.Server("memory")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Server: %v, %v; want an error saying %q", f, err, tc.want)
			}
			if entries, _ := os.ReadDir(elsewhere); len(entries) > 0 {
				t.Errorf("something was made through the link: %v", entries)
			}
		})
	}
}

// TestBeginAfterCutShort: a start that ended (Done) leaves npx's
// installs alone; one cut short has them removed at the next start,
// npm's downloaded packages kept, and nothing outside the cache removed
// through a link the server left.
func TestBeginAfterCutShort(t *testing.T) {
	c, _ := newCaches(t, nil)
	f, err := c.Server("everything")
	if err != nil {
		t.Fatal(err)
	}
	npx := filepath.Join(f.Dir, "npm", "_npx", "1234abcd", "node_modules", "pkg")
	cacache := filepath.Join(f.Dir, "npm", "_cacache", "content-v2")
	outside := t.TempDir()
	for _, d := range []string{npx, cacache} {
		mkdir(t, d, 0o700)
	}
	writeFile(t, filepath.Join(outside, "keep"))
	symlink(t, outside, filepath.Join(f.Dir, "npm", "_npx", "link"))

	if err := f.Begin(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(f.marker); err != nil {
		t.Fatalf("no marker while starting: %v", err)
	}
	f.Done()
	if _, err := os.Lstat(f.marker); err == nil {
		t.Fatal("the marker outlived Done")
	}
	if err := f.Begin(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(npx); err != nil {
		t.Fatalf("npx's install went after a start that ended well: %v", err)
	}
	// Cut short: no Done.
	if err := f.Begin(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(f.Dir, "npm", "_npx")); err == nil {
		t.Error("npx's installs are still there after a start cut short")
	}
	if _, err := os.Stat(cacache); err != nil {
		t.Errorf("npm's downloaded packages went too: %v", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "keep")); err != nil {
		t.Errorf("a file outside the cache went through a link: %v", err)
	}

	// The server replaced npm by a link out of its cache: the removal
	// does not follow it.
	f.Done()
	if err := os.RemoveAll(filepath.Join(f.Dir, "npm")); err != nil {
		t.Fatal(err)
	}
	mkdir(t, filepath.Join(outside, "_npx"), 0o700)
	symlink(t, outside, filepath.Join(f.Dir, "npm"))
	if err := f.Begin(); err != nil {
		t.Fatal(err)
	}
	if err := f.Begin(); err == nil {
		t.Error("removing through a link out of the cache succeeded")
	}
	if _, err := os.Stat(filepath.Join(outside, "_npx")); err != nil {
		t.Errorf("a folder outside the cache went through a link: %v", err)
	}
}

func TestEnv(t *testing.T) {
	got := Env("/data/mcp-cache/memory/server")
	want := []string{
		"npm_config_cache=/data/mcp-cache/memory/server/npm",
		"XDG_CACHE_HOME=/data/mcp-cache/memory/server",
		"BUN_INSTALL_CACHE_DIR=/data/mcp-cache/memory/server/bun",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Env = %q, want %q", got, want)
	}
}

// TestOwner: as root, for servers run as another account, each cache
// belongs to that account and the service's folders above it let it
// through without showing what they hold; a data folder it cannot pass
// is refused with the fix.
func TestOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("NOT TESTED: giving a folder to another account needs root")
	}
	nobody := &homedir.User{Uid: 65534, Gid: 65534}
	data, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(data, "mcp-cache")
	// t.TempDir's two folders are the test's own, mode 0700: the account
	// could not pass them. They are opened as an operator would.
	for _, d := range []string{filepath.Dir(data), data} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	c, err := New(root, nobody)
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.Key("notes", "alice")
	if err != nil {
		t.Fatal(err)
	}
	for d, want := range map[string]os.FileMode{root: 0o711, filepath.Dir(f.Dir): 0o711, f.Dir: 0o700} {
		fi, err := os.Lstat(d)
		if err != nil {
			t.Fatal(err)
		}
		uid := fi.Sys().(*syscall.Stat_t).Uid
		wantUid := uint32(0)
		if d == f.Dir {
			wantUid = nobody.Uid
		}
		if fi.Mode().Perm() != want || uid != wantUid {
			t.Errorf("%s: mode %04o uid %d, want %04o uid %d", d, fi.Mode().Perm(), uid, want, wantUid)
		}
	}

	if err := os.Chmod(data, 0o750); err != nil {
		t.Fatal(err)
	}
	if _, err := New(root, nobody); err == nil || !strings.Contains(err.Error(), "chmod o+x "+data) {
		t.Errorf("New with a data folder the account cannot pass: %v", err)
	}
}

func mkdir(t *testing.T, d string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(d, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, mode); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(link), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, p string) {
	t.Helper()
	if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
}
