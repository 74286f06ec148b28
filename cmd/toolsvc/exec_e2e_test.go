package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/procgroup"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/sandbox"
	"github.com/countbot/toolsvc/internal/shellguard"
	"github.com/countbot/toolsvc/internal/tools"
	"github.com/countbot/toolsvc/internal/workspace"
)

// execSpawn leaves a grandchild (sleep) holding the output pipes and writes
// "pgid grandchild-pid" to the workspace file ids, then runs what follows.
// The sleep's argument is unique to the test, so that survivors can be
// found by command line even inside a PID namespace (bwrap), where $$ and
// $! mean nothing to the host.
func execSpawn(t *testing.T) string {
	return fmt.Sprintf(`sleep %s & echo "$$ $!" > ids; echo started; `, sleepToken(t))
}

// sleepToken is unique to the test among the tests that run at once,
// here and in any other test process of the machine.
func sleepToken(t *testing.T) string {
	h := fnv.New32a()
	h.Write([]byte(t.Name()))
	return fmt.Sprintf("1000.%06d%010d", os.Getpid()%1000000, h.Sum32())
}

var counter atomic.Int64

// uniqueNumber is a number no other call in this process returns.
func uniqueNumber() int { return int(counter.Add(1)) }

func execArgs(command string, extra ...any) map[string]any {
	a := map[string]any{"command": command}
	for i := 0; i+1 < len(extra); i += 2 {
		a[extra[i].(string)] = extra[i+1]
	}
	return a
}

// waitForFile waits until a command marks a point it reached by writing a
// line to path.
func waitForFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(waitGuard)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil && bytes.HasSuffix(b, []byte("\n")) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s never appeared", path)
}

// assertNoSurvivor checks that nothing the command started is alive once
// the call returned: no live process runs the test's sleep, and, where the
// ids the command wrote are host ids (no PID namespace), no live member of
// its process group is left and the group is then reaped: kill(-pgid, 0)
// reports ESRCH. Killed grandchildren belong to init, which may reap them a
// moment later; until then they are zombies, already dead. Whether
// commands have a PID namespace is in the sandbox's debug log line: the
// server must log at debug.
func assertNoSurvivor(t *testing.T, s *testServer, mode string) {
	t.Helper()
	if live := liveWithArg(sleepToken(t)); len(live) > 0 {
		t.Errorf("processes %v started by the command are alive after the call", live)
	}
	if mode == "bwrap" || strings.Contains(s.Logs(), "own PID namespace") {
		return // the ids the command saw are its namespace's, not the host's
	}
	b, err := os.ReadFile(filepath.Join(s.Workspace, "ids"))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		t.Fatalf("ids = %q", b)
	}
	pgid, _ := strconv.Atoi(f[0])
	child, _ := strconv.Atoi(f[1])
	if live := procgroup.LiveMembers(pgid); len(live) > 0 {
		t.Errorf("processes %v of the command's group %d are alive after the call", live, pgid)
	}
	deadline := time.Now().Add(waitGuard)
	for sysKill(-pgid, 0) == nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if err := sysKill(-pgid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("process group %d still exists: kill(-pgid, 0) = %v", pgid, err)
	}
	if err := sysKill(child, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("grandchild %d still exists: kill(pid, 0) = %v", child, err)
	}
}

// liveWithArg returns the live (not zombie) processes with arg in their
// command line.
func liveWithArg(arg string) []int {
	entries, _ := os.ReadDir("/proc")
	var live []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.Contains(cmdline, []byte("\x00"+arg)) {
			continue
		}
		stat, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && len(stat) > i+2 && stat[i+2] != 'Z' {
			live = append(live, pid)
		}
	}
	return live
}

// processModes are the sandbox modes process control is tested under: none
// and every sandbox the machine offers.
func processModes(t *testing.T) []string {
	return append([]string{"none"}, sandboxModes(t)...)
}

