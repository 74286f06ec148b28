//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/countbot/toolsvc/internal/agent/agenttest"
	"github.com/countbot/toolsvc/internal/mcpmount/mcptest"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/toolfmt"
)

// Tests of MCP servers nobody here wrote, installed from npm by the test
// set-up, mounted through the tools file and used through the real
// service: server-everything over stdio and over Streamable HTTP, and
// server-memory over stdio.

// npmWorkspace returns a workspace folder holding a copy of the MCP
// servers' node_modules (exec's sandbox may hide the cache they are
// installed in), and that copy.
func npmWorkspace(t *testing.T) (ws, nm string) {
	t.Helper()
	cache := mcptest.NpmServers(t)
	ws = filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	return ws, mcptest.CopyModules(t, cache, ws)
}

// countingProxy stands in front of a Streamable HTTP server on loopback
// and counts the tools/call requests that reach it.
func countingProxy(t *testing.T, port int) (addr string, calls *atomic.Int64) {
	t.Helper()
	calls = &atomic.Int64{}
	target, _ := url.Parse("http://127.0.0.1:" + strconv.Itoa(port))
	proxy := httputil.NewSingleHostReverseProxy(target)
	front := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil {
			body, _ := io.ReadAll(r.Body)
			if bytes.Contains(body, []byte(`"tools/call"`)) {
				calls.Add(1)
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
		}
		proxy.ServeHTTP(w, r)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go front.Serve(ln)
	t.Cleanup(func() { front.Close() })
	return ln.Addr().String(), calls
}

// serverPID finds the node process of the stdio server whose environment
// holds marker (the entry's env passes it), to kill it by its id.
func serverPID(t *testing.T, marker string) int {
	t.Helper()
	var found int
	waitFor(t, "the server process with "+marker, func() bool {
		dirs, _ := os.ReadDir("/proc")
		for _, d := range dirs {
			pid, err := strconv.Atoi(d.Name())
			if err != nil {
				continue
			}
			env, err1 := os.ReadFile(filepath.Join("/proc", d.Name(), "environ"))
			cmd, err2 := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
			if err1 == nil && err2 == nil && bytes.Contains(env, []byte(marker)) && bytes.Contains(cmd, []byte("index.js")) &&
				!bytes.Contains(cmd, []byte("bwrap")) && !bytes.HasPrefix(cmd, []byte("/bin/sh")) {
				found = pid
				return true
			}
		}
		return false
	})
	return found
}

// logMCPOnFailure prints the service's log lines about MCP servers when
// the test fails.
func logMCPOnFailure(t *testing.T, s *testServer) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, l := range strings.Split(s.Logs(), "\n") {
			if strings.Contains(l, "mcp") {
				t.Log(l)
			}
		}
	})
}

// assertUnknown checks that the service does not offer tool.
func assertUnknown(t *testing.T, s *testServer, tool string) {
	t.Helper()
	if resp, body := s.do(t, "POST", "/tools/"+tool+"/invoke", strings.NewReader("{}"), nil); resp.StatusCode != http.StatusNotFound || !bytes.Contains(body, []byte("unknown_tool")) {
		t.Errorf("%s switched off, yet: %d %s", tool, resp.StatusCode, body)
	}
}

