package auditcli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/audit"
)

func runCLI(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errs bytes.Buffer
	code := Run(context.Background(), args, func(name string) string { return env[name] }, &out, &errs)
	return code, out.String(), errs.String()
}

// writeLog writes records through the real log into data/audit_logs.
func writeLog(t *testing.T, data string, recs ...audit.Record) {
	t.Helper()
	l, err := audit.New(audit.Options{Dir: filepath.Join(data, "audit_logs"), Replica: "cli"})
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		st, err := l.Start(rec)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Finish(st, rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestCommands: each command's exit statuses, the data folder from the
// argument or TOOLSVC_DATA_DIR, and grep's filters.
func TestCommands(t *testing.T) {
	data := t.TempDir()
	day := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	rec := func(id, tool, status, key string, at time.Duration) audit.Record {
		r := audit.Record{CallID: id, ToolName: tool, Status: status, Timestamp: day.Add(at), Arguments: json.RawMessage(`{}`)}
		r.Key = key
		return r
	}
	writeLog(t, data, rec("a", "read_file", "success", "alice", 0), rec("b", "exec", "error", "bob", time.Hour),
		rec("c", "read_file", "success", "bob", 26*time.Hour))
	env := map[string]string{"TOOLSVC_DATA_DIR": data}
	cases := []struct {
		args  []string
		code  int
		wants []string
	}{
		{[]string{"verify"}, ExitOK, []string{"3 records in 1 chains", "OK: the log is intact"}},
		{[]string{"grep", "-tool", "read_file"}, ExitOK, []string{"STARTED", " a\n", " c\n"}},
		{[]string{"grep", "-key", "bob", "-until", "2026-12-03"}, ExitOK, []string{" b\n"}},
		{[]string{"grep", "-status", "error", "-json"}, ExitOK, []string{`"call_id":"b"`}},
		{[]string{"grep", "-since", "2026-12-03T00:00:00Z", "-tool", "exec"}, ExitFound, nil},
		{[]string{"grep", "-since", "yesterday"}, ExitUsage, nil},
		{[]string{"show", "b"}, ExitOK, []string{`"tool_name": "exec"`}},
		{[]string{"show", "zz"}, ExitFound, nil},
		{[]string{"show"}, ExitUsage, nil},
		{[]string{"tail", "-n", "2", "-json"}, ExitOK, []string{`"call_id":"b"`, `"call_id":"c"`}},
		{[]string{"verify", "-pubkey", filepath.Join(data, "none.pub")}, ExitError, nil},
		{[]string{"verify", filepath.Join(data, "elsewhere")}, ExitError, nil},
		{[]string{"verify", "a", "b"}, ExitUsage, nil},
		{[]string{"nope"}, ExitUsage, nil},
		{[]string{"verify", "-h"}, ExitOK, []string{"-pubkey"}},
		{nil, ExitUsage, nil},
	}
	for _, c := range cases {
		code, out, errs := runCLI(t, env, c.args...)
		if code != c.code {
			t.Errorf("%v: exit %d, want %d\n%s%s", c.args, code, c.code, out, errs)
		}
		for _, w := range c.wants {
			if !strings.Contains(out, w) {
				t.Errorf("%v: output lacks %q:\n%s", c.args, w, out)
			}
		}
	}
	// The folder as an argument; a tampered log exits 1.
	files, _ := filepath.Glob(filepath.Join(data, "audit_logs", "2026-12-02", "*.json"))
	os.Remove(files[0])
	if code, out, _ := runCLI(t, nil, "verify", data); code != ExitFound || !strings.Contains(out, "missing") {
		t.Errorf("verify of a log with a record deleted: exit %d\n%s", code, out)
	}
}

func TestParseTime(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"":                     {},
		"90m":                  now.Add(-90 * time.Minute),
		"2026-12-01":           time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
		"2026-12-01T08:30":     time.Date(2026, 12, 1, 8, 30, 0, 0, time.UTC),
		"2026-12-01T08:30:00Z": time.Date(2026, 12, 1, 8, 30, 0, 0, time.UTC),
	} {
		if got, err := parseTime(in, now); err != nil || !got.Equal(want) {
			t.Errorf("parseTime(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}