func TestExecResults(t *testing.T) {
	t.Parallel()
	s := startServer(t, map[string]string{"EXEC_MAX_OUTPUT": "300", "EXEC_MAX_TIMEOUT": "60s"})
	s.writeWS(t, "src/main.txt", "alpha\nbeta\n")
	if err := os.Symlink(s.DataDir, filepath.Join(s.Workspace, "data-link")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		args  any
		code  string
		exact string
		want  []string
	}{
		{name: "stdout", args: execArgs("echo hello"), exact: "hello\n"},
		{name: "no output", args: execArgs("true"), exact: "(no output)"},
		{name: "stderr section", args: execArgs("echo out; echo oops >&2"), exact: "out\n\nSTDERR:\noops\n"},
		{name: "failure first and last", args: execArgs("echo partial; exit 7"), exact: "COMMAND FAILED (exit code 7)\npartial\n\n\nExit code: 7"},
		{name: "invalid utf-8 repaired", args: execArgs(`printf 'ok\377\376'`), exact: "ok\uFFFD"},
		{name: "cut note", args: execArgs("seq 1 5000"), want: []string{"1\n2\n", "4999\n5000\n", "bytes of stdout cut here (23893 bytes in all)"}},
		{name: "working_dir", args: execArgs("cat main.txt", "working_dir", "src"), exact: "alpha\nbeta\n"},
		{name: "starts in workspace", args: execArgs("pwd"), exact: s.Workspace + "\n"},
		{name: "working_dir escape", args: execArgs("pwd", "working_dir", "../"), code: "path_denied"},
		{name: "working_dir absolute", args: execArgs("pwd", "working_dir", "/etc"), code: "path_denied"},
		{name: "working_dir symlink out", args: execArgs("pwd", "working_dir", "data-link"), code: "path_denied"},
		{name: "working_dir tilde", args: execArgs("pwd", "working_dir", "~"), code: "path_denied"},
		{name: "timeout too large", args: execArgs("true", "timeout", 61), code: "invalid_arguments", want: []string{"timeout must be <= 60"}},
		{name: "timeout zero", args: execArgs("true", "timeout", 0), code: "invalid_arguments"},
		{name: "unknown parameter", args: execArgs("true", "shell", "bash"), code: "invalid_arguments"},
		{name: "missing command", args: map[string]any{}, code: "invalid_arguments", want: []string{"missing required command"}},
		{name: "blank command", args: execArgs("  \n "), code: "invalid_arguments"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := s.invoke(t, "exec", tc.args)
			var out string
			if tc.code != "" {
				out = mustFail(t, res, tc.code)
			} else {
				out = mustSucceed(t, res)
			}
			if tc.exact != "" && out != tc.exact {
				t.Errorf("got %q, want %q", out, tc.exact)
			}
			assertContains(t, "result", out, tc.want...)
		})
	}
}

func TestExecTimeoutKillsWholeGroup(t *testing.T) {
	t.Parallel()
	for _, mode := range processModes(t) {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, map[string]string{"EXEC_SANDBOX": mode, "LOG_LEVEL": "debug"})
			// Long enough for the shell to print both lines before it, even
			// on a loaded machine with a sandbox to set up first.
			res := s.invoke(t, "exec", execArgs(execSpawn(t)+"echo waiting >&2; wait", "timeout", 5))
			mustFail(t, res, "timeout", "timed out after 5s", "Last output captured:\nstarted\n", "STDERR:\nwaiting")
			assertNoSurvivor(t, s, mode)
		})
	}
}

func TestExecBackgroundJobDoesNotHoldTheCall(t *testing.T) {
	t.Parallel()
	for _, mode := range processModes(t) {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, map[string]string{"EXEC_SANDBOX": mode, "LOG_LEVEL": "debug"})
			res := s.invoke(t, "exec", execArgs(execSpawn(t)+"exit 0", "timeout", 600))
			if out := mustSucceed(t, res); out != "started\n" {
				t.Errorf("got %q", out)
			}
			assertNoSurvivor(t, s, mode)
		})
	}
}

