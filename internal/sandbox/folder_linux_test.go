package sandbox

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// folderPlaces are where a fixture's workspace is tried: in the test's
// temporary folder (which bubblewrap covers with each command's own /tmp
// anyway); in /opt, a system folder Landlock grants read-only to every
// command; in /srv, which bubblewrap shows like the rest of the system.
// Only the private paths of a folder's sandbox keep the workspace around
// the folder out of reach in the last two. env names a folder there that
// the account a re-run test binary runs as may write, which the run that
// started it made: an unprivileged account cannot make one itself.
var folderPlaces = []struct{ name, dir, env string }{
	{"tmp", "", ""},
	{"in-opt", "/opt", "TOOLSVC_TEST_DIR_IN_OPT"},
	{"in-srv", "/srv", "TOOLSVC_TEST_DIR_IN_SRV"},
}

// folderFixture is a workspace holding two keys' folders, tenants/alice
// and tenants/bob, a HOME shared by commands without a folder holding a
// HOME for each folder, and a private data folder.
type folderFixture struct {
	base, ws, alice, bob, home, aliceHome, bobHome, data string
}

// Files the fixture plants, which bob's commands must never read.
const (
	aliceSecret = "ALICE-SECRET"
	aliceRC     = "ALICE-HOME-RC"
	topSecret   = "WORKSPACE-TOP-SECRET"
	sharedHome  = "SHARED-HOME-FILE"
	auditRecord = "AUDIT-RECORD"
)

