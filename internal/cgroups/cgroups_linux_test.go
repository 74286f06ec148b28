package cgroups

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

var testLimits = Limits{MaxProcs: 64, MaxMemory: 256 << 20}

// newManager returns a manager, or skips where the service could not make
// groups (not root, no writable hierarchy).
func newManager(t *testing.T) *Manager {
	t.Helper()
	m, err := New(testLimits)
	if err != nil {
		t.Skipf("no control groups here: %v", err)
	}
	t.Cleanup(m.Close)
	return m
}

// startIn starts argv inside g the way the sandbox does: cloned into the
// v2 folder, forked from a thread that entered the v1 folders and ends
// when the process has started.
func startIn(t *testing.T, g *Group, argv ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	g.Prepare(cmd.SysProcAttr)
	errc := make(chan error, 1)
	start := func() {
		// Never unlocked: the thread ends with its goroutine.
		if err := g.EnterThread(); err != nil {
			errc <- err
			return
		}
		errc <- cmd.Start()
	}
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() != unix.Getpid() {
			start()
			return
		}
		// The main thread cannot end, so it is never confined: while
		// this goroutine holds it, another starts on a different thread.
		locked := make(chan struct{})
		go func() {
			runtime.LockOSThread()
			close(locked)
			start()
		}()
		<-locked
		runtime.UnlockOSThread()
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	return cmd
}

