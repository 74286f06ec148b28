//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// markedProcs returns the processes whose environment holds marker (an
// mcpServers entry's env passes it to the server and to the sandbox's
// processes around it).
func markedProcs(marker string) []int {
	var out []int
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", d.Name(), "environ"))
		if err == nil && bytes.Contains(env, []byte(marker)) {
			out = append(out, pid)
		}
	}
	return out
}

// readyChecks returns the checks of /readyz, as a caller on this machine
// reads them (with the reasons).
func readyChecks(t *testing.T, s *testServer) map[string]string {
	t.Helper()
	_, body := s.do(t, "GET", "/readyz", nil, nil)
	var r struct {
		Status string
		Checks map[string]string
	}
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("/readyz: %v: %s", err, body)
	}
	r.Checks["status"] = r.Status
	return r.Checks
}

// waitMCPServers waits until the first attempt to start of each named MCP
// server has ended, up or down: /readyz no longer says it is starting.
// The service does not wait for its servers; a test that lists or calls
// their tools right after start-up waits for them so.
func waitMCPServers(t *testing.T, s *testServer, names ...string) {
	t.Helper()
	waitFor(t, "the MCP servers "+strings.Join(names, ", ")+" to start", func() bool {
		checks := readyChecks(t, s)
		for _, n := range names {
			if v := checks["mcp:"+n]; v == "" || strings.HasPrefix(v, "starting") {
				return false
			}
		}
		return true
	})
}

// TestMCPStartupDoesNotWait configures four MCP servers that never answer
// initialize (sleep 300, each started in exec's sandbox as npx would be)
// and checks, on the built binary: the service listens at once, well
// under the 30 s a server has to answer; /readyz is ready and says each
// server is starting; a call of a tool of one says it is starting (code
// unavailable, never unknown_tool), while a key the policy does not let
// call the server's tools gets exactly the unknown tool's answer; the
// tools are listed nowhere; SIGTERM ends the service within a few
// seconds, and no process of the servers is left.
func TestMCPStartupDoesNotWait(t *testing.T) {
	t.Parallel()
	marker := "E2E_STARTUP_MARKER=" + strconv.Itoa(os.Getpid()) + "-" + t.Name()
	value := strings.TrimPrefix(marker, "E2E_STARTUP_MARKER=")
	var entries []string
	for _, name := range []string{"filesystem", "fetch", "git", "memory"} {
		entries = append(entries, `"`+name+`": {"command": "sleep", "args": ["300"], "env": {"E2E_STARTUP_MARKER": `+mustJSON(value)+`}}`)
	}
	file := writeToolsFile(t, `{"mcpServers": {`+strings.Join(entries, ", ")+`}}`)
	policy := writePolicy(t, "keys:\n  bob: {tools: {allow: [read_file]}}\n")
	if _, err := serviceBinary(); err != nil { // built before the clock starts
		t.Fatal(err)
	}
	begin := time.Now()
	s := startServer(t, map[string]string{"TOOLS_FILE": file, "API_KEYS": policyKeys(), "POLICY_FILE": policy}, asProcess())
	listening := time.Since(begin)
	// That it did not wait for them shows below: once it listens, each
	// server is still starting. The time is logged, not judged, since the
	// machines are shared.
	t.Logf("start to listening, with four MCP servers that never answer: %s", listening)
	logMCPOnFailure(t, s)
	alice, bob := s.asKey(policyAliceKey), s.asKey(policyBobKey)

	checks := readyChecks(t, alice)
	if checks["status"] != "ready" {
		t.Errorf("/readyz: %v", checks)
	}
	for _, name := range []string{"filesystem", "fetch", "git", "memory"} {
		if !strings.HasPrefix(checks["mcp:"+name], "starting (since ") {
			t.Errorf("/readyz of %s: %q", name, checks["mcp:"+name])
		}
	}
	waitFor(t, "the four servers' processes", func() bool { return len(markedProcs(marker)) >= 4 })

	// A tool of a starting server: not unknown, but starting.
	mustFail(t, alice.invoke(t, "filesystem__read_text_file", map[string]any{"path": "a.txt"}), "unavailable",
		"MCP server filesystem is starting (since ", "try again in a few seconds")
	// Over MCP too (a plain tools/call).
	_, body := alice.do(t, "POST", "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"memory__read_graph","arguments":{}}}`), mcpHeaders)
	assertContains(t, "MCP tools/call of a starting server's tool", string(body), `"isError":true`, "MCP server memory is starting")
	// And one with _meta (a progress token, a trace's context), which the
	// SDK answers from its own list of tools: the same answer.
	withMeta := `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"memory__read_graph","arguments":{},"_meta":{"progressToken":"p1"}}}`
	_, body = alice.do(t, "POST", "/mcp", strings.NewReader(withMeta), mcpHeaders)
	assertContains(t, "MCP tools/call with _meta of a starting server's tool", string(body), `"isError":true`, "MCP server memory is starting")
	// For bob, who may not call it, it is the protocol's unknown tool.
	_, body = bob.do(t, "POST", "/mcp", strings.NewReader(withMeta), mcpHeaders)
	assertContains(t, "bob's MCP tools/call with _meta of a starting server's tool", string(body), `"error"`, "memory__read_graph")
	if strings.Contains(string(body), "is starting") {
		t.Errorf("bob learns that the server is starting: %s", body)
	}
	// A key that may not call the server's tools: exactly unknown.
	resp, denied := bob.do(t, "POST", "/tools/filesystem__read_text_file/invoke", strings.NewReader(`{}`), map[string]string{"Content-Type": "application/json"})
	_, unknown := bob.do(t, "POST", "/tools/nothing__read_text_file/invoke", strings.NewReader(`{}`), map[string]string{"Content-Type": "application/json"})
	if resp.StatusCode != http.StatusNotFound || string(denied) != strings.ReplaceAll(string(unknown), "nothing__", "filesystem__") {
		t.Errorf("bob's call of a starting server's tool: %d %s; an unknown tool: %s", resp.StatusCode, denied, unknown)
	}
	// Listed nowhere, and no definition.
	_, list := alice.do(t, "GET", "/tools", nil, nil)
	if bytes.Contains(list, []byte("filesystem__")) {
		t.Errorf("GET /tools lists a starting server's tool")
	}
	if resp, _ := alice.do(t, "GET", "/tools/filesystem__read_text_file", nil, nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /tools/{name} of a starting server's tool: %d", resp.StatusCode)
	}

	begin = time.Now()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.done:
		s.done <- err
	case <-time.After(startGuard):
		t.Fatalf("the service did not end within %s of SIGTERM", startGuard)
	}
	stopped := time.Since(begin)
	t.Logf("SIGTERM to exit, with four MCP servers starting: %s", stopped)
	// Waiting for a starting server would cost its 30 s connect timeout:
	// anything well below that is the service not waiting.
	if stopped > 20*time.Second {
		t.Errorf("the service took %s to end after SIGTERM: it waited for its starting servers", stopped)
	}
	s.Stop(t)
	// The sandbox's processes are reaped by the kernel once their PID
	// namespace ends: give it a moment.
	waitFor(t, "no process of the servers to be left", func() bool { return len(markedProcs(marker)) == 0 })
}
