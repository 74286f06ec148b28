//go:build linux

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/countbot/toolsvc/internal/mcpmount/mcptest"
)

// memoryProcs returns the node processes of server-memory whose
// environment holds marker (the entry's env passes it): one per instance,
// not the sandbox's own processes around them.
func memoryProcs(marker string) []int {
	var out []int
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		env, err1 := os.ReadFile(filepath.Join("/proc", d.Name(), "environ"))
		cmd, err2 := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err1 != nil || err2 != nil || !bytes.Contains(env, []byte(marker)) {
			continue
		}
		if argv0, _, _ := bytes.Cut(cmd, []byte{0}); filepath.Base(string(argv0)) == "node" {
			out = append(out, pid)
		}
	}
	return out
}

// TestMCPPerKey mounts server-memory from npm with "per_key": true, its
// graph file under ${WORKSPACE}, behind a policy that gives every key a
// folder of its own (`default: {workspace: "tenants/{key}"}`): alice
// creates an entity; bob's read_graph and search_nodes do not see it,
// alice's do; the graph file is in alice's folder on disk, in nobody
// else's. Each key's instance is a process of its own beside the listing
// instance; after idle_timeout without calls alice's stops, and her next
// call finds her graph again in her file. When the service stops, no
// process of the server is left.
func TestMCPPerKey(t *testing.T) {
	t.Parallel()
	// The keys' sandboxes show their folders and the system, so the
	// server is installed where an operator would put it for every key.
	nm := mcptest.CopyModules(t, mcptest.NpmServers(t), mcptest.SystemDir(t))
	marker := "E2E_PER_KEY_MARKER=" + strconv.Itoa(os.Getpid()) + "-" + t.Name()
	file := writeToolsFile(t, `{"mcpServers": {
  "memory": {"command": "node", "args": [`+mustJSON(mcptest.MemoryJS(nm))+`],
             "env": {"MEMORY_FILE_PATH": "${WORKSPACE}/memory.jsonl",
                     "E2E_PER_KEY_MARKER": `+mustJSON(strings.TrimPrefix(marker, "E2E_PER_KEY_MARKER="))+`},
             "per_key": true, "idle_timeout": "3s"}
}}`)
	policy := writePolicy(t, `default: {workspace: "tenants/{key}"}`+"\n")
	s := startServer(t, map[string]string{"TOOLS_FILE": file, "API_KEYS": policyKeys(), "POLICY_FILE": policy})
	logMCPOnFailure(t, s)
	waitMCPServers(t, s, "memory")
	alice, bob := s.asKey(policyAliceKey), s.asKey(policyBobKey)

	// Listed from the start, by the listing instance alone.
	_, body := alice.do(t, "GET", "/tools", nil, nil)
	assertContains(t, "GET /tools", string(body), `"memory__create_entities"`, `"memory__read_graph"`, `"memory__search_nodes"`)
	if n := len(memoryProcs(marker)); n != 1 {
		t.Errorf("%d server processes before any call, want the listing instance alone", n)
	}

	const entity = "alice-project-9b2e"
	mustSucceed(t, alice.invoke(t, "memory__create_entities", map[string]any{"entities": []any{
		map[string]any{"name": entity, "entityType": "project", "observations": []string{aliceSecret}}}}))
	for _, check := range []struct {
		tool string
		args map[string]any
	}{{"memory__read_graph", map[string]any{}}, {"memory__search_nodes", map[string]any{"query": entity}}} {
		out := mustSucceed(t, bob.invoke(t, check.tool, check.args))
		if strings.Contains(out, entity) || strings.Contains(out, aliceSecret) {
			t.Errorf("bob's %s sees alice's entity: %s", check.tool, out)
		}
		assertContains(t, "alice's "+check.tool, mustSucceed(t, alice.invoke(t, check.tool, check.args)), entity, aliceSecret)
	}

	// The graph is in alice's folder, and only there.
	if b, err := os.ReadFile(filepath.Join(s.Workspace, "tenants", "alice", "memory.jsonl")); err != nil || !bytes.Contains(b, []byte(aliceSecret)) {
		t.Errorf("alice's graph file: %q, %v", b, err)
	}
	for _, p := range []string{"memory.jsonl", "tenants/bob/memory.jsonl"} {
		if b, err := os.ReadFile(filepath.Join(s.Workspace, p)); err == nil && bytes.Contains(b, []byte(entity)) {
			t.Errorf("%s holds alice's entity: %s", p, b)
		}
	}
	if n := len(memoryProcs(marker)); n != 3 {
		t.Errorf("%d server processes, want the listing instance, alice's and bob's", n)
	}

	// Idle for idle_timeout: the keys' instances stop, the listing one
	// stays; alice's next call starts hers again on her file.
	waitFor(t, "the keys' instances to stop when idle", func() bool { return len(memoryProcs(marker)) == 1 })
	assertContains(t, "GET /readyz", func() string { _, b := s.do(t, "GET", "/readyz", nil, nil); return string(b) }(), `"mcp:memory":"ok"`)
	assertContains(t, "alice's graph after her instance stopped", mustSucceed(t, alice.invoke(t, "memory__read_graph", map[string]any{})), entity)

	s.Stop(t)
	if left := memoryProcs(marker); len(left) != 0 {
		t.Errorf("server processes left after the service stopped: %v", left)
	}
}
