package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/countbot/toolsvc/internal/netinit"
)

// The tests in this file try, for real, what a model-run command must not
// be able to do, in every sandbox mode this machine offers, and check that
// it failed. Destructive probes only target victims the test creates.

// attackModes are the modes every attack is tried in. None is included:
// privileges, the network filter, the process tree and the limits are
// confined there too.
var attackModes = []Mode{Landlock, Bwrap, None}

// attackDir holds the attack helper; TestMain removes it.
var attackDir = filepath.Join(os.TempDir(), fmt.Sprintf("toolsvc-attack-%d", os.Getpid()))

func TestMain(m *testing.M) {
	// Where the tests run without CAP_SYS_ADMIN, this binary is the first
	// program of the commands with Egress, as the service's is.
	if ran, status := netinit.Run(os.Stderr); ran {
		os.Exit(status)
	}
	code := m.Run()
	_ = os.RemoveAll(attackDir)
	os.Exit(code)
}

// attackBinary builds testdata/attack once per test binary, unless the
// run as another user hands a built one down.
var attackBinary = sync.OnceValues(func() (string, error) {
	if p := os.Getenv("TOOLSVC_TEST_ATTACK_BIN"); p != "" {
		return p, nil
	}
	if err := os.MkdirAll(attackDir, 0o755); err != nil {
		return "", err
	}
	out := filepath.Join(attackDir, "attack")
	cmd := exec.Command("go", "build", "-o", out, "./testdata/attack")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the attack helper: %v\n%s", err, b)
	}
	return out, nil
})

// attackFixture is a workspace with the attack helper in it.
type attackFixture struct {
	fixture
	attack string // path of the helper inside the workspace
}

func newAttackFixture(t *testing.T) attackFixture {
	t.Helper()
	bin, err := attackBinary()
	if err != nil {
		t.Fatal(err)
	}
	f := attackFixture{fixture: newFixture(t)}
	f.attack = filepath.Join(f.ws, "attack")
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.attack, b, 0o755); err != nil {
		t.Fatal(err)
	}
	// A world-accessible workspace, for the runs as another user.
	for _, d := range []string{filepath.Dir(filepath.Dir(f.ws)), filepath.Dir(f.ws), f.ws} {
		_ = os.Chmod(d, 0o777)
	}
	return f
}

// runIn runs script in s with a deadline and returns its output. It
// starts it as exec does, through StartContext: under bubblewrap the
// commands after a sandbox's first run in a bubblewrap started ahead.
func runIn(t *testing.T, s *Sandbox, ws, script string) string {
	t.Helper()
	tmp := tempFor(t, s)
	path, args, childTmp := s.Command(tmp, []string{"/bin/sh", "-c", script})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = ws
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + ws, "TMPDIR=" + childTmp}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	c, err := s.StartContext(ctx, cmd, tmp)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	c.Wait()
	return out.String()
}

func forEachMode(t *testing.T, opts Options, f func(t *testing.T, s *Sandbox, af attackFixture)) {
	for _, mode := range attackModes {
		t.Run(string(mode), func(t *testing.T) {
			af := newAttackFixture(t)
			o := opts
			o.Workspace = af.ws
			o.Private = append(o.Private, af.data, af.private)
			s := newForTest(t, mode, o)
			t.Cleanup(s.Close)
			f(t, s, af)
		})
	}
}

