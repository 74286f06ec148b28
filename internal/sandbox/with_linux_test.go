package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// withFixture is a workspace and a private data folder holding two
// programs' own folders, mine and theirs, below a folder of the
// service's, as the service keeps the MCP servers' package caches.
type withFixture struct {
	ws, data, mine, theirs string
}

const (
	theirCache = "THEIR-CACHED-PACKAGE"
	dataRecord = "DATA-AUDIT-RECORD"
)

// newWithFixture makes the fixture in base. With user, the two folders
// belong to that account and the folders above them let it through
// without listing them (mode 0711), as the service makes them for
// TOOLSVC_EXEC_USER.
func newWithFixture(t *testing.T, base string, user *User) withFixture {
	t.Helper()
	caches := filepath.Join(base, "data", "mcp-cache")
	f := withFixture{ws: filepath.Join(base, "ws"), data: filepath.Join(base, "data"),
		mine: filepath.Join(caches, "mine"), theirs: filepath.Join(caches, "theirs")}
	for d, mode := range map[string]os.FileMode{f.ws: 0o755, f.data: 0o711, caches: 0o711, f.mine: 0o700, f.theirs: 0o700} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, mode); err != nil {
			t.Fatal(err)
		}
	}
	for p, c := range map[string]string{filepath.Join(f.theirs, "pkg.js"): theirCache, filepath.Join(f.data, "audit.json"): dataRecord} {
		if err := os.WriteFile(p, []byte(c), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if user != nil {
		for _, p := range []string{f.mine, f.theirs, filepath.Join(f.theirs, "pkg.js")} {
			if err := os.Lchown(p, int(user.Uid), int(user.Gid)); err != nil {
				t.Fatal(err)
			}
		}
	}
	return f
}

// TestWithWritable: a sandbox made by With reads and writes its own
// folder, kept inside the private data folder, and nothing else of that
// folder: not the other program's folder beside it (read, list, write,
// link), not the data folder's files, not the list of the folders; the
// sandbox it was made from reaches none of them. It holds in both modes,
// with the data folder in the test's temporary folder and in /opt, which
// Landlock grants to every command, and for a root service as another
// account (TOOLSVC_EXEC_USER).
func TestWithWritable(t *testing.T) {
	users := []*User{nil}
	if os.Geteuid() == 0 {
		users = append(users, &User{Name: "nobody", Uid: 65534, Gid: 65534})
	}
	for _, mode := range []Mode{Landlock, Bwrap} {
		for _, place := range folderPlaces[:2] {
			for _, user := range users {
				name := string(mode) + "/" + place.name
				if user != nil {
					name += "/as-" + user.Name
				}
				t.Run(name, func(t *testing.T) { testWithWritable(t, mode, place.dir, place.env, user) })
			}
		}
	}
}

func testWithWritable(t *testing.T, mode Mode, dir, env string, user *User) {
	f := newWithFixture(t, folderBase(t, dir, env), user)
	parent := newForTest(t, mode, Options{Workspace: f.ws, Private: []string{f.data}, User: user})
	t.Cleanup(parent.Close)
	s, err := parent.With(f.mine)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := parent.With(f.mine); err != nil || again != s {
		t.Errorf("With made another sandbox for the same folder: %p, %p, %v", s, again, err)
	}
	if s == parent || s.Mode() != mode {
		t.Errorf("With returned %p (mode %s) from %p, want a sandbox of its own in mode %s", s, s.Mode(), parent, mode)
	}

	// Its own folder works, and what it writes lands there.
	own := strings.ReplaceAll(`echo kept > M/npm && mkdir -p M/uv/wheels && cat M/npm && ls M`, "M", f.mine)
	if out := runInFolder(t, s, f.ws, f.ws, own); !strings.Contains(out, "kept\nnpm\nuv") {
		t.Errorf("its own folder does not work:\n%s", out)
	}
	if b, err := os.ReadFile(filepath.Join(f.mine, "npm")); err != nil || string(b) != "kept\n" {
		t.Errorf("%s: %q, %v", filepath.Join(f.mine, "npm"), b, err)
	}

	caches := filepath.Dir(f.mine)
	attempts := []struct {
		name, script string
		leaks        []string
	}{
		{"read theirs", "cat " + filepath.Join(f.theirs, "pkg.js"), []string{theirCache}},
		{"list theirs", "ls -a " + f.theirs, []string{"pkg.js"}},
		{"list the caches", "ls -a " + caches, []string{"theirs"}},
		// Under bubblewrap the data folder is an empty tmpfs holding
		// the mount point of its own folder: that path is all it shows.
		{"list the data folder", "ls -a " + f.data, []string{"audit.json"}},
		{"read the data folder", "cat " + filepath.Join(f.data, "audit.json"), []string{dataRecord}},
		{"find from mine", "find " + f.mine + "/.. " + f.data, []string{"theirs", "audit.json"}},
		{"link from mine", "ln -s " + f.theirs + " " + f.mine + "/l; cat " + f.mine + "/l/pkg.js; ln " + filepath.Join(f.theirs, "pkg.js") + " " + f.mine + "/h; cat " + f.mine + "/h", []string{theirCache}},
		{"through ..", "cat " + f.mine + "/../theirs/pkg.js", []string{theirCache}},
		{"write theirs", "echo evil > " + filepath.Join(f.theirs, "pkg.js") + "; echo evil > " + filepath.Join(f.theirs, "new.js"), nil},
		{"write beside", "mkdir " + filepath.Join(caches, "planted") + "; echo evil > " + filepath.Join(f.data, "planted"), nil},
		{"rename theirs", "mv " + f.theirs + " " + filepath.Join(caches, "gone"), nil},
	}
	for _, a := range attempts {
		out := runInFolder(t, s, f.ws, f.ws, a.script)
		for _, leak := range a.leaks {
			if strings.Contains(out, leak) {
				t.Errorf("%s: %q leaked (%s):\n%s", a.name, leak, a.script, out)
			}
		}
	}
	if b, err := os.ReadFile(filepath.Join(f.theirs, "pkg.js")); err != nil || string(b) != theirCache {
		t.Errorf("the other folder's file changed or went: %q, %v", b, err)
	}
	for _, p := range []string{filepath.Join(f.theirs, "new.js"), filepath.Join(caches, "planted"), filepath.Join(f.data, "planted"), filepath.Join(caches, "gone")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("the command made %s", p)
		}
	}

	// The sandbox it was made from (exec's commands, the other servers)
	// reaches its folder no more than the rest of the data folder.
	out := runInFolder(t, parent, f.ws, f.ws, "cat "+filepath.Join(f.mine, "npm")+"; echo evil > "+filepath.Join(f.mine, "planted")+"; ls -a "+f.mine+" 2>/dev/null")
	if strings.Contains(out, "kept") || strings.Contains(out, "\nnpm\n") {
		t.Errorf("the parent sandbox reached the folder:\n%s", out)
	}
	if _, err := os.Lstat(filepath.Join(f.mine, "planted")); err == nil {
		t.Error("the parent sandbox wrote into the folder")
	}
}

// TestWithRefusesWhatItWouldOpen: a writable folder that holds the
// workspace or a private path (the data folder itself, or /) would open
// them, and one that does not exist cannot be granted.
func TestWithRefusesWhatItWouldOpen(t *testing.T) {
	f := newWithFixture(t, t.TempDir(), nil)
	s := newForTest(t, Landlock, Options{Workspace: f.ws, Private: []string{f.data}})
	t.Cleanup(s.Close)
	for _, w := range []string{f.data, filepath.Dir(f.data), "/", f.ws, filepath.Join(f.data, "missing")} {
		if got, err := s.With(w); err == nil {
			t.Errorf("With(%s) = %p, want an error", w, got)
		}
	}
}

// TestWithUnconfined: in mode None nothing is confined, and With hands
// back the sandbox itself rather than make one that would confine no
// more.
func TestWithUnconfined(t *testing.T) {
	f := newWithFixture(t, t.TempDir(), nil)
	s := newForTest(t, None, Options{Workspace: f.ws, Private: []string{f.data}})
	t.Cleanup(s.Close)
	if got, err := s.With(f.mine); err != nil || got != s {
		t.Errorf("With in mode none: %p, %v; want %p", got, err, s)
	}
}