func TestExecClientDisconnectKillsCommand(t *testing.T) {
	t.Parallel()
	for _, mode := range processModes(t) {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, map[string]string{"EXEC_SANDBOX": mode, "LOG_LEVEL": "debug"})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			body, _ := json.Marshal(execArgs(execSpawn(t)+"wait", "timeout", 600))
			req, _ := http.NewRequestWithContext(ctx, "POST", s.URL+"/tools/exec/invoke", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			done := make(chan error, 1)
			go func() {
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					resp.Body.Close()
				}
				done <- err
			}()
			waitForFile(t, filepath.Join(s.Workspace, "ids"))
			cancel()
			if err := <-done; err == nil {
				t.Fatal("the request finished although the command was still running")
			}
			// The service notices the disconnect, kills the group, then
			// records the call as canceled: wait for that record.
			canceled := regexp.MustCompile(`"error_code":\s*"canceled"`)
			deadline := time.Now().Add(waitGuard)
			for !canceled.MatchString(readAuditText(s)) && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if !canceled.MatchString(readAuditText(s)) {
				t.Errorf("no canceled call in the audit log:\n%s", readAuditText(s))
			}
			assertNoSurvivor(t, s, mode)
		})
	}
}

// readAuditText returns every audit record written so far, concatenated.
func readAuditText(s *testServer) string {
	var b strings.Builder
	filepath.WalkDir(filepath.Join(s.DataDir, "audit_logs"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			data, _ := os.ReadFile(p)
			b.Write(data)
		}
		return nil
	})
	return b.String()
}

func TestExecShutdownKillsCommand(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		body, _ := json.Marshal(execArgs(execSpawn(t)+"wait", "timeout", 600))
		resp, err := http.Post(s.URL+"/tools/exec/invoke", "application/json", bytes.NewReader(body))
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	waitForFile(t, filepath.Join(s.Workspace, "ids"))
	s.Stop(t)
	<-done
	assertNoSurvivor(t, s, "bwrap") // auto picks bwrap when it can; the pid scan holds in every mode
}

func TestExecEnvironmentHoldsNoServiceSecrets(t *testing.T) {
	t.Parallel()
	secrets := map[string]string{
		"OPENAI_API_KEY":     "sk-openai-secret-value-1",
		"ANTHROPIC_API_KEY":  "sk-ant-secret-value-2",
		"TELEGRAM_BOT_TOKEN": "tg-secret-value-3",
		"AWS_SECRET_KEY":     "aws-secret-value-4",
	}
	opts := []startOption{withEnv("LC_ALL", "C"), withEnv("SAFE_FOR_TOOLS", "visible-5"), withKey("test-api-key-0123456789abcdef")}
	for k, v := range secrets {
		opts = append(opts, withEnv(k, v))
	}
	s := startServer(t, map[string]string{"EXEC_ENV_ALLOW": "SAFE_FOR_TOOLS"}, opts...)
	key := s.Key
	out := mustSucceed(t, s.invoke(t, "exec", execArgs("env")))
	for _, v := range append(mapValues(secrets), key, "TOOLSVC_") {
		if strings.Contains(out, v) {
			t.Errorf("env shows %q:\n%s", v, out)
		}
	}
	for _, w := range []string{"PATH=", "LC_ALL=C", "SAFE_FOR_TOOLS=visible-5", "HOME=/"} {
		if !strings.Contains(out, w) {
			t.Errorf("env lacks %s:\n%s", w, out)
		}
	}
	// HOME is not the root of the model's workspace, and what programs
	// write there does not land in it (TestExecHomeIsPerCall checks that
	// it does not reach the next call either).
	if strings.Contains(out, "HOME="+s.Workspace+"\n") {
		t.Errorf("HOME is the workspace root:\n%s", out)
	}
	mustSucceed(t, s.invoke(t, "exec", execArgs(`echo kept > "$HOME/.toolsvc-e2e-dotfile"`)))
	if _, err := os.Stat(filepath.Join(s.Workspace, ".toolsvc-e2e-dotfile")); err == nil {
		t.Errorf("the dotfile landed in the workspace")
	}
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// TestExecHugeOutput prints 1 GiB and checks the result's cut note and
// that the service's memory stays flat: its peak resident size (VmHWM,
// reset through /proc/self/clear_refs) grows by far less than the output.
// Not parallel: the peak is this whole process's, which other tests'
// services would raise.
func TestExecHugeOutput(t *testing.T) {
	s := startServer(t, map[string]string{"EXEC_TIMEOUT": "5m"})
	runtime.GC()
	base := resetPeakRSS(t)
	res := s.invoke(t, "exec", execArgs("head -c 1073741824 /dev/zero | tr '\\0' a"))
	peak := statusKB(t, "VmHWM")
	out := mustSucceed(t, res)
	growth := peak - base
	t.Logf("1 GiB of output: peak RSS %d MiB, growth %d MiB over %d MiB before the call", peak>>10, growth>>10, base>>10)
	if growth > 128<<10 {
		t.Errorf("peak RSS grew by %d MiB while the command printed 1 GiB", growth>>10)
	}
	want := "bytes of stdout cut here (1073741824 bytes in all); the first 5000 and last 5000 characters are shown"
	if !strings.Contains(out, want) || !strings.Contains(out, "1073731824 bytes of stdout cut here") {
		t.Errorf("cut note wrong: %q", out[5000:min(len(out), 5400)])
	}
	if n := strings.Count(out, "a"); n < 10000 {
		t.Errorf("only %d characters of output kept", n)
	}
}

// resetPeakRSS resets VmHWM to the current RSS and returns it, in KiB.
func resetPeakRSS(t *testing.T) int64 {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Skipf("cannot reset the peak RSS on this kernel: %v", err)
	}
	return statusKB(t, "VmHWM")
}

