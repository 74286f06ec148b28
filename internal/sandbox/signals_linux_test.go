package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/procgroup"
)

// The tests here send kill -9 -1 from a command. They never do that on the
// host itself: each re-runs its test binary in a PID namespace made for
// it (unshare --pid --fork --mount-proc, as root; with a user namespace of
// its own otherwise), so that a signal that escaped its call could harm
// nothing outside that namespace, and goes on only there.

// outerPIDNamespaceEnv holds the PID namespace a test binary re-ran itself
// from: a run that sees it set, and finds itself in another, knows it is
// in the namespace made for it.
const outerPIDNamespaceEnv = "TOOLSVC_TEST_OUTER_PIDNS"

func pidNamespace() string {
	link, _ := os.Readlink("/proc/self/ns/pid")
	return link
}

// inOwnPIDNamespace reports whether this test binary runs in a PID
// namespace made for it, and not as its first process (which no signal
// from inside the namespace reaches, and so would prove nothing).
func inOwnPIDNamespace() bool {
	outer := os.Getenv(outerPIDNamespaceEnv)
	return outer != "" && outer != pidNamespace() && os.Getpid() != 1
}

// pidNamespaceCommand returns the command that runs argv in a new PID
// namespace with its own /proc (the sweep finds a call's processes there),
// under a shell that stays the namespace's first process. The shell first
// uses up a few dozen process IDs, so that the test's own are not the
// small numbers a command's processes get in a PID namespace of their own:
// a test looking at /proc/<the service's PID> from such a command would
// otherwise find the command itself there.
func pidNamespaceCommand(argv ...string) []string {
	ns := []string{"unshare", "--pid", "--fork", "--mount-proc"}
	if os.Geteuid() != 0 {
		ns = []string{"unshare", "--user", "--map-current-user", "--pid", "--fork", "--mount-proc"}
	}
	script := `i=0; while [ $i -lt 40 ]; do /bin/true; i=$((i+1)); done; "$0" "$@"; exit $?`
	return append(append(ns, "--", "/bin/sh", "-c", script), argv...)
}

// reRunInPIDNamespace runs the tests matching run of this test binary in a
// PID namespace made for them, and fails t when they fail.
func reRunInPIDNamespace(t *testing.T, run string) {
	t.Helper()
	argv := pidNamespaceCommand(os.Args[0], "-test.count=1", "-test.v", "-test.run", run)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), outerPIDNamespaceEnv+"="+pidNamespace())
	out, err := cmd.CombinedOutput()
	t.Logf("in a PID namespace of its own:\n%s", summary(out))
	if err != nil {
		t.Errorf("the run in a PID namespace of its own failed: %v", err)
	}
	if !strings.Contains(string(out), "--- PASS") {
		t.Errorf("no test passed in the PID namespace")
	}
}

// kernels are the kernels the signal tests stand for: this one, and one
// without Landlock's signal scoping (before Linux 6.12), where a PID
// namespace in a user namespace of the command's own does the work.
var kernels = []struct {
	name string
	opts Options
}{
	{"this-kernel", Options{}},
	{"no-signal-scoping", Options{noScope: true}},
}

// TestSignalsStayInCall: a script written to the workspace and run as a
// command kills a victim process outside its call by PID, sends SIGKILL
// to every process it may (kill -9 -1), signals its parent and the
// service, then leaves processes behind with an empty environment in a
// session of their own. The victim must survive, the service must go on
// running commands, and nothing of the call may be left when it ends.
func TestSignalsStayInCall(t *testing.T) {
	if !inOwnPIDNamespace() {
		reRunInPIDNamespace(t, "^TestSignalsStayInCall$")
		return
	}
	base := 6000 + int(time.Now().UnixNano()%1000)
	for _, k := range kernels {
		t.Run(k.name, func(t *testing.T) {
			forEachMode(t, k.opts, func(t *testing.T, s *Sandbox, af attackFixture) {
				base++
				signalAttack(t, s, af, base)
			})
		})
	}
}