// TestNoPrivilegeReachesCommand: no capability in any set, no_new_privs,
// no other process's environ, cmdline, fd or mem, no device node, no raw
// or packet socket, no privileged system call.
func TestNoPrivilegeReachesCommand(t *testing.T) {
	secret := fmt.Sprintf("VICTIM-SECRET-%d", time.Now().UnixNano())
	victim := exec.Command("/bin/sh", "-c", "sleep 300", "CMDLINE-"+secret)
	victim.Env = []string{"PATH=/usr/bin:/bin", "VICTIM_TOKEN=" + secret}
	// A group of its own, killed whole: killing the shell alone would
	// leave its sleep behind for five minutes.
	victim.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Kill(-victim.Process.Pid, syscall.SIGKILL); victim.Wait() }()
	vpid := strconv.Itoa(victim.Process.Pid)
	self := strconv.Itoa(os.Getpid())
	// The service makes itself undumpable at start-up (cmd/toolsvc), as
	// this test process does here; other processes are what they are.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	forEachMode(t, Options{Network: true}, func(t *testing.T, s *Sandbox, af attackFixture) {
		status := runIn(t, s, af.ws, "grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs):' /proc/self/status")
		for _, set := range []string{"CapInh", "CapPrm", "CapEff", "CapAmb"} {
			if !strings.Contains(status, set+":\t0000000000000000") {
				t.Errorf("%s not empty:\n%s", set, status)
			}
		}
		if os.Geteuid() == 0 && !strings.Contains(status, "CapBnd:\t0000000000000000") {
			t.Errorf("bounding set not empty:\n%s", status)
		}
		if !strings.Contains(status, "NoNewPrivs:\t1") {
			t.Errorf("no_new_privs not set:\n%s", status)
		}
		// What a command may not read of other processes. Without
		// capabilities, environ, mem and what fd links to need the right
		// to trace, which root loses with them and Landlock takes away.
		// Command lines and fd numbers are open to every process that
		// sees the other's /proc entry: only a /proc of the command's own
		// (bwrap, or private mounts where the service has CAP_SYS_ADMIN)
		// hides them.
		targets, files := []string{vpid, self}, []string{"environ", "mem"}
		ownProc := s.mode == Bwrap || s.mountns
		if os.Geteuid() != 0 && !ownProc && !s.scoped {
			// A service that is not root shares its account with the
			// processes it starts: only the service itself is protected,
			// unless the command is in a Landlock domain of its own,
			// which refuses it access to every process outside.
			targets = []string{self}
		}
		if ownProc {
			files = append(files, "cmdline")
		}
		for _, pid := range targets {
			for _, file := range files {
				out := runIn(t, s, af.ws, af.attack+" read /proc/"+pid+"/"+file)
				if strings.Contains(out, "ALLOWED") || strings.Contains(out, secret) {
					t.Errorf("read /proc/%s/%s: %s", pid, file, out)
				}
			}
			if out := runIn(t, s, af.ws, "readlink /proc/"+pid+"/fd/1 && echo ALLOWED"); strings.Contains(out, "ALLOWED") {
				t.Errorf("followed /proc/%s/fd/1: %s", pid, out)
			}
			if ownProc {
				if out := runIn(t, s, af.ws, af.attack+" ls /proc/"+pid+"/fd"); !strings.Contains(out, "DENIED") {
					t.Errorf("listed /proc/%s/fd: %s", pid, out)
				}
			}
		}
		if out := runIn(t, s, af.ws, "cat /proc/*/environ /proc/*/cmdline 2>/dev/null"); ownProc && strings.Contains(out, secret) {
			t.Errorf("a glob over /proc found the victim's secret")
		}
		if out := runIn(t, s, af.ws, "cat /proc/*/environ 2>/dev/null"); os.Geteuid() == 0 && strings.Contains(out, secret) {
			t.Errorf("a glob over /proc/*/environ found the victim's secret")
		}
		victimDir := t.TempDir()
		probes := []string{
			"mknod " + filepath.Join(af.ws, "null2"),
			"raw", "packet", "reboot", "kexec", "module",
			"mount " + af.ws,
			"ptrace " + vpid,
		}
		for _, p := range probes {
			out := runIn(t, s, af.ws, af.attack+" "+p)
			if !strings.Contains(out, "DENIED") {
				t.Errorf("%s: %s", p, out)
			}
		}
		if _, err := os.Stat(filepath.Join(af.ws, "null2")); err == nil {
			t.Errorf("a device node was made")
		}
		_ = victimDir
	})
}

// listeners are servers outside the sandbox that a command with the
// network off must not reach; each counts what reaches it.
type listeners struct {
	hits             atomic.Int64
	tcpPort, udpAddr string
	unixPaths        []string
	abstract         string
	closers          []func()
}

