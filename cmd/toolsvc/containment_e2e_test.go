package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// binDir holds the service binary built for the tests; TestMain removes it.
var binDir = filepath.Join(os.TempDir(), fmt.Sprintf("toolsvc-e2e-bin-%d", os.Getpid()))

func TestMain(m *testing.M) {
	code := m.Run()
	_ = os.RemoveAll(binDir)
	os.Exit(code)
}

// serviceBinary builds the service once per test binary, for the tests that
// must run it as a process of its own (to kill it).
var serviceBinary = sync.OnceValues(func() (string, error) {
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", err
	}
	out := filepath.Join(binDir, "toolsvc")
	if b, err := exec.Command("go", "build", "-o", out, ".").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, b)
	}
	return out, nil
})

// processService is the real binary running in its own process.
type processService struct {
	cmd       *exec.Cmd
	URL       string
	Workspace string
	DataDir   string
	logs      *syncBuffer
}

// startProcess starts the service binary with the given TOOLSVC_* variables
// (names without the prefix) and waits until it listens.
func startProcess(t *testing.T, base string, env map[string]string) *processService {
	t.Helper()
	bin, err := serviceBinary()
	if err != nil {
		t.Fatal(err)
	}
	p := &processService{Workspace: filepath.Join(base, "ws"), DataDir: filepath.Join(base, "data"), logs: &syncBuffer{}}
	vars := map[string]string{"ADDR": "127.0.0.1:0", "WORKSPACE": p.Workspace, "DATA_DIR": p.DataDir, "LOG_LEVEL": "info"}
	for k, v := range env {
		vars[k] = v
	}
	p.cmd = exec.Command(bin)
	p.cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range vars {
		p.cmd.Env = append(p.cmd.Env, "TOOLSVC_"+k+"="+v)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Bytes()
			p.logs.Write(append(append([]byte(nil), line...), '\n'))
			var rec struct{ Message, Addr string }
			if json.Unmarshal(line, &rec) == nil && rec.Message == "listening" {
				addr <- rec.Addr
			}
		}
	}()
	select {
	case a := <-addr:
		p.URL = "http://" + a
	case <-time.After(60 * time.Second):
		t.Fatalf("the service did not start:\n%s", p.logs.String())
	}
	return p
}

// TestExecNothingOutlivesServiceKill kills the service with SIGKILL while a
// command runs that has started processes detached in every usual way, and
// checks that the kernel then ends them all: the command is the first
// process of its own PID namespace (or bubblewrap's), and its parent-death
// signal fires when the thread that started it dies with the service.
func TestExecNothingOutlivesServiceKill(t *testing.T) {
	for _, mode := range append([]string{"none"}, sandboxModes(t)...) {
		t.Run(mode, func(t *testing.T) {
			p := startProcess(t, t.TempDir(), map[string]string{"EXEC_SANDBOX": mode})
			base := 8000 + int(time.Now().UnixNano()%1000)
			script := fmt.Sprintf(`setsid sleep %[1]d.1 </dev/null >/dev/null 2>&1 &
nohup sleep %[1]d.2 </dev/null >/dev/null 2>&1 &
(setsid sh -c 'sleep %[1]d.3 & sleep %[1]d.4' </dev/null >/dev/null 2>&1 &) &
setsid sh -c 'while :; do sleep %[1]d.5; done' </dev/null >/dev/null 2>&1 &
sleep 0.3; echo up > started; sleep %[1]d.6`, base)
			body, _ := json.Marshal(map[string]any{"command": script, "timeout": 300})
			go func() {
				resp, err := http.Post(p.URL+"/tools/exec/invoke", "application/json", bytes.NewReader(body))
				if err == nil {
					resp.Body.Close()
				}
			}()
			waitForFile(t, filepath.Join(p.Workspace, "started"))
			marker := fmt.Sprintf("sleep %d.", base)
			waitFor(t, "the command's detached processes", func() bool { return len(markerProcs(marker)) >= 5 })
			if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = p.cmd.Wait()
			// The kernel tears the namespace down as soon as its first
			// process dies; allow it a moment on a loaded machine.
			deadline := time.Now().Add(10 * time.Second)
			var left []string
			for {
				left = markerProcs(marker)
				if len(left) == 0 || time.Now().After(deadline) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if len(left) > 0 {
				t.Errorf("processes outlived the killed service:\n%s", strings.Join(left, "\n"))
				for _, l := range left {
					if pid, err := strconv.Atoi(strings.SplitN(l, ":", 2)[0]); err == nil {
						_ = sysKill(pid, syscall.SIGKILL)
					}
				}
			}
		})
	}
}

// markerProcs lists the live processes whose command line holds marker.
func markerProcs(marker string) []string {
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

// TestExecUser: a root service with TOOLSVC_EXEC_USER runs commands as that
// account, says so at start-up, and they can work in a workspace that
// account may write.
func TestExecUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("TOOLSVC_EXEC_USER needs a root service; this run is unprivileged")
	}
	base := t.TempDir()
	ws := filepath.Join(base, "shared-ws")
	for _, d := range []string{filepath.Dir(base), base} {
		os.Chmod(d, 0o755)
	}
	if err := os.Mkdir(ws, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(ws, 0o777)
	for _, mode := range append([]string{"none"}, sandboxModes(t)...) {
		t.Run(mode, func(t *testing.T) {
			s := startServer(t, map[string]string{"WORKSPACE": ws, "EXEC_SANDBOX": mode, "EXEC_USER": "65534:65534", "LOG_LEVEL": "debug"})
			if !strings.Contains(s.Logs(), "run as 65534:65534 (uid 65534)") {
				t.Errorf("the start-up log does not say who commands run as:\n%s", s.Logs())
			}
			out := mustSucceed(t, s.invoke(t, "exec", execArgs(`id -u; echo x > by-nobody.txt && stat -c %u by-nobody.txt; rm -- by-nobody.txt`)))
			if out != "65534\n65534\n" {
				t.Errorf("command ran as %q, want uid 65534", out)
			}
			// The call's own HOME belongs to that account, and so does a
			// TOOLSVC_EXEC_HOME the service creates for it.
			home := `echo h > "$HOME/.h" && stat -c '%u %a' "$HOME"`
			if out := mustSucceed(t, s.invoke(t, "exec", execArgs(home))); out != "65534 700\n" {
				t.Errorf("the call's HOME: %q, want a private folder of uid 65534", out)
			}
			s.Stop(t)
			s = startServer(t, map[string]string{"WORKSPACE": ws, "EXEC_SANDBOX": mode, "EXEC_USER": "65534:65534",
				"EXEC_HOME": filepath.Join(base, "home-"+mode)})
			if out := mustSucceed(t, s.invoke(t, "exec", execArgs(home+` && cat "$HOME/.h"`))); out != "65534 700\nh\n" {
				t.Errorf("TOOLSVC_EXEC_HOME: %q, want a private folder of uid 65534 that keeps .h", out)
			}
		})
	}
}