// newFolderFixture makes the fixture in base. With user, the keys' folders
// and the HOMEs belong to that account, as the service makes them for
// TOOLSVC_EXEC_USER: its permissions then keep out no command of any key.
func newFolderFixture(t *testing.T, base string, user *User) folderFixture {
	t.Helper()
	f := folderFixture{base: base, ws: filepath.Join(base, "ws"), home: filepath.Join(base, "home"), data: filepath.Join(base, "data")}
	f.alice = filepath.Join(f.ws, "tenants", "alice")
	f.bob = filepath.Join(f.ws, "tenants", "bob")
	f.aliceHome = filepath.Join(f.home, "tenants%2Falice")
	f.bobHome = filepath.Join(f.home, "tenants%2Fbob")
	// As the workspace makes keys' folders: the folders above them
	// reachable, the folders themselves private to their owner, which
	// does not keep out commands run as that owner: the sandbox must.
	for d, mode := range map[string]os.FileMode{
		f.ws: 0o755, filepath.Join(f.ws, "tenants"): 0o711, f.alice: 0o700, f.bob: 0o700,
		f.home: 0o700, f.aliceHome: 0o700, f.bobHome: 0o700, f.data: 0o700,
	} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, mode); err != nil {
			t.Fatal(err)
		}
	}
	for p, c := range map[string]string{
		filepath.Join(f.alice, "x"):            aliceSecret,
		filepath.Join(f.ws, "top.txt"):         topSecret,
		filepath.Join(f.aliceHome, ".bashrc"):  aliceRC,
		filepath.Join(f.home, "shared.txt"):    sharedHome,
		filepath.Join(f.data, "audit.json"):    auditRecord,
		filepath.Join(f.bobHome, ".gitconfig"): "[user]\n",
	} {
		if err := os.WriteFile(p, []byte(c), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if user != nil {
		for _, d := range []string{f.alice, f.bob, f.home} {
			err := filepath.WalkDir(d, func(p string, _ os.DirEntry, err error) error {
				if err != nil {
					return err
				}
				return os.Lchown(p, int(user.Uid), int(user.Gid))
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	return f
}

// folderBase returns a fresh folder for a fixture in the place dir (see
// folderPlaces): "" is the test's temporary folder.
func folderBase(t *testing.T, dir, env string) string {
	t.Helper()
	if dir == "" {
		d := t.TempDir()
		// Reachable by the account commands may run as.
		for _, p := range []string{filepath.Dir(d), d} {
			if err := os.Chmod(p, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	parent := os.Getenv(env)
	if parent == "" {
		parent = dir
	}
	d, err := os.MkdirTemp(parent, "toolsvc-folder-test-")
	if err != nil {
		t.Skipf("no folder can be made in %s here (%v): the workspace inside a system folder is not tried", parent, err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// runInFolder runs script with sh inside s, in dir with HOME home, as exec
// starts commands, and returns its combined output.
func runInFolder(t *testing.T, s *Sandbox, dir, home, script string) string {
	t.Helper()
	tmp := tempFor(t, s)
	path, args, childTmp := s.Command(tmp, []string{"/bin/sh", "-c", script})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "TMPDIR=" + childTmp}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	c, err := s.StartContext(ctx, cmd, tmp)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	c.Wait()
	return out.String()
}

// TestFolderSandbox: a command in bob's folder's sandbox can neither read,
// list, write nor reach through a link its neighbour alice's folder, the
// workspace around it, the HOME shared by commands without a folder nor
// alice's HOME, wherever the workspace is (in a system folder Landlock
// grants too), whether commands run as the service's account or, for a
// root service, as another (TOOLSVC_EXEC_USER); it works in its own
// folder and HOME.
func TestFolderSandbox(t *testing.T) {
	users := []*User{nil}
	if os.Geteuid() == 0 {
		users = append(users, &User{Name: "nobody", Uid: 65534, Gid: 65534})
	}
	for _, mode := range []Mode{Landlock, Bwrap} {
		for _, place := range folderPlaces {
			for _, user := range users {
				name := string(mode) + "/" + place.name
				if user != nil {
					name += "/as-" + user.Name
				}
				t.Run(name, func(t *testing.T) {
					testFolderSandbox(t, mode, place.dir, place.env, user)
				})
			}
		}
	}
}

func testFolderSandbox(t *testing.T, mode Mode, dir, env string, user *User) {
	f := newFolderFixture(t, folderBase(t, dir, env), user)
	parent := newForTest(t, mode, Options{Workspace: f.ws, Private: []string{f.data}, Writable: []string{f.home}, User: user})
	t.Cleanup(parent.Close)
	s, err := parent.For(f.bob, f.bobHome)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := parent.For(f.bob, f.bobHome); err != nil || again != s {
		t.Errorf("For made another sandbox for the same folder: %p, %p, %v", s, again, err)
	}
	if s.Mode() != mode {
		t.Errorf("folder's sandbox mode = %s, want %s", s.Mode(), mode)
	}
	checkFolderConfined(t, s, f)
}

// checkFolderConfined runs bob's attempts on alice and the workspace in s,
// bob's folder's sandbox, and checks both what they printed and what is on
// the disk afterwards.
func checkFolderConfined(t *testing.T, s *Sandbox, f folderFixture) {
	t.Helper()
	denied := []struct {
		name, script string
		leaks        []string // none may appear in the output
	}{
		{"cat neighbour", "cat ../alice/x", []string{aliceSecret}},
		{"list parent", "ls -a ..", []string{"alice"}},
		{"list workspace", "ls -a ../..", []string{"top.txt", "alice"}},
		{"list neighbour", "ls -a ../alice", []string{"x"}},
		{"cat workspace file", "cat ../../top.txt", []string{topSecret}},
		{"cat absolute", "cat " + filepath.Join(f.alice, "x"), []string{aliceSecret}},
		{"cat through /proc cwd", "cat /proc/self/cwd/../alice/x", []string{aliceSecret}},
		{"relative link", "ln -s ../alice a; cat a/x; ls a", []string{aliceSecret, "x\n"}},
		{"absolute link", "ln -s " + f.alice + " b; cat b/x", []string{aliceSecret}},
		{"hard link", "ln " + filepath.Join(f.alice, "x") + " h; cat h", []string{aliceSecret}},
		{"find from root", "cd /; find " + f.ws + " -name x", []string{"alice"}},
		{"grep the workspace", "grep -r SECRET " + f.ws, []string{aliceSecret, topSecret}},
		{"shared HOME", "ls -a " + f.home + "; cat " + filepath.Join(f.home, "shared.txt"), []string{sharedHome, "alice"}},
		{"neighbour's HOME", "cat " + filepath.Join(f.aliceHome, ".bashrc"), []string{aliceRC}},
		{"private data", "cat " + filepath.Join(f.data, "audit.json"), []string{auditRecord}},
		{"write neighbour", "echo hi > ../alice/y", nil},
		{"write absolute", "echo hi > " + filepath.Join(f.alice, "y2"), nil},
		{"write through link", "ln -s ../alice c; echo hi > c/y3", nil},
		{"remove neighbour's file", "rm -f ../alice/x " + filepath.Join(f.alice, "x"), nil},
		{"rename neighbour", "mv ../alice ../gone; mv " + f.alice + " " + filepath.Join(f.ws, "gone2"), nil},
		{"new neighbour", "mkdir ../carol; mkdir " + filepath.Join(f.ws, "tenants", "dave"), nil},
		{"write workspace", "echo hi > ../../top2.txt; echo hi > " + filepath.Join(f.ws, "top3.txt"), nil},
		{"plant in neighbour's HOME", "echo evil >> " + filepath.Join(f.aliceHome, ".bashrc"), nil},
		{"plant in shared HOME", "echo evil > " + filepath.Join(f.home, ".profile"), nil},
	}
	for _, c := range denied {
		out := runInFolder(t, s, f.bob, f.bobHome, c.script)
		for _, leak := range c.leaks {
			if strings.Contains(out, leak) {
				t.Errorf("%s: %q leaked to bob's command (%s):\n%s", c.name, leak, c.script, out)
			}
		}
	}
	for _, p := range []string{
		filepath.Join(f.alice, "y"), filepath.Join(f.alice, "y2"), filepath.Join(f.alice, "y3"),
		filepath.Join(f.ws, "tenants", "gone"), filepath.Join(f.ws, "gone2"),
		filepath.Join(f.ws, "tenants", "carol"), filepath.Join(f.ws, "tenants", "dave"),
		filepath.Join(f.ws, "top2.txt"), filepath.Join(f.ws, "top3.txt"), filepath.Join(f.home, ".profile"),
	} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("bob's command made %s", p)
		}
	}
	if b, err := os.ReadFile(filepath.Join(f.alice, "x")); err != nil || string(b) != aliceSecret {
		t.Errorf("alice's file changed or went: %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(f.aliceHome, ".bashrc")); err != nil || string(b) != aliceRC {
		t.Errorf("alice's HOME changed: %q, %v", b, err)
	}

	// Bob's own folder and HOME work, and what he writes lands there.
	if out := runInFolder(t, s, f.bob, f.bobHome, `echo ok > mine && cat mine && echo h > "$HOME/h" && cat "$HOME/.gitconfig" && mkdir -p sub/deeper && cd sub/deeper && pwd`); !strings.Contains(out, "ok\n[user]\n"+filepath.Join(f.bob, "sub", "deeper")) {
		t.Errorf("bob's own folder or HOME does not work:\n%s", out)
	}
	for p, want := range map[string]string{filepath.Join(f.bob, "mine"): "ok\n", filepath.Join(f.bobHome, "h"): "h\n"} {
		if b, err := os.ReadFile(p); err != nil || string(b) != want {
			t.Errorf("%s: %q, %v; want %q", p, b, err, want)
		}
	}
}

// TestFolderSandboxNeedsConfinement: without a file-system sandbox (mode
// None) nothing could keep a command in its folder: For refuses rather
// than hand out a sandbox that runs it unconfined.
func TestFolderSandboxNeedsConfinement(t *testing.T) {
	f := newFolderFixture(t, t.TempDir(), nil)
	s := newForTest(t, None, Options{Workspace: f.ws})
	t.Cleanup(s.Close)
	got, err := s.For(f.bob)
	if !errors.Is(err, ErrFolderUnconfined) || got != nil {
		t.Fatalf("For in mode none: %v, %v; want ErrFolderUnconfined", got, err)
	}
	if !strings.Contains(err.Error(), "needs a sandbox that confines files") {
		t.Errorf("the error does not say why: %v", err)
	}
}

// TestFolderSandboxRefusesWorkspaceOrAbove: a folder's sandbox hides the
// workspace, which it could not do for the workspace itself or a folder
// holding it; a relative path is refused too.
func TestFolderSandboxRefusesWorkspaceOrAbove(t *testing.T) {
	f := newFolderFixture(t, t.TempDir(), nil)
	s := newForTest(t, Landlock, Options{Workspace: f.ws})
	t.Cleanup(s.Close)
	for _, ws := range []string{f.ws, f.base, "/", "tenants/bob"} {
		if got, err := s.For(ws); err == nil {
			t.Errorf("For(%s) = %p, want an error", ws, got)
		}
	}
}

// TestFolderSandboxClosedWithParent: the sandboxes For made are closed
// with the sandbox that made them, and none is made after.
func TestFolderSandboxClosedWithParent(t *testing.T) {
	f := newFolderFixture(t, t.TempDir(), nil)
	s := newForTest(t, Landlock, Options{Workspace: f.ws})
	b, err := s.For(f.bob)
	if err != nil {
		t.Fatal(err)
	}
	if out := runInFolder(t, b, f.bob, f.bobHome, "echo ok"); out != "ok\n" {
		t.Fatalf("bob's sandbox: %q", out)
	}
	s.Close()
	if m := s.folders.m.Load(); m != nil {
		t.Errorf("the folders' sandboxes are still kept after Close: %d", len(*m))
	}
	if _, err := s.For(f.alice); err == nil {
		t.Errorf("For made a sandbox after Close")
	}
}

// TestPrivateInsideLeavesFolderVisible: with mounts of its own, a command
// gets private paths in granted folders covered by a mount, except where
// one holds the workspace or a writable folder (the whole workspace,
// private to a key's folder inside it, in a system folder): a mount there
// would hide the folder itself, so that one is carved out of the rules.
func TestPrivateInsideLeavesFolderVisible(t *testing.T) {
	const ws = "/usr/lib/toolsvc-test/ws"
	tests := []struct {
		name              string
		ws                string
		writable, private []string
		cover, carve      []string
	}{
		{"private beside the workspace", ws + "/tenants/bob", nil, []string{"/usr/lib/toolsvc-test/data"}, []string{"/usr/lib/toolsvc-test/data"}, nil},
		{"private holding the workspace", ws + "/tenants/bob", nil, []string{ws, "/usr/lib/toolsvc-test/data"}, []string{"/usr/lib/toolsvc-test/data"}, []string{ws}},
		{"private equal to the workspace", ws, nil, []string{ws}, nil, []string{ws}},
		{"private holding a writable folder", "/srv/ws/bob", []string{"/usr/lib/home/bob"}, []string{"/usr/lib/home"}, nil, []string{"/usr/lib/home"}},
		{"private holding the workspace outside granted folders", "/srv/ws/tenants/bob", nil, []string{"/srv/ws"}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Sandbox{ws: tt.ws, writable: tt.writable, private: tt.private}
			cover, carve, ok := s.privateInside()
			if !ok || !slices.Equal(cover, tt.cover) || !slices.Equal(carve, tt.carve) {
				t.Errorf("privateInside() = %v, %v, %v; want %v, %v, true", cover, carve, ok, tt.cover, tt.carve)
			}
		})
	}
	s := &Sandbox{ws: ws, private: []string{"/usr"}}
	if _, _, ok := s.privateInside(); ok {
		t.Errorf("a private system folder is covered by a mount")
	}
}

// TestFolderSandboxConcurrent: first calls for the same folders at once
// get one sandbox per folder, and the folders' sandboxes differ.
func TestFolderSandboxConcurrent(t *testing.T) {
	f := newFolderFixture(t, t.TempDir(), nil)
	s := newForTest(t, Landlock, Options{Workspace: f.ws})
	t.Cleanup(s.Close)
	folders := []string{f.alice, f.bob}
	got := make([][]*Sandbox, len(folders))
	for i := range got {
		got[i] = make([]*Sandbox, 8)
	}
	var wg sync.WaitGroup
	for i, dir := range folders {
		for j := range got[i] {
			wg.Go(func() {
				b, err := s.For(dir)
				if err != nil {
					t.Error(err)
				}
				got[i][j] = b
			})
		}
	}
	wg.Wait()
	for i := range folders {
		for _, b := range got[i] {
			if b == nil || b != got[i][0] {
				t.Fatalf("%s: several sandboxes for one folder: %p, %p", folders[i], b, got[i][0])
			}
		}
	}
	if got[0][0] == got[1][0] {
		t.Errorf("alice and bob share a sandbox")
	}
}
