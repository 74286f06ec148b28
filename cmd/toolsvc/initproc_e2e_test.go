//go:build linux

package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestPID1ReapsOrphans: started as the first process of a PID namespace,
// as in a container without an init, the service runs as a child of
// itself under a small init: the orphans bubblewrap leaves (one per
// command) are reaped instead of piling up as zombies, SIGTERM reaches
// the service, which shuts down cleanly, and the init ends with the
// service's status, 137 when it was killed.
func TestPID1ReapsOrphans(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("a PID namespace of its own needs root here")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("no unshare here")
	}
	if out, err := exec.Command(unshare, "--pid", "--fork", "--mount-proc", "true").CombinedOutput(); err != nil {
		t.Skipf("no PID namespace can be made here: %v %s", err, out)
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("bubblewrap missing under CI (install the bubblewrap package)")
		}
		t.Skip("no bubblewrap here: nothing leaves orphans on every command")
	}
	bin, err := serviceBinary()
	if err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()

	// start runs the service as PID 1 of a new PID namespace (with its
	// own /proc, as in a container) and returns the init's process ID as
	// seen from here, the log, the base URL and what ends unshare.
	start := func(t *testing.T) (int, *syncBuffer, string, chan error) {
		port := freePort(t)
		dir := t.TempDir()
		cmd := exec.Command(unshare, "--pid", "--fork", "--mount-proc", "--kill-child", bin)
		cmd.Env = environ(map[string]string{
			"ADDR":          "127.0.0.1:" + strconv.Itoa(port),
			"WORKSPACE":     filepath.Join(base, "ws"),
			"DATA_DIR":      filepath.Join(dir, "data"),
			"EXEC_SANDBOX":  "bwrap",
			"AUDIT_ENABLED": "false",
		}, nil, "PATH="+os.Getenv("PATH"))
		logs := &syncBuffer{}
		cmd.Stdout, cmd.Stderr = logs, logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			<-done
		})
		url := "http://127.0.0.1:" + strconv.Itoa(port)
		deadline := time.Now().Add(startGuard)
		for {
			resp, err := http.Get(url + "/healthz")
			if err == nil {
				resp.Body.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the service did not start as PID 1; log:\n%s", logs)
			}
			time.Sleep(50 * time.Millisecond)
		}
		kids := children(cmd.Process.Pid)
		if len(kids) != 1 {
			t.Fatalf("unshare has children %v, want the init alone", kids)
		}
		// A service killed outright leaves its control groups, named for
		// its PID namespace, which no other service removes: the test
		// does, once the namespace is gone.
		if ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", kids[0])); err == nil {
			ns = strings.TrimSuffix(strings.TrimPrefix(ns, "pid:["), "]")
			t.Cleanup(func() { removeGroups("-ns" + ns) })
		}
		return kids[0], logs, url, done
	}

	t.Run("orphans reaped, SIGTERM passed on", func(t *testing.T) {
		init, logs, url, done := start(t)
		for range 5 {
			res := postJSON(t, url+"/tools/exec/invoke", `{"command":"sleep 0.01 & true"}`)
			if !strings.Contains(res, `"exit_code":0`) {
				t.Fatalf("exec: %s", res)
			}
		}
		var zombies []string
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			zombies = zombies[:0]
			live := 0
			for _, k := range children(init) {
				if state, comm := procState(k); state == "Z" {
					zombies = append(zombies, fmt.Sprintf("%d %s", k, comm))
				} else if state != "" {
					live++
				}
			}
			if len(zombies) == 0 && live >= 1 || time.Now().After(deadline) {
				if live < 1 {
					t.Errorf("the init has no live child: the service is not running under it")
				}
				break
			}
		}
		if len(zombies) > 0 {
			t.Errorf("after 5 commands the init holds %d zombies: %v", len(zombies), zombies)
		}
		if err := syscall.Kill(init, syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := waitExit(done); err != nil {
			t.Errorf("after SIGTERM: %v; log:\n%s", err, logs)
		}
		if !strings.Contains(logs.String(), `"message":"stopped"`) {
			t.Errorf("the service did not shut down cleanly; log:\n%s", logs)
		}
	})

	t.Run("the service's status", func(t *testing.T) {
		init, logs, _, done := start(t)
		svc := children(init)
		_, initName := procState(init)
		if len(svc) != 1 {
			t.Fatalf("the init has children %v, want the service alone", svc)
		}
		if _, name := procState(svc[0]); name != initName {
			t.Fatalf("the init's child is %s, not the service (%s)", name, initName)
		}
		if err := syscall.Kill(svc[0], syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		err := waitExit(done)
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 128+int(syscall.SIGKILL) {
			t.Errorf("the init ended with %v after its service was killed, want status %d; log:\n%s", err, 128+int(syscall.SIGKILL), logs)
		}
	})
}

// postJSON posts body to url and returns the answer's body.
func postJSON(t *testing.T, url, body string) string {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// removeGroups removes the empty control-group folders whose name ends
// with suffix, and the call groups in them, in every hierarchy.
func removeGroups(suffix string) {
	_ = filepath.WalkDir("/sys/fs/cgroup", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if strings.Count(p, "/") > 9 {
			return fs.SkipDir
		}
		if strings.HasPrefix(d.Name(), "toolsvc-") && strings.HasSuffix(d.Name(), suffix) {
			calls, _ := filepath.Glob(filepath.Join(p, "call-*"))
			for _, c := range calls {
				_ = syscall.Rmdir(c)
			}
			_ = syscall.Rmdir(p)
			return fs.SkipDir
		}
		return nil
	})
}

// children lists the processes whose parent is pid.
func children(pid int) []int {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []int
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, w := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(w); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// procState returns a process's state letter and name, or "" when it is
// gone.
func procState(pid int) (state, comm string) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", ""
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open || len(s) < end+3 {
		return "", ""
	}
	return s[end+2 : end+3], s[open+1 : end]
}

// waitExit waits for a process to end (done), at most half a minute (a
// service shuts down in a second or two). The error stays on done for the
// test's cleanup.
func waitExit(done chan error) error {
	select {
	case err := <-done:
		done <- err
		return err
	case <-time.After(30 * time.Second):
		return errors.New("did not end within 30s")
	}
}
