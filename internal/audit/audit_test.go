package audit

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func newLog(t *testing.T, opts Options) *Log {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = filepath.Join(t.TempDir(), "audit_logs")
	}
	l, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func readRecord(t *testing.T, l *Log, rec Record) Record {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(l.Dir(), FileName(rec)))
	if err != nil {
		t.Fatal(err)
	}
	var got Record
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
	return got
}

func TestPendingThenFinal(t *testing.T) {
	l := newLog(t, Options{})
	start := time.Date(2026, 12, 2, 10, 30, 0, 123, time.FixedZone("CST", 8*3600))
	rec := Record{CallID: "c1", ToolName: "exec", Arguments: json.RawMessage(`{"command":"ls"}`), SessionID: "s", Timestamp: start, Status: "pending"}
	if err := l.Write(rec); err != nil {
		t.Fatal(err)
	}
	// A crash now leaves the pending record behind.
	if got := readRecord(t, l, rec); got.Status != "pending" || got.Timestamp.Location() != time.UTC {
		t.Errorf("pending record: %+v", got)
	}
	if !strings.HasPrefix(FileName(rec), "2026-12-02/20261202T023000.000000123Z_c1.json") {
		t.Errorf("file name %s", FileName(rec))
	}
	rec.Status, rec.Result, rec.DurationMS = "success", "total 0", 5
	if err := l.Write(rec); err != nil {
		t.Fatal(err)
	}
	got := readRecord(t, l, rec)
	if got.Status != "success" || got.Result != "total 0" || got.DurationMS != 5 || got.ResultLength != 7 || got.ResultTruncated {
		t.Errorf("final record: %+v", got)
	}
	entries, _ := os.ReadDir(filepath.Join(l.Dir(), "2026-12-02"))
	if len(entries) != 1 {
		t.Errorf("want exactly one file, no temporaries: %v", entries)
	}
}

func TestNamesSortByTime(t *testing.T) {
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var names []string
	for i := 0; i < 5; i++ {
		names = append(names, FileName(Record{CallID: fmt.Sprintf("z%d", 9-i), Timestamp: base.Add(time.Duration(i) * time.Millisecond)}))
	}
	for i := 1; i < len(names); i++ {
		if names[i-1] >= names[i] {
			t.Errorf("%s sorts after %s", names[i-1], names[i])
		}
	}
}

func TestCuts(t *testing.T) {
	l := newLog(t, Options{MaxResultChars: 10, MaxArgChars: 8})
	rec := Record{CallID: "c2", Timestamp: time.Now(), Status: "success",
		Result:    strings.Repeat("界", 25),
		Arguments: json.RawMessage(`{"path":"a","content":"0123456789abcdef","api_key":"abc","nested":{"Password":"hunter2"}}`)}
	if err := l.Write(rec); err != nil {
		t.Fatal(err)
	}
	got := readRecord(t, l, rec)
	if !got.ResultTruncated || got.Result != strings.Repeat("界", 10) || got.ResultLength != 25 {
		t.Errorf("result cut: %+v", got)
	}
	args, _ := json.Marshal(got.Arguments)
	for _, w := range []string{`"content":"01234567"`, `"api_key":"[REDACTED]"`, `"Password":"[REDACTED]"`, `"path":"a"`} {
		if !strings.Contains(string(args), w) {
			t.Errorf("arguments lack %s: %s", w, args)
		}
	}
	if strings.Contains(string(args), "hunter2") || !got.ArgumentsTruncated {
		t.Errorf("arguments: %s truncated=%v", args, got.ArgumentsTruncated)
	}
}

// TestNoTornReads has readers watch a record while it is rewritten: every
// read must parse as a whole record.
func TestNoTornReads(t *testing.T) {
	l := newLog(t, Options{MaxResultChars: 1 << 20})
	rec := Record{CallID: "torn", Timestamp: time.Now(), Status: "pending"}
	if err := l.Write(rec); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(l.Dir(), FileName(rec))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			rec.Result = strings.Repeat("x", 1000+i%50000)
			if err := l.Write(rec); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for i := 0; i < 300; i++ {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var r Record
		if err := json.Unmarshal(data, &r); err != nil {
			t.Fatalf("torn read: %v", err)
		}
	}
	close(stop)
	wg.Wait()
}

func TestPrune(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	l := newLog(t, Options{RetentionDays: 30, Now: func() time.Time { return now }})
	for _, d := range []string{"2026-10-01", "2026-11-01", "2026-11-02", "2026-12-02", "not-a-day"} {
		os.MkdirAll(filepath.Join(l.Dir(), d), 0o755)
	}
	n, err := l.Prune()
	if err != nil || n != 2 {
		t.Fatalf("Prune = %d, %v", n, err)
	}
	left, _ := os.ReadDir(l.Dir())
	var names []string
	for _, e := range left {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != "2026-11-02,2026-12-02,not-a-day" {
		t.Errorf("left %v", names)
	}
	keep := newLog(t, Options{RetentionDays: 0})
	os.MkdirAll(filepath.Join(keep.Dir(), "2000-01-01"), 0o755)
	if n, _ := keep.Prune(); n != 0 {
		t.Error("retention 0 deleted something")
	}
}
