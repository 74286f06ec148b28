package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countbot/toolsvc/internal/toolerr"
	"github.com/countbot/toolsvc/internal/workspace"
)

type readyz struct {
	Status string            `json:"status"`
	Checks map[string]string `json:"checks"`
	Error  *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (s *testServer) readyz(t *testing.T) (int, readyz) {
	t.Helper()
	resp, body := s.do(t, "GET", "/readyz", nil, nil)
	var r readyz
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("readyz body %s: %v", body, err)
	}
	return resp.StatusCode, r
}

// TestReadyzReportsEachCheck: /readyz probes the workspace and the data
// folder for real and names the check that fails; fixing the folder makes
// the service ready again without a restart.
func TestReadyzReportsEachCheck(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	code, r := s.readyz(t)
	if code != 200 || r.Status != "ready" || r.Checks["workspace"] != "ok" || r.Checks["data_dir"] != "ok" || r.Checks["free_space"] != "ok" {
		t.Fatalf("healthy service: %d %+v", code, r)
	}

	// The data folder deleted.
	if err := os.RemoveAll(s.DataDir); err != nil {
		t.Fatal(err)
	}
	code, r = s.readyz(t)
	if code != 503 || r.Status != "not_ready" || r.Error == nil || r.Error.Code != "not_ready" ||
		!strings.HasPrefix(r.Checks["data_dir"], "missing") || r.Checks["workspace"] != "ok" {
		t.Fatalf("data folder deleted: %d %+v", code, r)
	}
	assertContains(t, "readyz message", r.Error.Message, "data_dir: missing")
	// Replaced by a file: it exists, but is no folder.
	if err := os.WriteFile(s.DataDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, r = s.readyz(t); code != 503 || r.Checks["data_dir"] != "not a folder" {
		t.Fatalf("data folder replaced by a file: %d %+v", code, r)
	}
	os.Remove(s.DataDir)
	if err := os.Mkdir(s.DataDir, 0o750); err != nil {
		t.Fatal(err)
	}
	if code, r = s.readyz(t); code != 200 {
		t.Fatalf("data folder recreated: %d %+v", code, r)
	}

	// The workspace deleted, then recreated.
	if err := os.RemoveAll(s.Workspace); err != nil {
		t.Fatal(err)
	}
	code, r = s.readyz(t)
	if code != 503 || !strings.HasPrefix(r.Checks["workspace"], "missing") {
		t.Fatalf("workspace deleted: %d %+v", code, r)
	}
	if err := os.Mkdir(s.Workspace, 0o755); err != nil {
		t.Fatal(err)
	}
	if code, r = s.readyz(t); code != 200 || r.Checks["workspace"] != "ok" {
		t.Fatalf("workspace recreated: %d %+v", code, r)
	}
	// The probe leaves nothing behind that a listing shows.
	out := mustSucceed(t, s.invoke(t, "list_dir", `{"path":"."}`))
	assertContains(t, "list_dir after readyz", out, "(empty folder)")
}

// TestReadyzFreeSpace: a minimum no disk has makes the service unready,
// and says how much is free.
func TestReadyzFreeSpace(t *testing.T) {
	t.Parallel()
	s := startServer(t, map[string]string{"MIN_FREE_BYTES": "4611686018427387904"}) // 4 EiB
	code, r := s.readyz(t)
	if code != 503 || r.Checks["workspace"] != "ok" || r.Checks["data_dir"] != "ok" {
		t.Fatalf("%d %+v", code, r)
	}
	assertContains(t, "free_space check", r.Checks["free_space"], "below the minimum of 4294967296.0 GiB", "workspace has", "data_dir has")

	s = startServer(t, map[string]string{"MIN_FREE_BYTES": "0"})
	if code, r := s.readyz(t); code != 200 || r.Checks["free_space"] != "" {
		t.Fatalf("MIN_FREE_BYTES=0 turns the check off: %d %+v", code, r)
	}
}

// TestWorkspaceDeletedAndRecreated: while the workspace folder is missing,
// the file tools and memory say it is unavailable (not an empty folder, not
// an empty memory); once it is back, they use the new folder without a
// restart.
func TestWorkspaceDeletedAndRecreated(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	mustSucceed(t, s.invoke(t, "write_file", `{"path":"notes/a.txt","content":"before"}`))
	mustSucceed(t, s.invoke(t, "memory", `{"action":"write","content":"a fact"}`))
	if err := os.RemoveAll(s.Workspace); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ tool, args string }{
		{"list_dir", `{"path":"."}`},
		{"list_dir", `{}`},
		{"file_search", `{"path":".","pattern":"*"}`},
		{"read_file", `{"path":"notes/a.txt"}`},
		{"write_file", `{"path":"notes/b.txt","content":"lost?"}`},
		{"edit_file", `{"path":"notes/a.txt","old_str":"before","new_str":"after"}`},
		{"memory", `{"action":"read"}`},
		{"memory", `{"action":"search","keywords":"fact"}`},
		{"memory", `{"action":"write","content":"another fact"}`},
	} {
		out := mustFail(t, s.invoke(t, c.tool, c.args), toolerr.Unavailable, "workspace folder is unavailable", "Next:")
		if strings.Contains(out, "empty") && !strings.Contains(out, "Do not assume it is empty") {
			t.Errorf("%s %s while the workspace is missing: %s", c.tool, c.args, out)
		}
	}
	if _, err := os.Stat(s.Workspace); !os.IsNotExist(err) {
		t.Fatalf("a tool recreated the missing workspace: %v", err)
	}

	if err := os.Mkdir(s.Workspace, 0o755); err != nil {
		t.Fatal(err)
	}
	out := mustSucceed(t, s.invoke(t, "list_dir", `{"path":"."}`))
	assertContains(t, "list_dir of the new folder", out, "(empty folder)")
	out = mustSucceed(t, s.invoke(t, "memory", `{"action":"read"}`))
	assertContains(t, "memory of the new folder", out, "Memory is empty")
	mustSucceed(t, s.invoke(t, "write_file", `{"path":"notes/c.txt","content":"after"}`))
	mustSucceed(t, s.invoke(t, "memory", `{"action":"write","content":"a new fact"}`))
	if data, err := os.ReadFile(filepath.Join(s.Workspace, "notes/c.txt")); err != nil || string(data) != "after" {
		t.Fatalf("write_file into the recreated workspace: %q %v", data, err)
	}
	out = mustSucceed(t, s.invoke(t, "memory", `{"action":"search","keywords":"fact"}`))
	assertContains(t, "memory search", out, "Found 1 entry", "a new fact")
}

