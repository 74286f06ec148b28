package tools

import (
	"strings"
	"testing"
	"time"
)

// TestSummaries: what a person deciding a held call reads for exec,
// write_file and edit_file, from the checked arguments.
func TestSummaries(t *testing.T) {
	e, ws := newTestExec(t, ExecOptions{DefaultTimeout: 30 * time.Second, MaxTimeout: 120 * time.Second})
	write, edit := NewWriteFile(ws), NewEditFile(ws)
	long := strings.Repeat("x", 500)
	for _, tc := range []struct {
		name string
		got  string
		want string
	}{
		{"exec, defaults", e.Summarize([]byte(`{"command": "git push origin main"}`)),
			"run the command: \"git push origin main\" (in the workspace's top folder, timeout 30 s)"},
		{"exec, folder and timeout", e.Summarize([]byte(`{"command": "make deploy", "working_dir": "services/api/", "timeout": 90}`)),
			"run the command: \"make deploy\" (in the folder services/api, timeout 90 s)"},
		{"exec, timeout over the bound runs for the bound", e.Summarize([]byte(`{"command": "sleep 1000", "timeout": 1000}`)),
			"run the command: \"sleep 1000\" (in the workspace's top folder, timeout 120 s)"},
		{"exec, folder . is the top", e.Summarize([]byte(`{"command": "ls", "working_dir": "."}`)),
			"run the command: \"ls\" (in the workspace's top folder, timeout 30 s)"},
		{"exec, lines and a carriage return shown", e.Summarize([]byte(`{"command": "echo safe\rrm -rf data\ntrue"}`)),
			"run the command: \"echo safe\\u000drm -rf data ⏎ true\" (in the workspace's top folder, timeout 30 s)"},
		{"write_file", write.Summarize([]byte(`{"path": "deploy/prod.yaml", "content": "replicas: 3\n"}`)),
			"write 12 bytes to deploy/prod.yaml, replacing the file if it exists"},
		{"write_file, a path that walks", write.Summarize([]byte(`{"path": "./notes/../deploy/prod.yaml", "content": "é"}`)),
			"write 2 bytes to deploy/prod.yaml (given as ./notes/../deploy/prod.yaml), replacing the file if it exists"},
		{"write_file, empty", write.Summarize([]byte(`{"path": "a.txt", "content": ""}`)),
			"write 0 bytes to a.txt, replacing the file if it exists"},
		{"write_file, one byte", write.Summarize([]byte(`{"path": "a.txt", "content": "x", "mode": "overwrite"}`)),
			"write 1 byte to a.txt, replacing the file if it exists"},
		{"write_file, append", write.Summarize([]byte(`{"path": "log.txt", "content": "line\n", "mode": "append"}`)),
			"append 5 bytes to the end of log.txt, creating the file if it does not exist"},
		{"edit_file", edit.Summarize([]byte(`{"path": "config/app.yaml", "old_str": "replicas: 1", "new_str": "replicas: 3"}`)),
			"edit config/app.yaml: replace \"replicas: 1\" with \"replicas: 3\""},
		{"edit_file, every occurrence, lines", edit.Summarize([]byte(`{"path": "a.go", "old_str": "foo(\n\tx)", "new_str": "", "replace_all": true}`)),
			"edit a.go: replace every occurrence of \"foo( ⏎     x)\" with \"\""},
		{"unreadable arguments: the generic summary", e.Summarize([]byte(`{"command": 3}`)), ""},
		{"no path: the generic summary", write.Summarize([]byte(`{}`)), ""},
	} {
		if tc.got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, tc.got, tc.want)
		}
	}

	// A long value is cut, says so, and what follows it stays inside the
	// 600 characters the hold point keeps.
	s := e.Summarize([]byte(`{"command": "` + long + `", "timeout": 60}`))
	if !strings.Contains(s, "(cut: 500 characters in all; the arguments hold more)") || !strings.HasSuffix(s, "timeout 60 s)") || len([]rune(s)) > 600 {
		t.Errorf("long command: %d characters: %s", len([]rune(s)), s)
	}
	s = edit.Summarize([]byte(`{"path": "a", "old_str": "` + long + `", "new_str": "y"}`))
	if !strings.Contains(s, "…\" (cut: 500 characters in all") || !strings.HasSuffix(s, ` with "y"`) {
		t.Errorf("long old_str: %s", s)
	}
	// A right-to-left override cannot reverse what the person reads.
	if s := write.Summarize([]byte(`{"path": "safe\u202etxt.sh", "content": ""}`)); !strings.Contains(s, `safe\u202etxt.sh`) {
		t.Errorf("a format character in a path: %s", s)
	}
}