func newListeners(t *testing.T) *listeners {
	t.Helper()
	l := &listeners{}
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l.serve(tcp)
	l.tcpPort = strconv.Itoa(tcp.Addr().(*net.TCPAddr).Port)
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l.closers = append(l.closers, func() { udp.Close() })
	go func() {
		buf := make([]byte, 64)
		for {
			if _, _, err := udp.ReadFrom(buf); err != nil {
				return
			}
			l.hits.Add(1)
		}
	}()
	l.udpAddr = udp.LocalAddr().String()
	name := fmt.Sprintf("toolsvc-test-%d-%d.sock", os.Getpid(), time.Now().UnixNano())
	for _, dir := range []string{t.TempDir(), "/tmp", "/var/tmp", "/run"} {
		p := filepath.Join(dir, name)
		ul, err := net.Listen("unix", p)
		if err != nil {
			t.Logf("no unix listener in %s: %v", dir, err)
			continue
		}
		os.Chmod(p, 0o777)
		l.serve(ul)
		l.unixPaths = append(l.unixPaths, p)
	}
	l.abstract = "@" + name
	al, err := net.Listen("unix", l.abstract)
	if err != nil {
		t.Fatal(err)
	}
	l.serve(al)
	t.Cleanup(func() {
		for _, c := range l.closers {
			c()
		}
	})
	return l
}

func (l *listeners) serve(ln net.Listener) {
	l.closers = append(l.closers, func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.hits.Add(1)
			c.Close()
		}
	}()
}

// TestNetworkOffMeansOff: with the network off, no socket of any family or
// protocol reaches anything outside the command's sandbox.
func TestNetworkOffMeansOff(t *testing.T) {
	l := newListeners(t)
	forEachMode(t, Options{Network: false}, func(t *testing.T, s *Sandbox, af attackFixture) {
		if !s.NetworkEnforced() {
			t.Fatalf("network off is not enforced: %s", s.Describe())
		}
		before := l.hits.Load()
		probes := []string{
			"tcp 127.0.0.1:" + l.tcpPort,
			"mptcp " + l.tcpPort,
			"sctp " + l.tcpPort,
			"udp " + l.udpAddr,
			"raw", "packet", "vsock", "netlink",
			"unix " + l.abstract,
		}
		for _, p := range l.unixPaths {
			probes = append(probes, "unix "+p)
		}
		for _, p := range probes {
			out := runIn(t, s, af.ws, af.attack+" "+p)
			if !strings.Contains(out, "DENIED") {
				t.Errorf("%s: %s", p, out)
			}
		}
		// Give stray datagrams time to arrive before counting.
		time.Sleep(100 * time.Millisecond)
		if n := l.hits.Load() - before; n != 0 {
			t.Errorf("%d connections or datagrams reached the host's listeners", n)
		}
	})
}

// markerAlive reports whether a process whose command line holds marker
// still runs (zombies have an empty command line and do not count).
func markerAlive(marker string) []string {
	var found []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if cl := strings.ReplaceAll(string(b), "\x00", " "); err == nil && strings.Contains(cl, marker) {
			found = append(found, e.Name()+": "+cl)
		}
	}
	return found
}

// detachScript starts processes that leave the command's process group and
// session in every usual way, each sleeping a time that names it.
func detachScript(base int) string {
	return fmt.Sprintf(`setsid sleep %[1]d.1 </dev/null >/dev/null 2>&1 &
nohup sleep %[1]d.2 </dev/null >/dev/null 2>&1 &
(setsid sh -c 'sleep %[1]d.3 & sleep %[1]d.4' </dev/null >/dev/null 2>&1 &) &
sleep %[1]d.5 </dev/null >/dev/null 2>&1 & disown 2>/dev/null
setsid sh -c 'while :; do sleep %[1]d.6; done' </dev/null >/dev/null 2>&1 &
sleep 0.3
echo started`, base)
}