func signalAttack(t *testing.T, s *Sandbox, af attackFixture, base int) {
	if !s.SignalsContained() || !s.Contains() {
		t.Fatalf("mode %s as uid %d contains neither signals nor processes here: %s", s.Mode(), os.Geteuid(), s.Describe())
	}
	victim := exec.Command("sleep", "600")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = victim.Process.Kill(); _ = victim.Wait() }()
	// SIGUSR2, sent to the service by PID and as the command's parent,
	// is caught here: its arrival is the proof. A PID the command shares
	// with a process of its own namespace is skipped: the number means
	// another process there.
	usr2 := make(chan os.Signal, 4)
	signal.Notify(usr2, syscall.SIGUSR2)
	defer signal.Stop(usr2)
	script := fmt.Sprintf(`kill -9 %[1]d 2>/dev/null && echo KILLED-VICTIM
[ %[2]d -ne $$ ] && [ %[2]d -gt 1 ] && kill -USR2 %[2]d 2>/dev/null && echo SIGNALLED-SERVICE
[ "$PPID" -gt 1 ] && kill -USR2 "$PPID" 2>/dev/null && echo SIGNALLED-PARENT
kill -9 -1
echo survived
env -i setsid sh -c 'sleep %[3]d.1 & sleep %[3]d.2' </dev/null >/dev/null 2>&1 &
(env -i sh -c 'sleep %[3]d.3 &' </dev/null >/dev/null 2>&1 &)
env -i /bin/sh -c 'setsid sleep %[3]d.4 &' </dev/null >/dev/null 2>&1
sleep 0.3
echo started
`, victim.Process.Pid, os.Getpid(), base)
	if err := os.WriteFile(filepath.Join(af.ws, "escape.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	out := runIn(t, s, af.ws, "exec sh ./escape.sh")
	if !strings.Contains(out, "survived") || !strings.Contains(out, "started") {
		t.Fatalf("the script did not run to its end: %s", out)
	}
	select {
	case <-usr2:
		t.Errorf("mode %s as uid %d: a signal from the command reached the service (%s)\n%s", s.Mode(), os.Geteuid(), strings.TrimSpace(out), s.Describe())
	case <-time.After(100 * time.Millisecond):
	}
	if st, ok := procgroup.ReadStat(victim.Process.Pid); !ok || st.State == "Z" {
		t.Errorf("mode %s as uid %d: the victim outside the call was killed\n%s", s.Mode(), os.Geteuid(), s.Describe())
	}
	if left := markerAlive("sleep " + strconv.Itoa(base) + "."); len(left) > 0 {
		t.Errorf("mode %s as uid %d: processes outlived the call:\n%s\n%s", s.Mode(), os.Geteuid(), strings.Join(left, "\n"), s.Describe())
	}
	if out := runIn(t, s, af.ws, "echo fine"); !strings.Contains(out, "fine") {
		t.Errorf("the next command failed: %s", out)
	}
}

// TestAutoRefusesUncontainedSignals: where the kernel offers no way to
// keep a command's signals in its call, Auto runs no command, and an
// explicit mode says so in its description.
func TestAutoRefusesUncontainedSignals(t *testing.T) {
	f := newFixture(t)
	opts := Options{Workspace: f.ws, Bwrap: "/nonexistent/bwrap", noScope: true, noUserns: true}
	none := newForTest(t, None, opts)
	defer none.Close()
	if none.pidns {
		t.Skipf("as uid %d with CAP_SYS_ADMIN each command has a PID namespace anyway: %s", os.Geteuid(), none.Describe())
	}
	if none.SignalsContained() || !strings.Contains(none.Describe(), "signals NOT contained") {
		t.Errorf("none mode without a way to contain signals does not say so: %s", none.Describe())
	}
	opts.Mode = Auto
	s, err := New(opts)
	if err == nil {
		s.Close()
		t.Fatalf("auto picked %s without a way to contain signals: %s", s.Mode(), s.Describe())
	}
	if !errors.Is(err, ErrNoSandbox) || !strings.Contains(err.Error(), "signal") {
		t.Errorf("auto's refusal does not say why: %v", err)
	}
}
