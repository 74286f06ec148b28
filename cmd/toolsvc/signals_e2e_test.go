//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// identities are who the service runs as in TestExecSignalsStayInCall:
// root; root without CAP_SYS_ADMIN, as in a container with Docker's
// default capabilities; and an unprivileged account, as under
// Kubernetes. Each is a setpriv prefix for the service's command line.
var identities = []struct {
	name    string
	setpriv []string
	uid     int
}{
	{"root", nil, 0},
	{"root-without-sys-admin", []string{"setpriv", "--bounding-set=-sys_admin", "--inh-caps=-all", "--"}, 0},
	{"nobody", []string{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", "--"}, 65534},
}

// TestExecSignalsStayInCall: a script the model writes with write_file and
// runs with exec kills a victim process of the service's own account by
// its PID, sends SIGKILL to every process it may (kill -9 -1), signals the
// service (its parent) with SIGUSR2, whose default action would end it,
// and leaves processes behind in a session of their own with an empty
// environment. In every sandbox mode and as every identity: the victim
// lives, the service still answers, and nothing of the call is left when
// the call has returned.
//
// kill -9 -1 is never sent on the host: the service runs in a PID
// namespace this test makes for it (unshare --pid --fork --mount-proc,
// ended with it by --kill-child), beside the victim, so that a signal that
// escaped its call could harm nothing outside that namespace.
func TestExecSignalsStayInCall(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("making a PID namespace for the service and running it as each identity needs root")
	}
	for _, id := range identities {
		for _, mode := range append([]string{"none"}, sandboxModes(t)...) {
			t.Run(id.name+"/"+mode, func(t *testing.T) {
				t.Parallel()
				if mode == "bwrap" && id.name == "root-without-sys-admin" {
					t.Skip("SANDBOX MODE NOT TESTED: bubblewrap run by root builds its namespaces with CAP_SYS_ADMIN, which this identity lacks")
				}
				signalsStayInCall(t, mode, id.setpriv, id.uid)
			})
		}
	}
}

func signalsStayInCall(t *testing.T, mode string, setpriv []string, uid int) {
	n := uniqueNumber()
	base := 700000 + os.Getpid()%1000*100 + n%100
	dir, err := os.MkdirTemp("", "signals-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ws, data := filepath.Join(dir, "ws"), filepath.Join(dir, "data")
	for _, d := range []string{dir, ws, data} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
	victim := fmt.Sprintf("sleep %d.9", base)
	// The namespace's first process is a shell that uses up a few dozen
	// process IDs (so that the victim's and the service's are not the
	// small numbers a command's processes get in a PID namespace of their
	// own), starts the victim and the service as the service's identity,
	// and stays first.
	prefix := strings.Join(setpriv, " ")
	script := fmt.Sprintf(`i=0; while [ $i -lt 40 ]; do /bin/true; i=$((i+1)); done
%[1]s %[2]s & echo $! > %[3]s/victim.pid
%[1]s "$0" & echo $! > %[3]s/service.pid; wait $!; exit $?`, prefix, victim, ws)
	p := startServer(t, map[string]string{"EXEC_SANDBOX": mode, "WORKSPACE": ws, "DATA_DIR": data, "LOG_LEVEL": "debug"},
		wrapped("unshare", "--pid", "--fork", "--mount-proc", "--kill-child", "--", "/bin/sh", "-c", script))
	defer p.Kill(t)
	if len(markerProcs(victim)) == 0 {
		t.Fatalf("the victim did not start")
	}
	// The PIDs are the namespace's, which the service shares with its
	// commands unless they have a PID namespace of their own; there the
	// numbers name no process or another (the service's is well above
	// those a command's processes get).
	attack := `kill -9 "$(cat victim.pid)" 2>/dev/null && echo KILLED-VICTIM
kill -USR2 "$(cat service.pid)" 2>/dev/null && echo SIGNALLED-SERVICE
kill -9 -1
echo survived
`
	mustSucceed(t, p.invoke(t, "write_file", map[string]any{"path": "attack.sh", "content": attack}))
	// exec: the script is the call's first process, which kill -1 spares,
	// so that its output says it went on.
	if out := mustSucceed(t, p.invoke(t, "exec", execArgs("exec sh attack.sh"))); !strings.Contains(out, "survived") {
		t.Errorf("the script did not run to its end: %s", out)
	}
	detach := fmt.Sprintf(`env -i setsid sh -c 'sleep %[1]d.1 & sleep %[1]d.2' </dev/null >/dev/null 2>&1 &
(env -i sh -c 'sleep %[1]d.3 &' </dev/null >/dev/null 2>&1 &)
sleep 0.3
echo started
`, base)
	mustSucceed(t, p.invoke(t, "write_file", map[string]any{"path": "detach.sh", "content": detach}))
	out := mustSucceed(t, p.invoke(t, "exec", execArgs("sh detach.sh")))
	if !strings.Contains(out, "started") {
		t.Fatalf("the script did not run to its end: %s", out)
	}
	if left := sleepers(fmt.Sprintf("sleep %d.", base)); len(left) != 1 || !strings.Contains(left[0], victim) {
		t.Errorf("after the call, of the victim and the call's processes these are left (want the victim alone):\n%s\noutput: %s\nlogs:\n%s",
			strings.Join(left, "\n"), out, sandboxLine(p.Logs()))
	}
	// SIGUSR2 ends a service that has no handler for it: a signal that
	// reached it would show here, a moment later.
	time.Sleep(100 * time.Millisecond)
	if got := mustSucceed(t, p.invoke(t, "exec", execArgs("echo still here"))); !strings.Contains(got, "still here") {
		t.Errorf("the service no longer runs commands: %s", got)
	}
}

// wrapped runs the built binary as the last argument of argv (unshare,
// setpriv...), in a process of its own.
func wrapped(argv ...string) startOption {
	return func(s *startSpec) { s.process, s.wrap = true, argv }
}

// sleepers lists the live processes whose command line begins with
// prefix.
func sleepers(prefix string) []string {
	var out []string
	for _, p := range markerProcs(prefix) {
		if _, cl, _ := strings.Cut(p, ": "); strings.HasPrefix(cl, prefix) {
			out = append(out, p)
		}
	}
	return out
}

// sandboxLine is the start-up log's line that describes exec's sandbox in
// detail.
func sandboxLine(logs string) string {
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "exec sandbox in detail") {
			return l
		}
	}
	return logs
}