// TestNothingOutlivesCall: every process a command starts, however it
// detaches, is gone when the call ends, whether the shell exited by itself
// or was killed at its deadline.
func TestNothingOutlivesCall(t *testing.T) {
	base := 7000 + int(time.Now().UnixNano()%1000)
	forEachMode(t, Options{}, func(t *testing.T, s *Sandbox, af attackFixture) {
		if !s.Contains() {
			// Without a PID namespace or a control group (a service that is
			// not root, outside bwrap), only the process group can be
			// killed: the sandbox must say so rather than claim more.
			out := runIn(t, s, af.ws, "echo ran")
			tmp := t.TempDir()
			path, args, childTmp := s.Command(tmp, []string{"/bin/sh", "-c", "true"})
			cmd := exec.CommandContext(context.Background(), path, args...)
			cmd.Env = []string{"PATH=/usr/bin:/bin", "TMPDIR=" + childTmp}
			c, err := s.Start(cmd, tmp)
			if err != nil {
				t.Fatal(err)
			}
			if _, contained := c.Wait(); contained || !strings.Contains(out, "ran") {
				t.Errorf("mode %s claims to contain processes it cannot: %s", s.Mode(), s.Describe())
			}
			t.Logf("NOT CONTAINED in mode %s as uid %d (reported as such): %s", s.Mode(), os.Geteuid(), s.Describe())
			return
		}
		base++
		marker := fmt.Sprintf("%d.", base)
		out := runIn(t, s, af.ws, detachScript(base))
		if !strings.Contains(out, "started") {
			t.Fatalf("script did not run: %s", out)
		}
		if left := markerAlive("sleep " + marker); len(left) > 0 {
			t.Errorf("processes outlived the call:\n%s", strings.Join(left, "\n"))
		}

		// The same, killed (as at its deadline) while the shell still runs,
		// once every detached process is seen running.
		base++
		marker = fmt.Sprintf("%d.", base)
		tmp := tempFor(t, s)
		path, args, childTmp := s.Command(tmp, []string{"/bin/sh", "-c", detachScript(base) + "\nsleep 600"})
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, path, args...)
		cmd.Dir = af.ws
		cmd.Env = []string{"PATH=/usr/bin:/bin", "TMPDIR=" + childTmp}
		c, err := s.Start(cmd, tmp)
		if err != nil {
			t.Fatal(err)
		}
		// The check below must be able to see the processes: it does
		// while they run.
		// Counted by the sleeps themselves: the shells between them come
		// and go.
		sleepers := func() int {
			n := 0
			for _, p := range markerAlive("sleep " + marker) {
				if _, cl, _ := strings.Cut(p, ": "); strings.HasPrefix(cl, "sleep ") {
					n++
				}
			}
			return n
		}
		for deadline := time.Now().Add(20 * time.Second); sleepers() < 6 && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		if n := sleepers(); n < 6 {
			t.Fatalf("only %d of the 6 detached processes seen running", n)
		}
		cancel()
		if _, contained := c.Wait(); !contained {
			t.Errorf("Wait did not report the processes contained")
		}
		if left := markerAlive("sleep " + marker); len(left) > 0 {
			t.Errorf("processes outlived the killed call:\n%s", strings.Join(left, "\n"))
		}
	})
}

