package mcpmount

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/sandbox"
)

// toolServer is an in-process Streamable HTTP MCP server with one tool
// per name, each answering its own name.
func toolServer(t *testing.T, names ...string) string {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "tools", Version: "1"}, nil)
	for _, n := range names {
		mcp.AddTool(srv, &mcp.Tool{Name: n, Description: "Answer " + n + "."}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: n}}}, nil, nil
		})
	}
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	// The Mount may still hold its connections when the server goes.
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	return ts.URL
}

// newTestMount is a Mount over reg, which already holds the built-in
// tool "builtin", without exec's sandbox.
func newTestMount(t *testing.T) (*Mount, *registry.Registry, *logBuf) {
	t.Helper()
	e := newEnv(t, sandbox.None)
	reg := registry.New(registry.Options{DefaultTimeout: 30 * time.Second, Log: zerolog.Nop()})
	if err := reg.Register(stubTool("builtin")); err != nil {
		t.Fatal(err)
	}
	m := NewMount(MountOptions{Registry: reg, Deps: e.deps, Log: zerolog.New(e.logs), NoSandbox: "no sandbox here", CallTimeout: time.Second})
	t.Cleanup(m.Close)
	return m, reg, e.logs
}

func entries(kv ...string) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	for i := 0; i < len(kv); i += 2 {
		out[kv[i]] = json.RawMessage(kv[i+1])
	}
	return out
}

func urlEntry(url string) string { return `{"url":"` + url + `"}` }

// TestMountPrepareCommit: a change is in use only after commit; an
// unchanged entry keeps its server, a changed one gets a new server and a
// removed one's tools go; the switches leave tools out and /readyz says
// why; abandon publishes nothing.
func TestMountPrepareCommit(t *testing.T) {
	m, reg, _ := newTestMount(t)
	a, b := toolServer(t, "one", "two"), toolServer(t, "three")
	off := func(server, tool string) (string, bool) { return "switched off", tool == "a__two" }
	commit, _, err := m.Prepare(entries("a", urlEntry(a), "b", urlEntry(b), "c", `{"url":"http://x","disabled":true}`), off, nil)
	if err != nil {
		t.Fatal(err)
	}
	if names := reg.Names(); !slices.Equal(names, []string{"builtin"}) {
		t.Fatalf("before commit: %v", names)
	}
	if err := commit(); err != nil {
		t.Fatal(err)
	}
	if names := reg.Names(); !slices.Equal(names, []string{"a__one", "b__three", "builtin"}) {
		t.Fatalf("after commit: %v", names)
	}
	checks := map[string]string{}
	m.Ready(checks)
	if checks["mcp:a"] != "ok" || checks["mcp:b"] != "ok" || checks["tool:a__two"] != "off: switched off" || checks["mcp:c"] != "" {
		t.Errorf("ready: %v", checks)
	}
	m.mu.Lock()
	first := m.servers["a"]
	m.mu.Unlock()

	// Unchanged a, b removed, d added; then abandoned: nothing changes.
	d := toolServer(t, "four")
	_, abandon, err := m.Prepare(entries("a", urlEntry(a), "d", urlEntry(d)), allOn, nil)
	if err != nil {
		t.Fatal(err)
	}
	abandon()
	if names := reg.Names(); !slices.Equal(names, []string{"a__one", "b__three", "builtin"}) {
		t.Fatalf("after abandon: %v", names)
	}

	commit, _, err = m.Prepare(entries("a", urlEntry(a), "d", urlEntry(d)), allOn, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := commit(); err != nil {
		t.Fatal(err)
	}
	if names := reg.Names(); !slices.Equal(names, []string{"a__one", "a__two", "builtin", "d__four"}) {
		t.Fatalf("after the second commit: %v", names)
	}
	m.mu.Lock()
	kept := m.servers["a"] == first
	m.mu.Unlock()
	if !kept {
		t.Error("an unchanged entry got a new server")
	}
}

// TestMountClashes: a server's tool may take no built-in name, no name
// the caller holds and no other server's; the error names both, and
// nothing is published.
func TestMountClashes(t *testing.T) {
	m, reg, _ := newTestMount(t)
	// mcpmount names a tool <server>__<tool>: a server "x" with a tool
	// "y" mounts "x__y".
	srv, other := toolServer(t, "y"), toolServer(t, "b")
	yz, z := toolServer(t, "y__z"), toolServer(t, "z")
	if err := reg.Register(stubTool("x__b")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		entries map[string]json.RawMessage
		taken   map[string]string
		want    string
	}{
		{"a built-in", entries("x", urlEntry(other)), nil,
			`tool "x__b" of the MCP server "x" clashes with the built-in tool of that name`},
		{"another server's", entries("x", urlEntry(yz), "x__y", urlEntry(z)), nil,
			`tool "x__y__z" of the MCP server "x__y" clashes with the tool of the MCP server "x" of that name`},
		{"the caller's", entries("x", urlEntry(srv)), map[string]string{"x__y": "the tool of the tools file"},
			`tool "x__y" of the MCP server "x" clashes with the tool of the tools file of that name`},
		{"a config that cannot work", entries("x", `{"url":"`+srv+`","headers":{"A":"${UNSET_VAR_FOR_TEST}"}}`), nil, `mcpServers "x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := m.Prepare(tc.entries, allOn, tc.taken)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Prepare = %v, want %q", err, tc.want)
			}
			if names := reg.Names(); !slices.Equal(names, []string{"builtin", "x__b"}) {
				t.Errorf("published: %v", names)
			}
		})
	}
	if _, _, err := m.Prepare(entries("x", `{"command":"x","url":"http://x"}`), allOn, nil); err == nil || !strings.HasPrefix(err.Error(), `mcpServers "x": `) {
		t.Errorf("a bad entry: %v", err)
	}
	if err := CheckEntries(entries("x", `{"comand":"x"}`)); err == nil || !strings.Contains(err.Error(), `unknown key "comand"`) {
		t.Errorf("CheckEntries: %v", err)
	}
}

// TestMountStdioWithoutSandbox: without exec's sandbox a stdio server
// cannot start, and the error says why.
func TestMountStdioWithoutSandbox(t *testing.T) {
	m, _, _ := newTestMount(t)
	_, _, err := m.Prepare(entries("s", `{"command":"/bin/true"}`), allOn, nil)
	if err == nil || !strings.Contains(err.Error(), "no sandbox here") {
		t.Fatalf("Prepare = %v", err)
	}
}

// TestMountSubagentTools: only the tools of servers whose entry says
// "subagents": true are offered to sub-agents.
func TestMountSubagentTools(t *testing.T) {
	m, _, _ := newTestMount(t)
	commit, _, err := m.Prepare(entries("a", `{"url":"`+toolServer(t, "one")+`","subagents":true}`, "b", urlEntry(toolServer(t, "two"))), allOn, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := commit(); err != nil {
		t.Fatal(err)
	}
	if got := m.SubagentTools(); !slices.Equal(got, []string{"a__one"}) {
		t.Errorf("SubagentTools = %v", got)
	}
}

// stubTool is a built-in tool of the given name.
type stubTool string

func (s stubTool) Name() string                { return string(s) }
func (s stubTool) Description() string         { return "A stub." }
func (s stubTool) Parameters() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (s stubTool) Execute(context.Context, json.RawMessage) (string, error) {
	return "", nil
}

var _ registry.Tool = stubTool("")
