package tools

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/countbot/toolsvc/internal/callinfo"
	"github.com/countbot/toolsvc/internal/homedir"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/sandbox"
	"github.com/countbot/toolsvc/internal/toolerr"
	"github.com/countbot/toolsvc/internal/workspace"
)

// The tests here give two keys folders of their own, tenants/alice and
// tenants/bob, and check that exec and the programs run through exec's
// run path work in the call's folder only, in every sandbox mode that
// confines files, with a HOME of the folder's own.

// asFolderEnv marks a run of this test binary as another identity, which
// must not start runs of its own.
const asFolderEnv = "TOOLSVC_TEST_EXEC_FOLDER_AS"

// folderDirInOptEnv names a folder in /opt the re-run may write, made for
// it by the run that started it.
const folderDirInOptEnv = "TOOLSVC_TEST_EXEC_FOLDER_IN_OPT"

// folderCtx is the context of a call whose key has folder.
func folderCtx(folder string) context.Context {
	return registry.WithCall(context.Background(), registry.Call{Tool: "exec", Facts: callinfo.Facts{Key: "k", Workspace: folder}})
}

// folderExec is exec as the service builds it with a HOME kept between
// calls, over a workspace in base.
type folderExec struct {
	e    *Exec
	ws   *workspace.Workspace
	home string // the HOME shared by calls without a folder
	sb   *sandbox.Sandbox
	opts sandbox.Options
}