// TestProcessAndMemoryLimits: a spawn loop is stopped by the process limit
// and a runaway allocation by the memory limit, in the command alone. (Under
// rlimits the limit counts every process and thread of the user, the test's
// own included, hence room for more than a shell needs.)
func TestProcessAndMemoryLimits(t *testing.T) {
	forEachMode(t, Options{MaxProcs: 64, MaxMemory: 128 << 20}, func(t *testing.T, s *Sandbox, af attackFixture) {
		t.Log(s.Describe())
		out := runIn(t, s, af.ws, `i=0; while [ $i -lt 200 ]; do sleep 2 & i=$((i+1)); done 2>&1; echo "spawned $i"; jobs -p | wc -l`)
		if !strings.Contains(strings.ToLower(out), "fork") && !strings.Contains(out, "Resource temporarily unavailable") {
			t.Errorf("200 background processes started under a limit of 64:\n%s", lastN(out, 400))
		}
		out = runIn(t, s, af.ws, af.attack+" alloc 512; echo exit=$?")
		if strings.Contains(out, "allocated 512") {
			t.Errorf("512 MiB allocated under a limit of 128 MiB: %s", out)
		}
		// The service goes on: a normal command still works. Under rlimits
		// the process limit counts every process of the user, so the next
		// command may have to wait for the killed ones to be reaped.
		deadline := time.Now().Add(15 * time.Second)
		for {
			out := runIn(t, s, af.ws, "echo fine")
			if strings.Contains(out, "fine") {
				break
			}
			if s.Limits() != "rlimit" || time.Now().After(deadline) {
				t.Errorf("a command after the limits failed: %s", out)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}

func lastN(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// TestNoFileDescriptorsInherited: a command holds only its standard
// streams, whatever the service has open.
func TestNoFileDescriptorsInherited(t *testing.T) {
	// Something the service holds open that a command must not get.
	f, err := os.Open("/etc/hostname")
	if err != nil {
		f, err = os.Open("/etc/passwd")
	}
	if err == nil {
		defer f.Close()
	}
	forEachMode(t, Options{}, func(t *testing.T, s *Sandbox, af attackFixture) {
		out := runIn(t, s, af.ws, "ls /proc/self/fd")
		if got := strings.Fields(out); strings.Join(got, " ") != "0 1 2 3" {
			t.Errorf("open descriptors in the command (ls's own is 3): %q", out)
		}
	})
}

// reRunTests are the attacks run again as another identity, each in a PID
// namespace made for the run.
const reRunTests = "TestNoPrivilegeReachesCommand|TestNetworkOffMeansOff|TestNothingOutlivesCall|TestProcessAndMemoryLimits|" +
	"TestNoFileDescriptorsInherited|TestSignalsStayInCall|TestAutoRefusesUncontainedSignals|TestFolderSandbox|" +
	"TestEgressAttacks|TestEgressOptions|TestEgressNoLeaks"

// TestAttacksAsUnprivilegedUser runs the attacks above again as an
// unprivileged account, as a service not run by root would: the test
// binary re-runs itself as nobody (uid 65534).
func TestAttacksAsUnprivilegedUser(t *testing.T) {
	if os.Getenv("TOOLSVC_TEST_AS_USER") != "" {
		t.Skip("already the unprivileged run")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to become another user; this run is itself unprivileged")
	}
	bin, err := attackBinary()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		os.Chmod(d, 0o777)
	}
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	testBin := filepath.Join(dir, "sandbox.test")
	attack := filepath.Join(dir, "attack")
	for p, b := range map[string][]byte{testBin: self} {
		if err := os.WriteFile(p, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ab, _ := os.ReadFile(bin)
	if err := os.WriteFile(attack, ab, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "tmp")
	os.Mkdir(tmp, 0o1777)
	os.Chmod(tmp, 0o1777)
	// Folders in /opt and /srv that the unprivileged run may write, for
	// the workspaces TestFolderSandbox places there.
	var placeEnv []string
	for _, p := range folderPlaces {
		if p.dir == "" {
			continue
		}
		if d, err := os.MkdirTemp(p.dir, "toolsvc-test-"); err == nil {
			os.Chmod(d, 0o777|os.ModeSticky)
			t.Cleanup(func() { os.RemoveAll(d) })
			placeEnv = append(placeEnv, p.env+"="+d)
		}
	}
	// In a PID namespace of its own (see signals_linux_test.go), which
	// root makes before the run becomes nobody.
	argv := pidNamespaceCommand("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", testBin,
		"-test.count=1", "-test.v", "-test.run", "^("+reRunTests+"|TestSandboxModes)$")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "TMPDIR=" + tmp, "HOME=" + tmp,
		"TOOLSVC_TEST_AS_USER=1", "TOOLSVC_TEST_ATTACK_BIN=" + attack, "CI=" + os.Getenv("CI"),
		outerPIDNamespaceEnv + "=" + pidNamespace()}
	cmd.Env = append(cmd.Env, placeEnv...)
	out, err := cmd.CombinedOutput()
	t.Logf("as uid 65534:\n%s", summary(out))
	if err != nil {
		t.Errorf("the attacks as an unprivileged user failed: %v", err)
	}
	if !strings.Contains(string(out), "--- PASS: TestFolderSandbox/landlock/in-opt") {
		t.Errorf("a key's folder in a system folder was not tried as an unprivileged user")
	}
}

// TestAttacksWithoutSysAdmin runs the attacks again as root without
// CAP_SYS_ADMIN, as in a container with Docker's default capabilities: no
// PID or mount namespace of the command's own, no bubblewrap; the test
// binary re-runs itself under setpriv with that capability gone from its
// bounding set.
func TestAttacksWithoutSysAdmin(t *testing.T) {
	if os.Getenv("TOOLSVC_TEST_AS_USER") != "" {
		t.Skip("already a re-run")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to drop a capability from root; this run is unprivileged")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatalf("setpriv (util-linux) is needed to drop CAP_SYS_ADMIN: %v", err)
	}
	bin, err := attackBinary()
	if err != nil {
		t.Fatal(err)
	}
	argv := pidNamespaceCommand(setpriv, "--bounding-set=-sys_admin", "--inh-caps=-all", "--", os.Args[0],
		"-test.count=1", "-test.v", "-test.run", "^("+reRunTests+")$")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "TOOLSVC_TEST_AS_USER=nosysadmin", "TOOLSVC_TEST_ATTACK_BIN="+bin, "CI=",
		outerPIDNamespaceEnv+"="+pidNamespace())
	out, err := cmd.CombinedOutput()
	t.Logf("as root without CAP_SYS_ADMIN:\n%s", summary(out))
	if err != nil {
		t.Errorf("the attacks as root without CAP_SYS_ADMIN failed: %v", err)
	}
	if !strings.Contains(string(out), "--- PASS: TestNothingOutlivesCall/landlock") {
		t.Errorf("landlock was not tried without CAP_SYS_ADMIN")
	}
	if !strings.Contains(string(out), "--- PASS: TestFolderSandbox/landlock/in-opt") {
		t.Errorf("a key's folder in a system folder was not tried without CAP_SYS_ADMIN")
	}
}

// summary keeps the lines of a verbose test run that say what happened.
func summary(out []byte) string {
	var keep []string
	for _, l := range strings.Split(string(out), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "=== ") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// TestRunAsUser: with TOOLSVC_EXEC_USER, a root service runs commands as
// that account, with no capability, able to work in a workspace it may
// write and in its own temp folder.
func TestRunAsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("running commands as another user needs a root service; this run is unprivileged")
	}
	forEachMode(t, Options{User: &User{Name: "nobody", Uid: 65534, Gid: 65534}}, func(t *testing.T, s *Sandbox, af attackFixture) {
		tmp, fresh := s.FreshTemp()
		if !fresh {
			tmp = t.TempDir()
			if err := os.Chown(tmp, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}
		path, args, childTmp := s.Command(tmp, []string{"/bin/sh", "-c", `id -u; id -g; echo made > made.txt && cat made.txt; echo t > "$TMPDIR/t" && cat "$TMPDIR/t"; echo h > "$TMPDIR/home/h" && cat "$TMPDIR/home/h"; grep -E '^Cap(Prm|Eff|Bnd)' /proc/self/status`})
		cmd := exec.CommandContext(context.Background(), path, args...)
		cmd.Dir = af.ws
		cmd.Env = []string{"PATH=/usr/bin:/bin", "TMPDIR=" + childTmp}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		c, err := s.Start(cmd, tmp)
		if err != nil {
			t.Fatal(err)
		}
		c.Wait()
		got := out.String()
		wants := []string{"65534\n65534\n", "made\n", "t\n", "CapPrm:\t0000000000000000", "CapEff:\t0000000000000000", "CapBnd:\t0000000000000000"}
		if fresh {
			wants = append(wants, "h\n") // the HOME the sandbox made is the user's
		}
		for _, want := range wants {
			if !strings.Contains(got, want) {
				t.Errorf("as nobody: output lacks %q:\n%s", want, got)
			}
		}
		fi, err := os.Stat(filepath.Join(af.ws, "made.txt"))
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != 65534 {
			t.Errorf("the file the command made belongs to uid %d", st.Uid)
		}
	})
}

// TestFreshTempIsOwnTmpfs: where the service can build mounts (root, and
// bubblewrap with --size), each command's TMPDIR is an empty tmpfs of its
// own holding only its HOME, and nothing it writes there reaches the disk
// or the next command. A trial failure at start-up would silently fall
// back to folders on the disk, so root runs must find it on.
func TestFreshTempIsOwnTmpfs(t *testing.T) {
	forEachMode(t, Options{MaxMemory: 64 << 20}, func(t *testing.T, s *Sandbox, af attackFixture) {
		dir, ok := s.FreshTemp()
		if !ok {
			if os.Geteuid() == 0 && s.Mode() != Bwrap {
				t.Fatalf("mode %s as root gives no fresh tmpfs: %s", s.Mode(), s.Describe())
			}
			t.Skipf("mode %s as uid %d makes temporary folders on the disk", s.Mode(), os.Geteuid())
		}
		script := `stat -f -c %T "$TMPDIR"; ls -A "$TMPDIR"; df -P "$TMPDIR" | awk 'NR == 2 {print $2}'; echo left > "$TMPDIR/left"; echo left > "$TMPDIR/home/left"`
		for i := 0; i < 2; i++ {
			out := runIn(t, s, af.ws, script)
			if rel, ok := strings.CutPrefix(af.ws, "/tmp/"); ok && s.Mode() == Bwrap {
				// bubblewrap makes the folders it binds the workspace on.
				out = strings.Replace(out, strings.Split(rel, "/")[0]+"\n", "", 1)
			}
			if want := "tmpfs\nhome\n65536\n"; out != want {
				t.Errorf("run %d: got %q, want %q (a tmpfs of 64 MiB holding only home)", i, out, want)
			}
		}
		if dir != "" {
			if left, err := os.ReadDir(dir); err != nil || len(left) > 0 {
				t.Errorf("the mount point %s on the disk holds %d entries (%v)", dir, len(left), err)
			}
		}
	})
}

// TestPrivatePathsInsideWorkspace: a private folder and a private file
// inside the workspace can be neither read, listed, written nor
// uncovered, in every mode that confines the file system (as root
// Landlock's rules are not carved around them: mounts cover them).
func TestPrivatePathsInsideWorkspace(t *testing.T) {
	for _, mode := range []Mode{Landlock, Bwrap} {
		t.Run(string(mode), func(t *testing.T) {
			af := newAttackFixture(t)
			dir, file := filepath.Join(af.ws, "keys"), filepath.Join(af.ws, "token.txt")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for p, c := range map[string]string{filepath.Join(dir, "id"): "KEY-IN-FOLDER", file: "TOKEN-IN-FILE"} {
				if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			s := newForTest(t, mode, Options{Workspace: af.ws, Private: []string{dir, file}})
			t.Cleanup(s.Close)
			out := runIn(t, s, af.ws, `cat keys/id token.txt; ls -A keys; echo x > keys/new; echo x > token.txt; umount keys token.txt; mv keys moved; echo visible > ok.txt && cat ok.txt`)
			for _, leak := range []string{"KEY-IN-FOLDER", "TOKEN-IN-FILE"} {
				if strings.Contains(out, leak) {
					t.Errorf("mode %s: a private path's content reached the command:\n%s", mode, out)
				}
			}
			switch {
			case strings.Contains(out, "visible"):
			case mode == Landlock && !s.mountns:
				// Without mounts of its own, Landlock can only grant the
				// workspace's other entries one by one: no new file can be
				// made at its top.
				t.Logf("mode %s as uid %d: no new file at the top of a workspace holding private paths (Landlock cannot take away below a grant)", mode, os.Geteuid())
			default:
				t.Errorf("mode %s: the rest of the workspace is not writable:\n%s", mode, out)
			}
			if b, err := os.ReadFile(file); err != nil || string(b) != "TOKEN-IN-FILE" {
				t.Errorf("mode %s: the private file changed: %q %v", mode, b, err)
			}
			if _, err := os.Stat(filepath.Join(dir, "new")); err == nil {
				t.Errorf("mode %s: the command wrote into a private folder", mode)
			}
			if _, err := os.Stat(dir); err != nil {
				t.Errorf("mode %s: the private folder was moved: %v", mode, err)
			}
		})
	}
}

// TestFreshTempMountPointReplaced: where the folder the commands' tmpfs
// is mounted on was removed (a cleaner of /tmp) it is made again; where
// something else took its name (a link to /etc), no command starts.
func TestFreshTempMountPointReplaced(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the fresh tmpfs needs a root service")
	}
	af := newAttackFixture(t)
	s := newForTest(t, None, Options{Workspace: af.ws})
	t.Cleanup(s.Close)
	dir, ok := s.FreshTemp()
	if !ok {
		t.Fatalf("no fresh tmpfs as root: %s", s.Describe())
	}
	// A spare being made for the next command makes the folder again if
	// it is missing: the folder is replaced only once it is ready.
	waitSpare(s)
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if out := runIn(t, s, af.ws, `echo x > "$TMPDIR/x" && cat "$TMPDIR/x"`); out != "x\n" {
		t.Errorf("after the mount point was removed: %q", out)
	}
	waitSpare(s)
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", dir); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(dir)
	path, args, _ := s.Command(dir, []string{"/bin/sh", "-c", "true"})
	c, err := s.Start(exec.CommandContext(context.Background(), path, args...), dir)
	if err == nil {
		c.Wait()
		t.Error("a command started with its tmpfs mount point replaced by a link")
	} else if !strings.Contains(err.Error(), "not a folder of the service's own") {
		t.Errorf("refused for another reason: %v", err)
	}
}