// waitState waits until the idle group g is in state want (the launching
// thread of a v1 group ends on its own, moments after its goroutine).
func waitState(t *testing.T, g *Group, want int) {
	t.Helper()
	for i := 0; g.state() != want; i++ {
		if i > 10000 {
			t.Fatalf("group state %d, want %d", g.state(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

func readLimit(t *testing.T, dir, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestPoolReusesEmptiedGroup runs a command in a group, releases it and
// checks that the next Get hands out the same group with its limits
// written again, even after something changed them in between.
func TestPoolReusesEmptiedGroup(t *testing.T) {
	m := newManager(t)
	g, err := m.Get()
	if err != nil {
		t.Fatal(err)
	}
	cmd := startIn(t, g, "/bin/true")
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if !g.Kill(time.Second) {
		t.Fatal("an ended command's group is not empty")
	}
	g.Release()
	waitState(t, g, stateEmpty)
	// Limits changed while idle (a command with write access to the
	// folders could do that) are put back.
	if d, ok := g.v1["pids"]; ok {
		if err := os.WriteFile(filepath.Join(d, "pids.max"), []byte("3"), 0); err != nil {
			t.Fatal(err)
		}
	}
	if m.v2procs {
		if err := os.WriteFile(filepath.Join(g.v2, "pids.max"), []byte("3"), 0); err != nil {
			t.Fatal(err)
		}
	}
	again, err := m.Get()
	if err != nil {
		t.Fatal(err)
	}
	if again != g {
		t.Fatalf("an emptied group was not reused: got %+v, want %+v", again, g)
	}
	if d, ok := g.v1["pids"]; ok {
		if got := readLimit(t, d, "pids.max"); got != "65" {
			t.Errorf("v1 pids.max of the reused group = %s, want 65", got)
		}
	}
	if m.v2procs {
		if got := readLimit(t, g.v2, "pids.max"); got != "64" {
			t.Errorf("v2 pids.max of the reused group = %s, want 64", got)
		}
	}
	// The reused group still works: a command starts and ends in it.
	if err := startIn(t, again, "/bin/true").Wait(); err != nil {
		t.Fatalf("a command in a reused group: %v", err)
	}
	if !again.Kill(time.Second) {
		t.Fatal("not empty")
	}
	again.Release()
}

// TestPoolNeverHandsOutGroupWithProcess releases a group with a process
// still in it: Get must not hand it out, and the process is killed.
func TestPoolNeverHandsOutGroupWithProcess(t *testing.T) {
	m := newManager(t)
	g, err := m.Get()
	if err != nil {
		t.Fatal(err)
	}
	cmd := startIn(t, g, "/bin/sleep", "1000")
	g.Release() // without Kill: the process is still there
	waitState(t, g, stateForeign)
	other, err := m.Get()
	if err != nil {
		t.Fatal(err)
	}
	if other == g {
		t.Fatal("a group with a process in it was handed out again")
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the process left in the group was not killed: %v", err)
	}
	other.Release()
}

// TestPoolDropsKilledGroups checks that a group killed with processes in
// it is not reused when cgroup.kill did it, nor when the kill failed, and
// that commands still start in the groups handed out afterwards.
func TestPoolDropsKilledGroups(t *testing.T) {
	m := newManager(t)
	g, err := m.Get()
	if err != nil {
		t.Fatal(err)
	}
	cmd := startIn(t, g, "/bin/sleep", "1000")
	if !g.Kill(5 * time.Second) {
		t.Fatal("the group was not emptied")
	}
	_ = cmd.Wait()
	g.Release()
	for i := 0; i < 3; i++ {
		next, err := m.Get()
		if err != nil {
			t.Fatal(err)
		}
		if next == g && g.v2 != "" {
			t.Fatal("a group killed through cgroup.kill was reused")
		}
		if err := startIn(t, next, "/bin/true").Wait(); err != nil {
			t.Fatalf("command %d after a kill: %v", i, err)
		}
		next.Kill(time.Second)
		next.Release()
	}

	spoiled, err := m.Get()
	if err != nil {
		t.Fatal(err)
	}
	spoiled.spoiled.Store(true) // as after a kill that did not empty it
	spoiled.Release()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, idle := range m.idle {
		if idle == spoiled {
			t.Fatal("a group whose kill failed went back to the pool")
		}
	}
}

// TestEnding: a running process is not ending, even one whose name
// mimics the fields that follow it in /proc/PID/stat; a zombie and a
// process that is gone are.
func TestEnding(t *testing.T) {
	if ending(os.Getpid()) {
		t.Error("this test's own process counted as ending")
	}
	// A program named like the fields after the name: "a) Z (b".
	prog := filepath.Join(t.TempDir(), "a) Z 4 (b")
	b, err := os.ReadFile("/bin/sleep")
	if err != nil {
		t.Skip(err)
	}
	if err := os.WriteFile(prog, b, 0o755); err != nil {
		t.Fatal(err)
	}
	sleeper := exec.Command(prog, "30")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleeper.Process.Kill(); sleeper.Wait() }()
	if ending(sleeper.Process.Pid) {
		t.Error("a sleeping process with a tricky name counted as ending")
	}

	zombie := exec.Command("/bin/true")
	if err := zombie.Start(); err != nil {
		t.Fatal(err)
	}
	pid := zombie.Process.Pid
	var info unix.Siginfo // waits for the exit, leaving the zombie
	if err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
		t.Fatal(err)
	}
	if !ending(pid) {
		t.Error("a zombie did not count as ending")
	}
	zombie.Wait()
	if !ending(pid) {
		t.Error("a reaped process did not count as ending")
	}
}

// TestReadSmall checks the plain-syscall reader on an empty file, files
// around the size of its first buffer and one that makes it grow, a
// process's stat, and a missing file, which must still count as not
// existing (ending relies on that for a process that is gone).
func TestReadSmall(t *testing.T) {
	dir := t.TempDir()
	for _, size := range []int{0, 100, 511, 512, 513, 5000} {
		path := filepath.Join(dir, "f")
		want := bytes.Repeat([]byte("0123456789\n"), size/11+1)[:size]
		if err := os.WriteFile(path, want, 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := readSmall(path)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("size %d: got %d bytes, %v", size, len(got), err)
		}
	}
	got, err := readSmall("/proc/self/stat")
	if err != nil || !bytes.HasPrefix(got, []byte(strconv.Itoa(os.Getpid())+" (")) {
		t.Fatalf("/proc/self/stat: %q, %v", got, err)
	}
	if _, err := readSmall(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v, want fs.ErrNotExist", err)
	}
}

// cleanStaleDir names the folder that a copy of this test binary, run as
// another user, cleans the way a service starting there would.
const cleanStaleDir = "TOOLSVC_TEST_CLEAN_STALE_DIR"

// TestCleanStaleSparesOtherUsersServices tries the attack: a service run
// by an unprivileged user starts beside a live service of root's whose
// command runs as that same user. The newcomer must take root's groups
// for live ones and kill nothing in them, though it could: the command
// is its own user's. The groups of a service that is gone are still
// cleaned, which shows the newcomer did run and could kill.
func TestCleanStaleSparesOtherUsersServices(t *testing.T) {
	if dir := os.Getenv(cleanStaleDir); dir != "" {
		(&Manager{}).cleanStale(dir, false)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run the newcomer as another user")
	}
	base := t.TempDir()
	for _, d := range []string{filepath.Dir(base), base} {
		os.Chmod(d, 0o755)
	}
	nobody := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	// command starts `sleep` as uid 65534 and lists it in a call group of
	// the service with process ID owner, as cgroup.procs would.
	command := func(owner int) int {
		cmd := exec.Command("sleep", "60")
		cmd.SysProcAttr = nobody
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		group := filepath.Join(base, "toolsvc-"+strconv.Itoa(owner)+"-1a2b3c4d", "call-1")
		if err := os.MkdirAll(group, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(group, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return cmd.Process.Pid
	}
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	live := command(os.Getpid())
	orphan := command(gone.Process.Pid)

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(base, "cgroups.test")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	newcomer := exec.Command(bin, "-test.run", "^TestCleanStaleSparesOtherUsersServices$", "-test.count=1")
	newcomer.Dir = base
	newcomer.Env = []string{"PATH=/usr/bin:/bin", "TMPDIR=" + base, cleanStaleDir + "=" + base}
	newcomer.SysProcAttr = nobody
	if out, err := newcomer.CombinedOutput(); err != nil {
		t.Fatalf("the newcomer as uid 65534: %v\n%s", err, out)
	}
	if ending(live) {
		t.Errorf("a new service of another user killed the command of root's live service")
	}
	if !ending(orphan) {
		t.Errorf("the command of a service that is gone was left running")
	}
}

// TestCleanStaleSparesOtherPIDNamespaces: the groups of a service in
// another PID namespace are left alone, though the process ID in their
// name runs nothing here; those of this namespace whose service is gone
// are cleaned.
func TestCleanStaleSparesOtherPIDNamespaces(t *testing.T) {
	ns := pidNamespace()
	if ns == "" {
		t.Skip("no /proc/self/ns/pid here")
	}
	base := t.TempDir()
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	// command starts `sleep` and lists it in a call group named as a
	// service of PID namespace pidns would name it.
	command := func(pidns, rnd string) int {
		cmd := exec.Command("sleep", "60")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		group := filepath.Join(base, "toolsvc-"+strconv.Itoa(gone.Process.Pid)+"-"+rnd+"-ns"+pidns, "call-1")
		if err := os.MkdirAll(group, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(group, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return cmd.Process.Pid
	}
	foreign := command("1"+ns, "1a2b3c4d")
	own := command(ns, "5e6f7a8b")
	(&Manager{pidns: ns}).cleanStale(base, false)
	if ending(foreign) {
		t.Error("the command of a service in another PID namespace was killed")
	}
	if !ending(own) {
		t.Error("the command of a gone service of this PID namespace was not killed")
	}
}
