package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/countbot/toolsvc/internal/agent/agenttest"
	"github.com/countbot/toolsvc/internal/registry"
)

// aliceSecret is what alice keeps in her folder; no answer to bob may
// hold it.
const aliceSecret = "alice-secret-7f3a9c"

// TestPolicyFolders: with `default: {workspace: "tenants/{key}"}`, alice
// and bob each work in a folder of their own, made private at first use,
// and nothing bob calls reaches alice's: no file tool, exec (.., absolute
// paths, links he makes), memory, file_search, the skills listing, or a
// sub-agent of his. carol, given "." (the whole workspace), sees both.
// Every record carries the folder its call worked in.
func TestPolicyFolders(t *testing.T) {
	t.Parallel()
	var (
		mu          sync.Mutex
		toolResults []string // what bob's sub-agent was told
	)
	llm := agenttest.New(t, func(r agenttest.Request) agenttest.Response {
		msgs := chatMessages(t, r)
		mu.Lock()
		for _, m := range msgs {
			if m.Role == "tool" {
				toolResults = append(toolResults, m.Content)
			}
		}
		mu.Unlock()
		switch n := len(msgs); {
		case n <= 2:
			return agenttest.Call("c1", "read_file", `{"path":"../alice/x.txt"}`)
		case n <= 4:
			return agenttest.Call("c2", "list_dir", `{"path":".","recursive":true}`)
		case n <= 6:
			return agenttest.Call("c3", "memory", `{"action":"search","keywords":"tea"}`)
		default:
			return agenttest.Final("done")
		}
	})
	file := writePolicy(t, `
default: {workspace: "tenants/{key}"}
keys:
  carol: {workspace: "."}
`)
	s := startServer(t, llmEnv(llm.URL, map[string]string{"API_KEYS": policyKeys(), "POLICY_FILE": file}))
	alice, bob, carol := s.asKey(policyAliceKey), s.asKey(policyBobKey), s.asKey(policyCarolKey)

	mustSucceed(t, alice.invoke(t, "write_file", map[string]string{"path": "x.txt", "content": aliceSecret + "\n"}))
	mustSucceed(t, alice.invoke(t, "memory", map[string]string{"action": "write", "content": "alice likes tea " + aliceSecret}))
	s.writeWS(t, "tenants/alice/skills/alices-skill/SKILL.md", "---\nname: alices-skill\ndescription: hers\n---\nbody\n")
	aliceDir := filepath.Join(s.Workspace, "tenants", "alice")
	if b, err := os.ReadFile(filepath.Join(aliceDir, "x.txt")); err != nil || !strings.Contains(string(b), aliceSecret) {
		t.Fatalf("alice's file is not in her folder: %q, %v", b, err)
	}
	if fi, err := os.Stat(aliceDir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("alice's folder: %v, %v; want mode 0700", fi.Mode().Perm(), err)
	}
	// Her own paths are relative to her folder.
	if out := mustSucceed(t, alice.invoke(t, "read_file", map[string]string{"path": "x.txt"})); !strings.Contains(out, aliceSecret) {
		t.Errorf("alice reading her own file: %s", out)
	}

	abs := filepath.Join(aliceDir, "x.txt")
	// refused: the call fails, and says nothing of alice's file.
	refused := func(what string, res registry.Result) {
		t.Helper()
		if res.Status == registry.StatusSuccess {
			t.Errorf("%s succeeded for bob: %s", what, res.Result)
		}
		if strings.Contains(res.Result, aliceSecret) {
			t.Errorf("%s showed bob alice's secret: %s", what, res.Result)
		}
	}
	// hidden: whatever the call answers (a listing of bob's own folder,
	// an empty memory, a command's error), alice's file and folder are
	// not in it.
	hidden := func(what string, res registry.Result, names ...string) {
		t.Helper()
		for _, n := range append(names, aliceSecret) {
			if strings.Contains(res.Result, n) {
				t.Errorf("%s showed bob %q: %s", what, n, res.Result)
			}
		}
	}
	for _, p := range []string{"../alice/x.txt", abs, "tenants/alice/x.txt", "../../tenants/alice/x.txt"} {
		refused("read_file "+p, bob.invoke(t, "read_file", map[string]string{"path": p}))
		refused("edit_file "+p, bob.invoke(t, "edit_file", map[string]string{"path": p, "old_str": aliceSecret, "new_str": "bob was here"}))
		if p != "tenants/alice/x.txt" { // that one is a new file in bob's own folder
			refused("write_file "+p, bob.invoke(t, "write_file", map[string]string{"path": p, "content": "bob was here"}))
		}
	}
	refused("list_dir ..", bob.invoke(t, "list_dir", map[string]any{"path": ".."}))
	hidden("list_dir .", bob.invoke(t, "list_dir", map[string]any{"path": ".", "recursive": true}), "alice", "x.txt")
	hidden("file_search", bob.invoke(t, "file_search", map[string]any{"path": ".", "pattern": "x.txt"}), "alice/")
	hidden("file_search content", bob.invoke(t, "file_search", map[string]any{"path": ".", "pattern": "*", "content": aliceSecret}))
	hidden("memory search", bob.invoke(t, "memory", map[string]string{"action": "search", "keywords": "tea"}), "tea")
	hidden("memory read", bob.invoke(t, "memory", map[string]string{"action": "read"}), "tea")
	for _, cmd := range []string{
		"cat ../alice/x.txt", "cat " + abs, "ln -s ../alice a && cat a/x.txt", "ln -s " + aliceDir + " b && cat b/x.txt",
		"cd / && grep -r " + aliceSecret + " " + s.Workspace,
		"echo bob > ../alice/y.txt",
	} {
		hidden("exec "+cmd, bob.invoke(t, "exec", map[string]string{"command": cmd}))
	}
	for _, cmd := range []string{"ls -la ..", "ls -R ../..", "find " + s.Workspace} {
		hidden("exec "+cmd, bob.invoke(t, "exec", map[string]string{"command": cmd}), "alice", "x.txt")
	}
	// A link bob made in his folder leads nowhere for the file tools either.
	refused("read_file through bob's link", bob.invoke(t, "read_file", map[string]string{"path": "a/x.txt"}))
	if _, err := os.Stat(filepath.Join(aliceDir, "y.txt")); err == nil {
		t.Error("bob's command wrote into alice's folder")
	}
	if b, _ := os.ReadFile(abs); string(b) != aliceSecret+"\n" {
		t.Errorf("alice's file is now %q", b)
	}

	// bob's own work lands in his folder.
	mustSucceed(t, bob.invoke(t, "exec", map[string]string{"command": "echo bob-ok > mine.txt && cat mine.txt"}))
	if b, err := os.ReadFile(filepath.Join(s.Workspace, "tenants", "bob", "mine.txt")); err != nil || string(b) != "bob-ok\n" {
		t.Errorf("bob's file: %q, %v", b, err)
	}

	// Skills: each key lists its own folder's.
	for who, srv := range map[string]*testServer{"alice": alice, "bob": bob} {
		_, body := srv.do(t, "GET", "/skills", nil, nil)
		if has := strings.Contains(string(body), "alices-skill"); has != (who == "alice") {
			t.Errorf("GET /skills as %s: %s", who, body)
		}
	}

	// bob's sub-agent works in bob's folder.
	res := bob.invoke(t, "spawn", map[string]any{"task": "look around", "wait": true})
	mustSucceed(t, res)
	mu.Lock()
	got := strings.Join(toolResults, "\n---\n")
	mu.Unlock()
	if strings.Contains(got, aliceSecret) || !strings.Contains(got, "mine.txt") {
		t.Errorf("bob's sub-agent saw, in its tool results:\n%s", got)
	}

	// carol sees the whole workspace, both folders in it.
	if out := mustSucceed(t, carol.invoke(t, "read_file", map[string]string{"path": "tenants/alice/x.txt"})); !strings.Contains(out, aliceSecret) {
		t.Errorf("carol reading alice's file: %s", out)
	}

	// The records say which folder each call worked in.
	recs := waitAuditRecords(t, s, func(recs []map[string]any) bool {
		for _, r := range recs {
			if r["key"] == "bob" && r["tool_name"] == "spawn" && r["status"] != nil {
				return true
			}
		}
		return false
	})
	for _, r := range recs {
		want := map[any]any{"alice": "tenants/alice", "bob": "tenants/bob", "carol": nil}[r["key"]]
		if r["workspace"] != want {
			b, _ := json.Marshal(r)
			t.Errorf("record of %v's call: workspace %v, want %v: %s", r["key"], r["workspace"], want, b)
		}
	}
}