// TestTemporaryFileLeftovers: the temporary files a crash leaves behind
// are removed at start-up (those in the workspace's temporary folder) and
// never shown by list_dir or file_search (all of them).
func TestTemporaryFileLeftovers(t *testing.T) {
	t.Parallel()
	ws := filepath.Join(t.TempDir(), "ws")
	stale := filepath.Join(ws, workspace.TempDir, ".w.tmp-0123456789ab")
	beside := filepath.Join(ws, "sub", ".f.txt.tmp-0123456789ab")
	for _, p := range []string{stale, beside, filepath.Join(ws, "sub", "f.txt")} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("half of a file"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := startServer(t, map[string]string{"WORKSPACE": ws})
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the leftover in %s was not removed at start-up: %v", workspace.TempDir, err)
	}
	mustSucceed(t, s.invoke(t, "write_file", `{"path":"sub/g.txt","content":"whole"}`))
	for _, c := range []struct{ tool, args string }{
		{"list_dir", `{"path":".","recursive":true}`},
		{"list_dir", `{"path":"sub"}`},
		{"file_search", `{"path":".","pattern":"*"}`},
		{"file_search", `{"path":".","pattern":"*tmp*"}`},
	} {
		out := mustSucceed(t, s.invoke(t, c.tool, c.args))
		if strings.Contains(out, ".tmp-") || strings.Contains(out, workspace.TempDir) {
			t.Errorf("%s %s shows a temporary file:\n%s", c.tool, c.args, out)
		}
	}
	out := mustSucceed(t, s.invoke(t, "list_dir", `{"path":".","recursive":true}`))
	assertContains(t, "list_dir", out, "sub/f.txt", "sub/g.txt")
}

// TestMemoryWriteOnFullDisk: with memory/ on a full file system (a 64 KiB
// tmpfs, which needs root to mount), a write fails with a message saying
// the disk is full, and the file keeps exactly what it held.
func TestMemoryWriteOnFullDisk(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root; internal/memory's TestShortWriteLeavesNoTornEntry injects the short write instead")
	}
	s := startServer(t, nil)
	dir := filepath.Join(s.Workspace, "memory")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	// Two entries fill the file's first page and part of its second.
	for _, c := range []string{"written before the disk filled", strings.Repeat("x", 1000) + " another fact written before"} {
		mustSucceed(t, s.invoke(t, "memory", map[string]string{"action": "write", "content": c + strings.Repeat(" padding", 300)}))
	}
	before, err := os.ReadFile(filepath.Join(dir, "MEMORY.md"))
	if err != nil {
		t.Fatal(err)
	}
	fill, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	for chunk := make([]byte, 4096); ; {
		if _, err := fill.Write(chunk); err != nil {
			break
		}
	}
	fill.Close()
	// This one needs a page more than is left: part of it is written,
	// then the kernel reports ENOSPC.
	big, _ := json.Marshal(map[string]string{"action": "write", "content": strings.Repeat("a long fact ", 330)})
	mustFail(t, s.invoke(t, "memory", big), toolerr.ToolError, "is full, so the entry was not saved", "Next:")
	after, err := os.ReadFile(filepath.Join(dir, "MEMORY.md"))
	if err != nil || string(after) != string(before) {
		t.Fatalf("the memory file changed: %d bytes, had %d (%v)", len(after), len(before), err)
	}
	out := mustSucceed(t, s.invoke(t, "memory", `{"action":"read"}`))
	assertContains(t, "read after the failed write", out, "2 entries in 2 lines", "written before the disk filled", "another fact written before")
	if strings.Contains(out, "without a line break") {
		t.Errorf("a torn entry is left:\n%s", out)
	}
}