func statusKB(t *testing.T, field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return n
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// TestExecGuard tries each bypass class of security.md through the real
// service, in denylist mode and in allowlist mode. The exhaustive table is
// in internal/shellguard.
func TestExecGuard(t *testing.T) {
	t.Parallel()
	bypasses := []string{
		"rm -r -f victim",                            // split flags
		`r\m -rf victim`,                             // escaped name
		`"rm" -rf victim`,                            // quotes
		"CMD=rm; $CMD -rf victim",                    // variable as command
		`$'\x72m' -rf victim`,                        // ANSI-C quoting
		"echo cm0gLXJmIHZpY3RpbQ== | base64 -d | sh", // base64 into a shell
		`python3 -c 'import shutil; shutil.rmtree("victim")'`,
		"find victim -delete",
		"env sh -c 'rm -rf victim'",
		"ls && rm -rf victim", // chaining
		"ls | sh",
		"echo $(rm -rf victim)",
		"echo `rm -rf victim`",
		// Commands programs run from their own options or languages.
		"sed -n '1e rm -rf victim' victim/keep.txt",
		"tar --checkpoint=1 --checkpoint-action=exec='rm -rf victim' -cf /dev/null victim",
		`awk 'BEGIN { system("rm -rf victim") }'`,
		"cp /bin/rm ./r && ./r -rf victim", // a renamed copy
	}
	chains := []string{"ls; touch pwned", "ls\ntouch pwned", "ls & touch pwned", "ls | touch pwned", "echo $(touch pwned)", "echo `touch pwned`", "ls || touch pwned"}
	modes := []struct {
		name    string
		env     map[string]string
		refused []string
		allowed []string
	}{
		{"denylist", map[string]string{"EXEC_DENY_PATTERNS": `\bcurl\b`}, append(bypasses, "curl http://example.com"), []string{"ls -la", "echo ok | cat"}},
		{"allowlist", map[string]string{"EXEC_ALLOW_PATTERNS": `ls\b,echo\b,cat\b,rm\b,sh\b,env\b,python3\b,find\b,base64\b`}, append(bypasses, chains...), []string{"ls -la", "echo ok | cat"}},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, m.env)
			s.writeWS(t, "victim/keep.txt", "still here")
			for _, cmd := range m.refused {
				res := s.invoke(t, "exec", execArgs(cmd))
				mustFail(t, res, "policy_denied", "Command blocked by safety guard (")
			}
			for _, cmd := range m.allowed {
				mustSucceed(t, s.invoke(t, "exec", execArgs(cmd)))
			}
			if _, err := os.Stat(filepath.Join(s.Workspace, "victim/keep.txt")); err != nil {
				t.Errorf("a refused command ran: %v", err)
			}
			if _, err := os.Stat(filepath.Join(s.Workspace, "pwned")); err == nil {
				t.Errorf("a chained command ran")
			}
		})
	}
}

