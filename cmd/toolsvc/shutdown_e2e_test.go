package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/audit"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/toolerr"
)

// waitFor polls cond until it holds or the deadline passes; it observes
// state rather than assuming how long something takes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitGuard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startedCalls returns the calls the audit journal noted as started, in
// every segment under dataDir.
func startedCalls(dataDir string) []audit.Record {
	var out []audit.Record
	files, _ := filepath.Glob(filepath.Join(dataDir, "audit_logs", ".journal", "*.jsonl"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			var r audit.Record
			if json.Unmarshal([]byte(line), &r) == nil && r.Status == audit.StatusStarted {
				out = append(out, r)
			}
		}
	}
	return out
}

// TestShutdownDuringCall stops the service (as SIGTERM does) while a call
// runs: the call is canceled and answered, its audit record says so, and
// the service exits without waiting for the command: its shutdown does not
// run into TOOLSVC_SHUTDOWN_TIMEOUT (which is shorter than the command, and
// long enough for a loaded machine), which it would log.
func TestShutdownDuringCall(t *testing.T) {
	t.Parallel()
	s := startServer(t, map[string]string{"SHUTDOWN_TIMEOUT": "90s", "EXEC_SANDBOX": "none"})
	type answer struct {
		res  registry.Result
		code int
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		resp, err := http.Post(s.URL+"/tools/exec/invoke", "application/json", strings.NewReader(`{"command":"touch started && sleep 500","timeout":600}`))
		if err != nil {
			done <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		var res registry.Result
		err = json.NewDecoder(resp.Body).Decode(&res)
		done <- answer{res: res, code: resp.StatusCode, err: err}
	}()
	waitFor(t, "the command to start", func() bool {
		_, err := os.Stat(filepath.Join(s.Workspace, "started"))
		return err == nil && len(startedCalls(s.DataDir)) == 1
	})
	callID := startedCalls(s.DataDir)[0].CallID

	start := time.Now()
	s.Stop(t)
	stopped := time.Since(start)

	a := <-done
	if a.err != nil || a.code != 200 {
		t.Fatalf("the running call got no answer: %v (HTTP %d)", a.err, a.code)
	}
	if a.res.Status != registry.StatusError || a.res.Error == nil || a.res.Error.Code != toolerr.Canceled {
		t.Errorf("result of the cut-off call: %+v", a.res)
	}
	if strings.Contains(s.Logs(), "shutdown did not finish in time") {
		t.Errorf("shutdown ran into its timeout (after %v): the running command was not stopped", stopped)
	}
	rec := readAudit(t, s, callID)
	if rec.Status != registry.StatusError || rec.ErrorCode != toolerr.Canceled {
		t.Errorf("audit record of the cut-off call: %+v", rec)
	}
	// New calls are refused once the service has stopped.
	if _, err := http.Post(s.URL+"/tools/list_dir/invoke", "application/json", strings.NewReader(`{}`)); err == nil {
		t.Error("the stopped service still answers")
	}
}
