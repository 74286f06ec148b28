package audit

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a bytes.Buffer safe for the log's concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestReplicaAndStdout: every record names its replica, in its file and
// on stdout, where each final record (a reconciled one too) is one JSON
// line and starts are not written.
func TestReplicaAndStdout(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "audit_logs")
	var out lockedBuffer
	l := newLog(t, Options{Dir: dir, Replica: "toolsvc-7", Stdout: &out})
	ts := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := Record{CallID: "c" + string(rune('a'+i)), ToolName: "read_file", Arguments: json.RawMessage(`{"path":"a\nb"}`), Timestamp: ts}
			st, err := l.Start(rec)
			if err != nil {
				t.Error(err)
				return
			}
			rec.Status, rec.Result = "success", strings.Repeat("x\n", 100)
			if err := l.Finish(st, rec); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	// One call left without its final record, as a killed process leaves it.
	if _, err := l.Start(Record{CallID: "lost", ToolName: "exec", Timestamp: ts}); err != nil {
		t.Fatal(err)
	}
	abandon(l)

	// The next start reconciles the dead process's call.
	newLog(t, Options{Dir: dir, Replica: "toolsvc-8", Stdout: &out})
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 21 {
		t.Fatalf("%d stdout lines, want 21 (20 finished, 1 reconciled):\n%s", len(lines), out.String())
	}
	for _, line := range lines {
		var rec Record
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("stdout line is not one JSON record: %v: %q", err, line)
		}
		// A reconciled call keeps the replica that ran it.
		if rec.Replica != "toolsvc-7" || rec.Status == StatusStarted {
			t.Errorf("stdout record %s: replica %q status %q", rec.CallID, rec.Replica, rec.Status)
		}
		data, err := os.ReadFile(filepath.Join(dir, FileName(rec)))
		if err != nil || !bytes.Equal(bytes.TrimSpace(data), []byte(line)) {
			t.Errorf("record file of %s differs from its stdout line (%v)", rec.CallID, err)
		}
	}
}