func TestExecBadConfigStopsStartup(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, value, want string }{
		{"EXEC_DENY_PATTERNS", "(unclosed", "TOOLSVC_EXEC_DENY_PATTERNS"},
		{"EXEC_ALLOW_PATTERNS", "(unclosed", "TOOLSVC_EXEC_ALLOW_PATTERNS"},
		{"EXEC_SANDBOX", "chroot", "TOOLSVC_EXEC_SANDBOX"},
		{"EXEC_ENV_ALLOW", "PATH,TOOLSVC_API_KEYS", "TOOLSVC_EXEC_ENV_ALLOW"},
		{"EXEC_PRIVATE_PATHS", "relative/dir", "TOOLSVC_EXEC_PRIVATE_PATHS"},
		{"EXEC_TIMEOUT", "0s", "TOOLSVC_EXEC_TIMEOUT"},
		{"EXEC_MAX_TIMEOUT", "1s", "TOOLSVC_EXEC_MAX_TIMEOUT"},
		{"EXEC_MAX_CONCURRENT", "0", "TOOLSVC_EXEC_MAX_CONCURRENT"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := startError(t, map[string]string{tc.name: tc.value})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run = %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

func TestExecUnavailableSandboxStopsStartup(t *testing.T) {
	t.Parallel()
	// No bwrap to be found.
	err := startError(t, map[string]string{"EXEC_SANDBOX": "bwrap"}, withEnv("PATH", t.TempDir()))
	if err == nil || !strings.Contains(err.Error(), "TOOLSVC_EXEC_SANDBOX=bwrap is not available") {
		t.Fatalf("run = %v", err)
	}
}

// sandboxModes returns the sandbox modes to test, skipping those the
// machine lacks with a message saying so. A kernel without Landlock cannot
// be fixed by installing a package, so that skips even under CI; a missing
// bubblewrap can (apt-get install bubblewrap), so under CI it fails.
func sandboxModes(t *testing.T) []string {
	var modes []string
	if v, err := landlockABI(); err != nil || v < 4 {
		t.Logf("SANDBOX MODE NOT TESTED: landlock (kernel Landlock ABI %d, %v; ABI 4 is needed with the network off)", v, err)
	} else {
		modes = append(modes, "landlock")
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Errorf("bubblewrap is not installed; CI must install the Debian package bubblewrap")
		} else {
			t.Logf("SANDBOX MODE NOT TESTED: bwrap (bubblewrap is not installed: apt-get install bubblewrap)")
		}
	} else {
		modes = append(modes, "bwrap")
	}
	return modes
}

func landlockABI() (int, error) { return llsys.LandlockGetABIVersion() }

// TestExecSandbox runs ordinary work and escape attempts under every
// sandbox mode the machine offers.
func TestExecSandbox(t *testing.T) {
	t.Parallel()
	_, haveCC := exec.LookPath("cc")
	for _, mode := range sandboxModes(t) {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, map[string]string{"EXEC_SANDBOX": mode, "LOG_LEVEL": "debug"}, withEnv("OPENAI_API_KEY", "sk-openai-secret-value-9"))
			if !strings.Contains(s.Logs(), `"mode":"`+mode+`"`) {
				t.Errorf("the start-up log does not name sandbox %s:\n%s", mode, s.Logs())
			}
			s.writeWS(t, "notes.txt", "alpha\nneedle here\nomega\n")
			s.writeWS(t, "hello.c", "#include <stdio.h>\nint main(void){puts(\"hello from cc\");return 0;}\n")
			mustSucceed(t, s.invoke(t, "exec", execArgs("true"))) // leaves an audit record
			audit := filepath.Join(s.DataDir, "audit_logs")
			outside := filepath.Join(filepath.Dir(s.Workspace), "outside.txt")

			// Ordinary work, in one call (each sandboxed call starts a launcher).
			work := `set -e; ls -la; cat notes.txt; grep -n needle notes.txt
mkdir -p build/pkg && cp notes.txt build/pkg/ && tar -cf build/out.tar -C build pkg && tar -tf build/out.tar
echo scratch > "$TMPDIR/x" && cat "$TMPDIR/x"`
			wants := []string{"notes.txt", "needle here", "2:needle here", "pkg/notes.txt", "scratch"}
			if haveCC == nil {
				work += "\ncc -o hello hello.c && ./hello"
				wants = append(wants, "hello from cc")
			} else {
				t.Logf("no C compiler: the cc build is not tried (the shell build is)")
			}
			out := mustSucceed(t, s.invoke(t, "exec", execArgs(work)))
			for _, w := range wants {
				if !strings.Contains(out, w) {
					t.Errorf("ordinary work under %s: output lacks %q:\n%s", mode, w, out)
				}
			}
			// Escapes, in one call: each line prints ESCAPED when it works.
			// The commands pass the guard; only the sandbox stops them.
			escapes := strings.Join([]string{
				// Under bwrap this lands in the private /tmp (the test's
				// workspace lives in /tmp): the host check below decides.
				"echo pwned > " + outside,
				"echo pwned | tee /etc/toolsvc-pwned && echo ESCAPED write system",
				"echo pwned > /var/tmp/toolsvc-pwned",
				"ls -R " + audit + " && echo ESCAPED list audit",
				"find " + audit + " -type f -exec cat {} + && echo ESCAPED read audit",
				"cat /proc/$PPID/environ /proc/1/environ",
				"true",
			}, "\n")
			res := s.invoke(t, "exec", execArgs(escapes))
			for _, bad := range []string{"ESCAPED", `"call_id"`, "sk-openai-secret-value-9"} {
				if strings.Contains(res.Result, bad) {
					t.Errorf("sandbox %s let %q through:\n%s", mode, bad, res.Result)
				}
			}
			if _, err := os.Stat(outside); err == nil {
				t.Errorf("a file was written outside the workspace under %s", mode)
			}
			if _, err := os.Stat("/var/tmp/toolsvc-pwned"); err == nil {
				os.Remove("/var/tmp/toolsvc-pwned")
				t.Errorf("a file was written to /var/tmp under %s", mode)
			}
		})
	}
}