// auditCounts counts the audit files (one per call) by tool.
func auditCounts(t *testing.T, dataDir string) map[string]int {
	t.Helper()
	out := map[string]int{}
	files, _ := filepath.Glob(filepath.Join(dataDir, "audit_logs", "*", "*.json"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var rec struct {
			ToolName string `json:"tool_name"`
		}
		if json.Unmarshal(data, &rec) == nil {
			out[rec.ToolName]++
		}
	}
	return out
}

// TestMCPServersFromNpm mounts server-everything over stdio (in exec's
// sandbox) and over Streamable HTTP (a separate process on loopback),
// and server-memory over stdio, and checks that their tools are listed
// in every format, in /openapi.json and over /mcp; called over REST and
// /mcp; refused with invalid arguments before the server sees them;
// switched off by name; audited one file per call; named in /readyz; and
// that a server killed in the middle of a call gives a clean error
// result, and the next call works after the restart.
func TestMCPServersFromNpm(t *testing.T) {
	ws, nm := npmWorkspace(t)
	addr, remoteCalls := countingProxy(t, mcptest.EverythingHTTP(t, nm))
	marker := "E2E_MCP_MARKER=" + strconv.Itoa(os.Getpid()) + "-" + t.Name()
	file := writeToolsFile(t, `{"mcpServers": {
  "everything": {"command": "node", "args": [`+mustJSON(mcptest.EverythingJS(nm))+`, "stdio"],
                 "env": {"E2E_MCP_MARKER": `+mustJSON(strings.TrimPrefix(marker, "E2E_MCP_MARKER="))+`}},
  "remote": {"type": "streamable-http", "url": "http://`+addr+`/mcp"},
  "memory": {"command": "node", "args": [`+mustJSON(mcptest.MemoryJS(nm))+`],
             "env": {"MEMORY_FILE_PATH": "${WORKSPACE}/memory.jsonl"}},
  "off": {"command": "node", "args": ["nothing.js"], "disabled": true}
}}`)
	s := startServer(t, map[string]string{"TOOLS_FILE": file, "WORKSPACE": ws, "TOOLS_DISABLED": "remote__get-tiny-image"})
	logMCPOnFailure(t, s)
	waitMCPServers(t, s, "everything", "remote", "memory")

	// Listed in every format, in the OpenAPI document and over MCP.
	for _, f := range toolfmt.Formats() {
		resp, body := s.do(t, "GET", "/tools?format="+f, nil, nil)
		for _, want := range []string{`"everything__echo"`, `"remote__get-sum"`, `"memory__create_entities"`, `"everything__get-tiny-image"`} {
			if resp.StatusCode != 200 || !bytes.Contains(body, []byte(want)) {
				t.Errorf("GET /tools?format=%s lacks %s: %d %.300s", f, want, resp.StatusCode, body)
			}
		}
		if bytes.Contains(body, []byte(`"remote__get-tiny-image"`)) {
			t.Errorf("GET /tools?format=%s lists a tool switched off", f)
		}
	}
	_, body := s.do(t, "GET", "/openapi.json", nil, nil)
	assertContains(t, "/openapi.json", string(body), `"/tools/everything__get-sum/invoke"`, `"/tools/remote__echo/invoke"`, `"/tools/memory__read_graph/invoke"`)

	// Called over REST.
	assertContains(t, "get-sum over stdio", mustSucceed(t, s.invoke(t, "everything__get-sum", map[string]any{"a": 2, "b": 40})), "42")
	assertContains(t, "echo over HTTP", mustSucceed(t, s.invoke(t, "remote__echo", map[string]any{"message": "hello over http"})), "hello over http")
	mustSucceed(t, s.invoke(t, "memory__create_entities", map[string]any{"entities": []any{map[string]any{"name": "toolsvc", "entityType": "service", "observations": []string{"serves tools over HTTP"}}}}))
	assertContains(t, "read_graph", mustSucceed(t, s.invoke(t, "memory__read_graph", map[string]any{})), "serves tools over HTTP")
	if b, err := os.ReadFile(filepath.Join(s.Workspace, "memory.jsonl")); err != nil || !bytes.Contains(b, []byte("toolsvc")) {
		t.Errorf("the memory file in the workspace: %v %q", err, b)
	}
	// An image is saved into the workspace and named.
	out := mustSucceed(t, s.invoke(t, "everything__get-tiny-image", map[string]any{}))
	assertContains(t, "get-tiny-image", out, "image saved to mcp/everything/")

	// Invalid arguments are refused before the server sees them.
	before := remoteCalls.Load()
	mustFail(t, s.invoke(t, "remote__get-sum", map[string]any{"a": "two", "b": 40}), "invalid_arguments", "a")
	mustFail(t, s.invoke(t, "everything__get-sum", map[string]any{"a": "two", "b": 40}), "invalid_arguments", "a")
	mustFail(t, s.invoke(t, "memory__create_entities", map[string]any{"entities": "nope"}), "invalid_arguments", "entities")
	if remoteCalls.Load() != before {
		t.Errorf("the HTTP server got a call with invalid arguments")
	}
	assertContains(t, "get-sum over HTTP", mustSucceed(t, s.invoke(t, "remote__get-sum", map[string]any{"a": 1, "b": 2})), "3")
	if remoteCalls.Load() != before+1 {
		t.Errorf("tools/call requests that reached the HTTP server: %d, want %d", remoteCalls.Load(), before+1)
	}
	assertUnknown(t, s, "remote__get-tiny-image")

	// Over /mcp.
	names, res := mcpCall(t, s, "remote__echo", map[string]any{"message": "via mcp"})
	for _, want := range []string{"everything__echo", "remote__echo", "memory__read_graph"} {
		if !names[want] {
			t.Errorf("MCP tools/list lacks %s", want)
		}
	}
	if res.IsError || !strings.Contains(mcpText(res), "via mcp") {
		t.Errorf("remote__echo over MCP: %s", mcpText(res))
	}
	if _, res := mcpCall(t, s, "everything__echo", map[string]any{"message": "stdio via mcp"}); res.IsError || !strings.Contains(mcpText(res), "stdio via mcp") {
		t.Errorf("everything__echo over MCP: %s", mcpText(res))
	}

	// Ready, each server named; start-up lines.
	_, ready := s.do(t, "GET", "/readyz", nil, nil)
	assertContains(t, "/readyz", string(ready), `"status":"ready"`, `"mcp:everything":"ok"`, `"mcp:remote":"ok"`, `"mcp:memory":"ok"`,
		`"tool:remote__get-tiny-image":"off: switched off by TOOLSVC_TOOLS_DISABLED"`)
	assertContains(t, "start-up log", s.Logs(), `"tool":"everything__echo","state":"on","source":"mcp","server":"everything"`,
		`"mcp_server":"remote","state":"up","type":"streamable-http"`, `"mcp_server":"off","state":"off"`)

	// Killed in the middle of a call: a clean error, and the next call
	// works after the restart.
	answer := make(chan registry.Result, 1)
	go func() {
		answer <- s.invoke(t, "everything__trigger-long-running-operation", map[string]any{"duration": 60, "steps": 60})
	}()
	waitFor(t, "the long call to start", func() bool {
		for _, r := range startedCalls(s.DataDir) {
			if r.ToolName == "everything__trigger-long-running-operation" {
				return true
			}
		}
		return false
	})
	if err := syscall.Kill(serverPID(t, marker), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	mustFail(t, <-answer, "unavailable", "everything", "restarted")
	assertContains(t, "echo after the restart", mustSucceed(t, s.invoke(t, "everything__echo", map[string]any{"message": "after restart"})), "after restart")
	assertContains(t, "log", s.Logs(), "mcp server: connection ended; restarting")

	// One audit file per call, refused ones included.
	s.Stop(t)
	counts := auditCounts(t, s.DataDir)
	for tool, want := range map[string]int{"everything__get-sum": 2, "remote__get-sum": 2, "remote__echo": 2, "memory__create_entities": 2,
		"everything__trigger-long-running-operation": 1, "everything__echo": 2} {
		if counts[tool] != want {
			t.Errorf("%d audit files of %s, want %d (all: %v)", counts[tool], tool, want, counts)
		}
	}
}

// TestMCPServersDownAndReload: a server that exits at once does not stop
// start-up; /readyz names it while the service stays ready. SIGHUP
// removes it and adds another, keeps an unchanged server running, and a
// file with a mistake or a clash keeps the servers it had. A clash at
// start-up stops it, naming both tools.
func TestMCPServersDownAndReload(t *testing.T) {
	ws, nm := npmWorkspace(t)
	memory := `"memory": {"command": "node", "args": [` + mustJSON(mcptest.MemoryJS(nm)) + `], "env": {"MEMORY_FILE_PATH": "${WORKSPACE}/memory.jsonl"}}`
	everything := `"everything": {"command": "node", "args": [` + mustJSON(mcptest.EverythingJS(nm)) + `, "stdio"]}`
	file := writeToolsFile(t, `{"mcpServers": {`+memory+`, "broken": {"command": "/bin/sh", "args": ["-c", "echo broken on purpose >&2; exit 3"]}}}`)
	s := startServer(t, map[string]string{"TOOLS_FILE": file, "WORKSPACE": ws})
	logMCPOnFailure(t, s)
	waitMCPServers(t, s, "memory", "broken")

	_, ready := s.do(t, "GET", "/readyz", nil, nil)
	assertContains(t, "/readyz", string(ready), `"status":"ready"`, `"mcp:memory":"ok"`, `"mcp:broken":"down, restarting in the background`, "exit status 3")
	assertContains(t, "log", s.Logs(), `"mcp_server":"broken"`, "retried in the background")
	mustSucceed(t, s.invoke(t, "memory__read_graph", map[string]any{}))

	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"mcpServers": {` + memory + `, ` + everything + `}}`)
	s.reload <- struct{}{}
	waitLog(t, s, `"message":"tools file reloaded"`, 1)
	waitMCPServers(t, s, "everything")
	assertContains(t, "echo", mustSucceed(t, s.invoke(t, "everything__echo", map[string]any{"message": "added by a reload"})), "added by a reload")
	_, ready = s.do(t, "GET", "/readyz", nil, nil)
	if bytes.Contains(ready, []byte("mcp:broken")) {
		t.Errorf("/readyz still names the removed server: %s", ready)
	}
	assertContains(t, "log", s.Logs(), `"mcp_server":"broken","state":"stopped"`)
	if strings.Contains(s.Logs(), `"mcp_server":"memory","state":"stopped"`) {
		t.Errorf("the unchanged server was restarted")
	}

	// A reload that removes a server while one of its calls runs: the call
	// finishes on the old server, which is closed after it.
	answer := make(chan registry.Result, 1)
	go func() {
		answer <- s.invoke(t, "everything__trigger-long-running-operation", map[string]any{"duration": 8, "steps": 4})
	}()
	waitFor(t, "the long call to start", func() bool {
		for _, r := range startedCalls(s.DataDir) {
			if r.ToolName == "everything__trigger-long-running-operation" {
				return true
			}
		}
		return false
	})
	write(`{"mcpServers": {` + memory + `}}`)
	s.reload <- struct{}{}
	waitLog(t, s, `"message":"tools file reloaded"`, 2)
	assertUnknown(t, s, "everything__echo")
	assertContains(t, "the call in flight", mustSucceed(t, <-answer), "Long running operation completed")
	write(`{"mcpServers": {` + memory + `, ` + everything + `}}`)
	s.reload <- struct{}{}
	waitLog(t, s, `"message":"tools file reloaded"`, 3)
	waitMCPServers(t, s, "everything")

	// A mistake in an entry: the servers and their tools stay.
	write(`{"mcpServers": {` + memory + `, "everything": {"comand": "node"}}}`)
	s.reload <- struct{}{}
	waitLog(t, s, `"message":"tools file reload failed; the tools of the last good load are kept"`, 1)
	assertContains(t, "log", s.Logs(), `mcpServers \"everything\"`, `unknown key \"comand\"`)
	mustSucceed(t, s.invoke(t, "everything__echo", map[string]any{"message": "still here"}))

	// A file tool that takes a server's tool's name: kept too.
	write(`{"tools": [{"name": "memory__read_graph", "description": "x", "shell": "true"}], "mcpServers": {` + memory + `, ` + everything + `}}`)
	s.reload <- struct{}{}
	waitLog(t, s, `"message":"tools file reload failed; the tools of the last good load are kept"`, 2)
	assertContains(t, "log", s.Logs(), `memory__read_graph`, "clashes")
	mustSucceed(t, s.invoke(t, "memory__read_graph", map[string]any{}))

	s.Stop(t)

	// The server's name switches all its tools off.
	file2 := writeToolsFile(t, `{"mcpServers": {`+everything+`}}`)
	s2 := startServer(t, map[string]string{"TOOLS_FILE": file2, "WORKSPACE": ws, "TOOLS_DISABLED": "everything"})
	assertUnknown(t, s2, "everything__echo") // switched off: unknown even while it starts
	waitMCPServers(t, s2, "everything")
	assertUnknown(t, s2, "everything__echo")
	_, ready = s2.do(t, "GET", "/readyz", nil, nil)
	assertContains(t, "/readyz", string(ready), `"mcp:everything":"ok"`, `"tool:everything__echo":"off: switched off by TOOLSVC_TOOLS_DISABLED"`)
	s2.Stop(t)

	// A clash found when a server lists its tools at start-up: that tool
	// is left out, naming both, and the file's tool keeps the name.
	clash := writeToolsFile(t, `{"tools": [{"name": "memory__read_graph", "description": "x", "shell": "echo from the file"}], "mcpServers": {`+memory+`}}`)
	s3 := startServer(t, map[string]string{"TOOLS_FILE": clash, "WORKSPACE": ws})
	waitMCPServers(t, s3, "memory")
	_, ready = s3.do(t, "GET", "/readyz", nil, nil)
	assertContains(t, "/readyz", string(ready), `"mcp:memory":"ok"`, `"tool:memory__read_graph":"off: its name clashes with the tool of the tools file of that name"`)
	assertContains(t, "log", s3.Logs(), `tool \"memory__read_graph\" of the MCP server \"memory\" clashes with the tool of the tools file`)
	assertContains(t, "the file's tool", mustSucceed(t, s3.invoke(t, "memory__read_graph", map[string]any{})), "from the file")
	mustSucceed(t, s3.invoke(t, "memory__create_entities", map[string]any{"entities": []any{}}))
}

// TestMCPServersSubagents: sub-agents are offered, and may call, the tools
// of a server whose entry says "subagents": true, and not those of one
// that does not.
func TestMCPServersSubagents(t *testing.T) {
	ws, nm := npmWorkspace(t)
	llm := agenttest.New(t,
		agenttest.Reply(agenttest.Call("c1", "shared__read_graph", `{}`)),
		agenttest.Reply(agenttest.Final("done")),
	)
	entry := func(file string, subagents bool) string {
		return `{"command": "node", "args": [` + mustJSON(mcptest.MemoryJS(nm)) + `], "env": {"MEMORY_FILE_PATH": "${WORKSPACE}/` + file + `"}, "subagents": ` + strconv.FormatBool(subagents) + `}`
	}
	file := writeToolsFile(t, `{"mcpServers": {"shared": `+entry("a.jsonl", true)+`, "private": `+entry("b.jsonl", false)+`}}`)
	s := startServer(t, llmEnv(llm.URL, map[string]string{"TOOLS_FILE": file, "WORKSPACE": ws}))
	logMCPOnFailure(t, s)
	waitMCPServers(t, s, "shared", "private")
	assertContains(t, "spawn", mustSucceed(t, s.invoke(t, "spawn", map[string]any{"task": "read the graph", "wait": true})), "done")
	reqs := llm.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	offered := reqs[0].ToolNames()
	if !slices.Contains(offered, "shared__read_graph") || slices.Contains(offered, "private__read_graph") {
		t.Errorf("the sub-agent was offered %v", offered)
	}
	if !strings.Contains(string(reqs[1].Body), `entities`) {
		t.Errorf("the MCP tool's result did not reach the model: %s", reqs[1].Body)
	}
}