func newFolderExec(t *testing.T, mode sandbox.Mode, base string) folderExec {
	t.Helper()
	ws, err := workspace.Open(filepath.Join(base, "ws"), true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	home, err := homedir.Prepare(filepath.Join(base, "home"), nil)
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(base, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	opts := sandbox.Options{Mode: mode, Workspace: ws.Dir(), Private: []string{data}, Writable: []string{home}}
	sb, err := sandbox.New(opts)
	if err != nil {
		if mode == sandbox.Bwrap && os.Getenv("CI") == "true" {
			t.Fatalf("sandbox mode %s unavailable under CI (install the bubblewrap package): %v", mode, err)
		}
		t.Skipf("SANDBOX MODE NOT TESTED: %v", err)
	}
	t.Cleanup(sb.Close)
	e := NewExec(ws, ExecOptions{Guard: execFakeGuard{"mkfs"}, Sandbox: sb, Home: home})
	t.Cleanup(e.Close)
	return folderExec{e: e, ws: ws, home: home, sb: sb, opts: opts}
}

// execIn runs command through Execute in the call of ctx.
func execIn(t *testing.T, ctx context.Context, e *Exec, command string) (string, error) {
	t.Helper()
	return runExec(t, ctx, e, map[string]any{"command": command})
}

// TestExecFolder: for each sandbox mode that confines files, with the
// workspace in the test's temporary folder and in /opt (a system folder
// Landlock grants read-only to every command), bob's commands through
// exec and through Run can neither read, list, write nor reach through a
// link alice's folder, the workspace around his, the shared HOME or
// alice's HOME, while they work in bob's folder and his own HOME, and a
// call without a folder still sees the whole workspace.
func TestExecFolder(t *testing.T) {
	places := []struct{ name, dir string }{{"tmp", ""}, {"in-opt", "/opt"}}
	for _, mode := range []sandbox.Mode{sandbox.Landlock, sandbox.Bwrap} {
		for _, place := range places {
			t.Run(string(mode)+"/"+place.name, func(t *testing.T) {
				base := t.TempDir()
				if place.dir != "" {
					parent := os.Getenv(folderDirInOptEnv)
					if parent == "" {
						parent = place.dir
					}
					d, err := os.MkdirTemp(parent, "toolsvc-exec-folder-")
					if err != nil {
						t.Skipf("no folder can be made in %s here (%v)", parent, err)
					}
					t.Cleanup(func() { os.RemoveAll(d) })
					base = d
				}
				testExecFolder(t, newFolderExec(t, mode, base))
			})
		}
	}
}

func testExecFolder(t *testing.T, fx folderExec) {
	e, ws := fx.e, fx.ws.Dir()
	alice, bob := folderCtx("tenants/alice"), folderCtx("tenants/bob")
	aliceDir, bobDir := filepath.Join(ws, "tenants", "alice"), filepath.Join(ws, "tenants", "bob")
	aliceHome, bobHome := filepath.Join(fx.home, "tenants%2Falice"), filepath.Join(fx.home, "tenants%2Fbob")

	// Alice works in her folder, with a HOME of her own that lasts.
	out, err := execIn(t, alice, e, `echo ALICE-SECRET > x && echo ALICE-RC > "$HOME/.bashrc" && pwd && echo "$HOME"`)
	if err != nil || out != aliceDir+"\n"+aliceHome+"\n" {
		t.Fatalf("alice's call: %q, %v; want her folder %s and HOME %s", out, err, aliceDir, aliceHome)
	}
	if out, err := execIn(t, alice, e, `cat "$HOME/.bashrc"`); err != nil || out != "ALICE-RC\n" {
		t.Errorf("alice's HOME did not last between her calls: %q, %v", out, err)
	}
	if err := os.WriteFile(filepath.Join(ws, "top.txt"), []byte("TOP-SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fx.home, "shared.txt"), []byte("SHARED-HOME"), 0o600); err != nil {
		t.Fatal(err)
	}

	denied := []struct {
		name, command string
		leaks         []string
	}{
		{"cat neighbour", "cat ../alice/x", []string{"ALICE-SECRET"}},
		{"list parent", "ls -a ..", []string{"alice"}},
		{"list workspace", "ls -a ../..", []string{"top.txt", "alice"}},
		{"cat workspace file", "cat ../../top.txt", []string{"TOP-SECRET"}},
		{"cat absolute", "cat " + filepath.Join(aliceDir, "x"), []string{"ALICE-SECRET"}},
		{"link", "ln -s ../alice a; cat a/x", []string{"ALICE-SECRET"}},
		{"absolute link", "ln -s " + aliceDir + " b; cat b/x", []string{"ALICE-SECRET"}},
		{"find", "cd /; find " + ws + " -name x", []string{"alice"}},
		{"shared HOME", "ls -a " + fx.home + "; cat " + filepath.Join(fx.home, "shared.txt"), []string{"SHARED-HOME", "alice"}},
		{"alice's HOME", "cat " + filepath.Join(aliceHome, ".bashrc"), []string{"ALICE-RC"}},
		{"write neighbour", "echo hi > ../alice/y", nil},
		{"write absolute", "echo hi > " + filepath.Join(aliceDir, "y2"), nil},
		{"write through link", "ln -s ../alice c; echo hi > c/y3", nil},
		{"plant in alice's HOME", "echo evil >> " + filepath.Join(aliceHome, ".bashrc"), nil},
	}
	for _, c := range denied {
		out, err := execIn(t, bob, e, c.command)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		for _, leak := range c.leaks {
			if strings.Contains(out, leak) {
				t.Errorf("%s: %q leaked to bob's command (%s):\n%s", c.name, leak, c.command, out)
			}
		}
	}
	for _, p := range []string{filepath.Join(aliceDir, "y"), filepath.Join(aliceDir, "y2"), filepath.Join(aliceDir, "y3")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("bob's command made %s", p)
		}
	}
	if b, err := os.ReadFile(filepath.Join(aliceHome, ".bashrc")); err != nil || string(b) != "ALICE-RC\n" {
		t.Errorf("alice's HOME changed: %q, %v", b, err)
	}

	// working_dir resolves in bob's folder: his own sub-folder works, his
	// neighbour's is outside it.
	if _, err := runExec(t, bob, e, map[string]any{"command": "pwd", "working_dir": "../alice"}); errCode(err) != toolerr.PathDenied {
		t.Errorf("working_dir ../alice for bob: %v, want %s", err, toolerr.PathDenied)
	}
	if _, err := runExec(t, bob, e, map[string]any{"command": "pwd", "working_dir": aliceDir}); err == nil {
		t.Errorf("working_dir %s accepted for bob", aliceDir)
	}
	if out, err := execIn(t, bob, e, `echo ok > mine && cat mine && mkdir -p sub && cat "$HOME/.bashrc" 2>/dev/null; echo "$HOME"`); err != nil || out != "ok\n"+bobHome+"\n" {
		t.Errorf("bob's own folder: %q, %v", out, err)
	}
	if out, err := runExec(t, bob, e, map[string]any{"command": "pwd", "working_dir": "sub"}); err != nil || out != filepath.Join(bobDir, "sub")+"\n" {
		t.Errorf("bob's working_dir sub: %q, %v", out, err)
	}
	if b, err := os.ReadFile(filepath.Join(bobDir, "mine")); err != nil || string(b) != "ok\n" {
		t.Errorf("bob's file did not land in his folder: %q, %v", b, err)
	}

	// Programs run through exec's run path (command tools) are in the
	// call's folder too, with exec's sandbox or one of their own.
	other := fx.opts
	other.Mode, other.Network = fx.sb.Mode(), !fx.opts.Network
	osb, err := sandbox.New(other)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(osb.Close)
	for _, sb := range []*sandbox.Sandbox{nil, osb} {
		ran, err := e.Run(bob, Program{Argv: []string{Shell, "-c", `pwd; echo "$HOME"; cat ../alice/x; ls ..; echo ran > ran`}, Sandbox: sb})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(ran.Stdout, bobDir+"\n"+bobHome+"\n") || strings.Contains(ran.Stdout, "ALICE-SECRET") || strings.Contains(ran.Stdout, "alice") {
			t.Errorf("a program run for bob (own sandbox %v): %+v", sb != nil, ran)
		}
		if _, err := os.Stat(filepath.Join(bobDir, "ran")); err != nil {
			t.Errorf("the program's file did not land in bob's folder: %v", err)
		}
	}

	// A call without a folder works in the whole workspace, as before.
	if out, err := execIn(t, context.Background(), e, `ls tenants && cat tenants/alice/x && pwd && echo "$HOME"`); err != nil || out != "alice\nbob\nALICE-SECRET\n"+ws+"\n"+fx.home+"\n" {
		t.Errorf("a call without a folder: %q, %v", out, err)
	}
}

// TestExecFolderNeedsConfinement: where commands run without a file-system
// sandbox (none), nothing would keep them in a key's folder: the call is
// refused, and nothing runs, through exec and through Run alike. Calls
// without a folder run as before.
func TestExecFolderNeedsConfinement(t *testing.T) {
	e, ws := newTestExec(t, ExecOptions{})
	bob := folderCtx("tenants/bob")
	_, err := execIn(t, bob, e, "echo ran > ran")
	if errCode(err) != toolerr.Unavailable || !strings.Contains(err.Error(), "needs a sandbox that confines files") {
		t.Errorf("exec for a folder in mode none: %v", err)
	}
	if _, err := e.Run(bob, Program{Argv: []string{Shell, "-c", "echo ran > ran"}}); errCode(err) != toolerr.Unavailable {
		t.Errorf("Run for a folder in mode none: %v", err)
	}
	if _, err := os.Stat(filepath.Join(ws.Dir(), "tenants", "bob", "ran")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a command ran for bob unconfined: %v", err)
	}
	if out, err := execIn(t, context.Background(), e, "echo ok"); err != nil || out != "ok\n" {
		t.Errorf("a call without a folder in mode none: %q, %v", out, err)
	}
}

// TestExecFolderConcurrentFirstCalls: many first calls for the same
// folders at once share one sandbox and one HOME per folder, and each
// runs in its own folder.
func TestExecFolderConcurrentFirstCalls(t *testing.T) {
	fx := newFolderExec(t, sandbox.Landlock, t.TempDir())
	folders := []string{"tenants/a", "tenants/b", "tenants/c"}
	var wg sync.WaitGroup
	errs := make(chan error, 3*len(folders))
	for i := range 3 * len(folders) {
		folder := folders[i%len(folders)]
		wg.Go(func() {
			out, err := execIn(t, folderCtx(folder), fx.e, "pwd")
			if want := filepath.Join(fx.ws.Dir(), folder) + "\n"; err != nil || out != want {
				errs <- errors.New(folder + ": " + out)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, f := range folders {
		ws, err := fx.ws.Folder(f)
		if err != nil {
			t.Fatal(err)
		}
		h, _ := fx.e.homes.Load(f)
		a, err1 := fx.sb.For(ws.Dir(), h.(string))
		b, err2 := fx.sb.For(ws.Dir(), h.(string))
		if err1 != nil || err2 != nil || a != b {
			t.Errorf("%s: the folder's sandbox is not kept: %v, %v", f, err1, err2)
		}
	}
}

// TestExecFolderAsOtherIdentities runs TestExecFolder again as an
// unprivileged account (a service not run by root) and as root without
// CAP_SYS_ADMIN (a container with Docker's default capabilities: no mount
// namespace of the command's own, no bubblewrap): the test binary re-runs
// itself under setpriv. Its commands send no signal: no PID namespace is
// needed.
func TestExecFolderAsOtherIdentities(t *testing.T) {
	if os.Getenv(asFolderEnv) != "" {
		t.Skip("already a re-run")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to become another identity; this run is unprivileged")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skipf("setpriv (util-linux) is needed: %v", err)
	}
	// A copy of the test binary, and a temporary folder, the account can
	// reach.
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "tools.test")
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tmp, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "TMPDIR=" + tmp, "HOME=" + tmp, "CI=" + os.Getenv("CI")}
	if d, err := os.MkdirTemp("/opt", "toolsvc-test-"); err == nil {
		t.Cleanup(func() { os.RemoveAll(d) })
		if err := os.Chmod(d, 0o777|os.ModeSticky); err != nil {
			t.Fatal(err)
		}
		env = append(env, folderDirInOptEnv+"="+d)
	}
	identities := []struct {
		name string
		args []string
		env  string
		ci   bool // CI's rule for a missing bubblewrap applies
	}{
		{"uid 65534", []string{"--reuid=65534", "--regid=65534", "--clear-groups"}, "nobody", true},
		{"root without CAP_SYS_ADMIN", []string{"--bounding-set=-sys_admin", "--inh-caps=-all"}, "nosysadmin", false},
	}
	for _, id := range identities {
		t.Run(id.env, func(t *testing.T) {
			args := append(append(id.args, "--", bin), "-test.count=1", "-test.v", "-test.run", "^TestExecFolder$")
			cmd := exec.Command(setpriv, args...)
			cmd.Dir = dir
			cmd.Env = append(append([]string(nil), env...), asFolderEnv+"="+id.env)
			if !id.ci {
				// bubblewrap cannot build its namespaces without the
				// capability: it is left out there, as in production.
				cmd.Env = append(cmd.Env, "CI=")
			}
			out, err := cmd.CombinedOutput()
			t.Logf("as %s:\n%s", id.name, out)
			if err != nil {
				t.Errorf("TestExecFolder as %s failed: %v", id.name, err)
			}
			for _, want := range []string{"--- PASS: TestExecFolder/landlock/tmp", "--- PASS: TestExecFolder/landlock/in-opt"} {
				if !strings.Contains(string(out), want) {
					t.Errorf("as %s: no %q", id.name, want)
				}
			}
		})
	}
}