// TestExecStreamsOutput reads the server-sent events of a streamed call from
// the real server: output events as the command prints, then a result event
// holding the object a plain call returns.
func TestExecStreamsOutput(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	body, _ := json.Marshal(execArgs("echo first; echo second >&2; echo third"))
	req, _ := http.NewRequest("POST", s.URL+"/tools/exec/invoke", bytes.NewReader(body))
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("Content-Type %q", ct)
	}
	var events []struct{ name, data string }
	sc := bufio.NewScanner(resp.Body)
	var name string
	var data []string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = append(data, strings.TrimPrefix(line, "data: "))
		case line == "":
			events = append(events, struct{ name, data string }{name, strings.Join(data, "\n")})
			name, data = "", nil
		}
	}
	if len(events) < 2 {
		t.Fatalf("events: %+v", events)
	}
	var streamed strings.Builder
	for _, e := range events[:len(events)-1] {
		if e.name != "output" {
			t.Errorf("event %q before the result", e.name)
		}
		var d struct{ Text string }
		if err := json.Unmarshal([]byte(e.data), &d); err != nil {
			t.Errorf("output event data is not a JSON object: %q", e.data)
		}
		streamed.WriteString(d.Text)
	}
	for _, w := range []string{"first", "second", "third"} {
		if !strings.Contains(streamed.String(), w) {
			t.Errorf("streamed output lacks %s: %q", w, streamed.String())
		}
	}
	last := events[len(events)-1]
	var res registry.Result
	if last.name != "result" || json.Unmarshal([]byte(last.data), &res) != nil {
		t.Fatalf("last event: %+v", last)
	}
	if res.Status != "success" || res.Result != "first\nthird\n\nSTDERR:\nsecond\n" {
		t.Errorf("result event: %+v", res)
	}
}

