package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/countbot/toolsvc/internal/audit"
)

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
	t.Parallel()
	base := t.TempDir()
	ws, data := filepath.Join(base, "ws"), filepath.Join(base, "data")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	realWS, _ := filepath.EvalSymlinks(ws)
	t.Cleanup(func() { killProcessesIn(realWS) })

	env := map[string]string{"WORKSPACE": ws, "DATA_DIR": data, "EXEC_SANDBOX": "none"}
	first := startServer(t, env, asProcess())
	go func() {
		// The answer never comes: the service dies first.
		resp, err := http.Post(first.URL+"/tools/exec/invoke", "application/json", strings.NewReader(`{"command":"touch started && sleep 300","timeout":600}`))
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
	first.Kill(t)
	if _, err := os.Stat(filepath.Join(data, "audit_logs", audit.FileName(call))); !os.IsNotExist(err) {
		t.Fatalf("a record of the call before the restart: %v", err)
	}

	second := startServer(t, env, asProcess())
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
	if args, _ := json.Marshal(rec.Arguments); !strings.Contains(string(args), "sleep 300") {
		t.Errorf("arguments of the killed call: %s", args)
	}
	for _, seg := range deadSegments {
		if _, err := os.Stat(seg); !os.IsNotExist(err) {
			t.Errorf("the dead process's journal %s is still there: %v", filepath.Base(seg), err)
		}
	}
	// A clean stop leaves no journal at all.
	second.Stop(t)
	if left, _ := filepath.Glob(filepath.Join(journal, "*")); len(left) != 0 {
		t.Errorf("journal after a clean stop: %v", left)
	}
}
