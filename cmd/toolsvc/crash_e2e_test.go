package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/audit"
)

// binService is the real toolsvc binary running as a child process.
type binService struct {
	cmd  *exec.Cmd
	url  string
	done chan struct{}
}

// startBinary runs bin on the given workspace and data folder and waits
// until it listens.
func startBinary(t *testing.T, bin, ws, data string) *binService {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"TOOLSVC_ADDR=127.0.0.1:0",
		"TOOLSVC_WORKSPACE=" + ws,
		"TOOLSVC_DATA_DIR=" + data,
		"TOOLSVC_EXEC_SANDBOX=none",
		"TOOLSVC_LOG_LEVEL=info",
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &binService{cmd: cmd, done: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var m struct{ Message, Addr string }
			if json.Unmarshal(sc.Bytes(), &m) == nil && m.Message == "listening" {
				addr <- m.Addr
			}
		}
		io.Copy(io.Discard, out)
	}()
	go func() { cmd.Wait(); close(s.done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-s.done })
	select {
	case a := <-addr:
		s.url = "http://" + a
	case <-s.done:
		t.Fatal("the service exited before listening")
	case <-time.After(30 * time.Second):
		t.Fatal("the service did not listen in time")
	}
	return s
}

// killProcessesIn kills the processes whose working folder is dir: the
// commands a killed service left running.
func killProcessesIn(dir string) {
	procs, _ := filepath.Glob("/proc/[0-9]*/cwd")
	for _, p := range procs {
		if cwd, err := os.Readlink(p); err == nil && cwd == dir {
			var pid int
			if _, err := fmt.Sscan(filepath.Base(filepath.Dir(p)), &pid); err == nil {
				_ = sysKill(pid, syscall.SIGKILL) // it may have ended already
			}
		}
	}
}

// TestKilledMidCall kills the service (SIGKILL: no shutdown, no deferred
// code) while a command runs, starts it again on the same data folder, and
// finds the call recorded as interrupted and the dead process's journal
// gone.
func TestKilledMidCall(t *testing.T) {
	base := t.TempDir()
	bin := filepath.Join(base, "toolsvc")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ws, data := filepath.Join(base, "ws"), filepath.Join(base, "data")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	realWS, _ := filepath.EvalSymlinks(ws)
	t.Cleanup(func() { killProcessesIn(realWS) })

	first := startBinary(t, bin, ws, data)
	go func() {
		// The answer never comes: the service dies first.
		resp, err := http.Post(first.url+"/tools/exec/invoke", "application/json", strings.NewReader(`{"command":"touch started && sleep 30","timeout":120}`))
		if err == nil {
			resp.Body.Close()
		}
	}()
	waitFor(t, "the command to start", func() bool {
		_, err := os.Stat(filepath.Join(ws, "started"))
		return err == nil && len(startedCalls(data)) == 1
	})
	call := startedCalls(data)[0]
	journal := filepath.Join(data, "audit_logs", ".journal")
	deadSegments, _ := filepath.Glob(filepath.Join(journal, "*.jsonl"))
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-first.done
	if _, err := os.Stat(filepath.Join(data, "audit_logs", audit.FileName(call))); !os.IsNotExist(err) {
		t.Fatalf("a record of the call before the restart: %v", err)
	}

	second := startBinary(t, bin, ws, data)
	raw, err := os.ReadFile(filepath.Join(data, "audit_logs", audit.FileName(call)))
	if err != nil {
		t.Fatalf("no record of the killed call after the restart: %v", err)
	}
	var rec audit.Record
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Status != audit.StatusInterrupted || rec.ErrorCode != audit.CodeInterrupted || rec.ToolName != "exec" || rec.CallID != call.CallID {
		t.Errorf("record of the killed call: %s", raw)
	}
	if args, _ := json.Marshal(rec.Arguments); !strings.Contains(string(args), "sleep 30") {
		t.Errorf("arguments of the killed call: %s", args)
	}
	for _, seg := range deadSegments {
		if _, err := os.Stat(seg); !os.IsNotExist(err) {
			t.Errorf("the dead process's journal %s is still there: %v", filepath.Base(seg), err)
		}
	}
	// A clean stop leaves no journal at all.
	second.cmd.Process.Signal(syscall.SIGTERM)
	<-second.done
	if left, _ := filepath.Glob(filepath.Join(journal, "*")); len(left) != 0 {
		t.Errorf("journal after a clean stop: %v", left)
	}
}