func TestExecBusy(t *testing.T) {
	t.Parallel()
	s := startServer(t, map[string]string{"EXEC_MAX_CONCURRENT": "1"})
	done := make(chan struct{})
	go func() {
		defer close(done)
		body, _ := json.Marshal(execArgs(execSpawn(t)+"read x < fifo", "timeout", 600))
		resp, err := http.Post(s.URL+"/tools/exec/invoke", "application/json", bytes.NewReader(body))
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	if err := mkfifo(filepath.Join(s.Workspace, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitForFile(t, filepath.Join(s.Workspace, "ids"))
	res := s.invoke(t, "exec", execArgs("echo second", "timeout", 1))
	mustFail(t, res, "busy", "TOOLSVC_EXEC_MAX_CONCURRENT", "Next:")
	// Release the first command and check the slot is free again.
	f, err := os.OpenFile(filepath.Join(s.Workspace, "fifo"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("go\n")
	f.Close()
	<-done
	if out := mustSucceed(t, s.invoke(t, "exec", execArgs("echo third"))); out != "third\n" {
		t.Errorf("got %q", out)
	}
}

// BenchmarkExecTrue compares, in one run, starting `sh -c true` directly
// from Go with a whole exec call of `true` through the registry (schema,
// guard, temp folder, process group, output formatting), without a sandbox
// and under each sandbox the machine offers:
//
//	go test -run '^$' -bench ExecTrue -benchtime 200x ./cmd/toolsvc/
func BenchmarkExecTrue(b *testing.B) {
	b.Run("direct sh -c true", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command("/bin/sh", "-c", "true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, mode := range []sandbox.Mode{sandbox.None, sandbox.Landlock, sandbox.Bwrap} {
		b.Run("exec tool, sandbox "+string(mode), func(b *testing.B) {
			dir := b.TempDir()
			ws, err := workspace.Open(filepath.Join(dir, "ws"), true)
			if err != nil {
				b.Fatal(err)
			}
			defer ws.Close()
			sb, err := sandbox.New(sandbox.Options{Mode: mode, Workspace: ws.Dir(), Private: []string{filepath.Join(dir, "data")}})
			if err != nil {
				b.Skipf("sandbox %s unavailable: %v", mode, err)
			}
			guard, err := shellguard.New(shellguard.Options{})
			if err != nil {
				b.Fatal(err)
			}
			reg := registry.New(registry.Options{Log: zerolog.Nop()})
			ex := tools.NewExec(ws, tools.ExecOptions{Guard: guard, Sandbox: sb})
			defer ex.Close()
			if err := reg.Register(ex); err != nil {
				b.Fatal(err)
			}
			args := []byte(`{"command":"true"}`)
			for b.Loop() {
				if res := reg.Invoke(context.Background(), "exec", args, registry.Meta{}); res.Status != "success" {
					b.Fatal(res.Result)
				}
			}
		})
	}
}

// TestExecTempFolderIsPrivatePerCall checks that what one command leaves in
// $TMPDIR is gone before the next: a folder left with files is removed (or,
// where each command gets a tmpfs of its own, the tmpfs is gone with the
// command and the folder it was mounted on is empty), and the next gets one
// that holds nothing but its own empty HOME.
func TestExecTempFolderIsPrivatePerCall(t *testing.T) {
	t.Parallel()
	s := startServer(t, map[string]string{"EXEC_SANDBOX": "none"})
	first := strings.TrimSpace(mustSucceed(t, s.invoke(t, "exec", `{"command":"echo secret > \"$TMPDIR/left\" && printf %s \"$TMPDIR\""}`)))
	if left, err := os.ReadDir(first); err == nil && len(left) > 0 || err != nil && !os.IsNotExist(err) {
		t.Errorf("the first call's temp folder %s survived it with %d files in it: %v", first, len(left), err)
	}
	for i := 0; i < 3; i++ {
		out := mustSucceed(t, s.invoke(t, "exec", `{"command":"ls -A \"$TMPDIR\"; stat -c %a \"$TMPDIR\"; ls -A \"$HOME\"; test \"$HOME\" = \"$TMPDIR/home\" && echo home-inside"}`))
		if out != "home\n700\nhome-inside\n" {
			t.Errorf("call %d: TMPDIR does not hold only an empty HOME, or is not private: %q", i, out)
		}
	}
	// Nor does a command see what another one, still running, keeps there.
	done := make(chan string)
	go func() {
		done <- mustSucceed(t, s.invoke(t, "exec", `{"command":"echo secret > \"$TMPDIR/kept\"; echo secret > \"$HOME/kept\"; sleep 2; ls -A \"$TMPDIR\""}`))
	}()
	time.Sleep(500 * time.Millisecond)
	if out := mustSucceed(t, s.invoke(t, "exec", `{"command":"ls -A \"$TMPDIR\" \"$HOME\""}`)); strings.Contains(out, "kept") {
		t.Errorf("a command sees the files of another one running beside it in its TMPDIR or HOME:\n%s", out)
	}
	if out := <-done; out != "home\nkept\n" {
		t.Errorf("the running command lost its own files: %q", out)
	}
}
