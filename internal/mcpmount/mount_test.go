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
	time.Sleep(50 * time.Millisecond) // the servers come up meanwhile
	if names := reg.Names(); !slices.Equal(names, []string{"builtin"}) {
		t.Fatalf("before commit: %v", names)
	}
	if err := commit(); err != nil {
		t.Fatal(err)
	}
	settled(t, m)
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
	settled(t, m)
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
// the caller holds and no other server's. The servers start in the
// background, so a clash is found when a server lists its tools: that
// tool is left out, its other tools are published, and the log and
// /readyz name both of the clash. A reload that keeps a running server
// whose tool clashes with a name the caller now holds is refused, naming
// both, and nothing changes.
func TestMountClashes(t *testing.T) {
	// mcpmount names a tool <server>__<tool>: a server "x" with a tool
	// "y" mounts "x__y".
	srv, other := toolServer(t, "y", "w"), toolServer(t, "b", "c")
	yz, z := toolServer(t, "y__z", "v"), toolServer(t, "z")
	for _, tc := range []struct {
		name    string
		entries map[string]json.RawMessage
		taken   map[string]string
		out     string // the tool left out
		want    string
		kept    []string
	}{
		{"a built-in", entries("x", urlEntry(other)), nil,
			"x__b", `tool "x__b" of the MCP server "x" clashes with the built-in tool of that name`, []string{"builtin", "x__b", "x__c"}},
		{"another server's", entries("x", urlEntry(yz), "x__y", urlEntry(z)), nil,
			"x__y__z", `tool "x__y__z" of the MCP server "x" clashes with the tool of the MCP server "x__y" of that name`, []string{"builtin", "x__b", "x__v", "x__y__z"}},
		{"the caller's", entries("x", urlEntry(srv)), map[string]string{"x__y": "the tool of the tools file"},
			"x__y", `tool "x__y" of the MCP server "x" clashes with the tool of the tools file of that name`, []string{"builtin", "x__b", "x__w"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, reg, logs := newTestMount(t)
			if err := reg.Register(stubTool("x__b")); err != nil {
				t.Fatal(err)
			}
			if tc.name == "another server's" {
				// The other server is up first, so that its name is taken.
				mountAndSettle(t, m, entries("x__y", urlEntry(z)), tc.taken)
			}
			mountAndSettle(t, m, tc.entries, tc.taken)
			if names := reg.Names(); !slices.Equal(names, tc.kept) {
				t.Errorf("published: %v, want %v", names, tc.kept)
			}
			checks := map[string]string{}
			m.Ready(checks)
			if why := checks["tool:"+tc.out]; !strings.HasPrefix(why, "off: its name clashes with ") {
				t.Errorf("/readyz of %s: %q (%v)", tc.out, why, checks)
			}
			if !logSays(logs.String(), tc.want) {
				t.Errorf("the log does not say %s:\n%s", tc.want, logs.String())
			}
		})
	}
	m, reg, _ := newTestMount(t)
	mountAndSettle(t, m, entries("x", urlEntry(srv)), nil)
	_, _, err := m.Prepare(entries("x", urlEntry(srv)), allOn, map[string]string{"x__y": "the tool of the tools file"})
	if want := `tool "x__y" of the MCP server "x" clashes with the tool of the tools file of that name`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a reload whose new name clashes with a running server's tool: %v, want %q", err, want)
	}
	if names := reg.Names(); !slices.Equal(names, []string{"builtin", "x__w", "x__y"}) {
		t.Errorf("after the refused reload: %v", names)
	}
	if _, _, err := m.Prepare(entries("x", `{"url":"`+srv+`","headers":{"A":"${UNSET_VAR_FOR_TEST}"}}`), allOn, nil); err == nil || !strings.Contains(err.Error(), `mcpServers "x"`) {
		t.Errorf("a config that cannot work: %v", err)
	}
	if _, _, err := m.Prepare(entries("x", `{"command":"x","url":"http://x"}`), allOn, nil); err == nil || !strings.HasPrefix(err.Error(), `mcpServers "x": `) {
		t.Errorf("a bad entry: %v", err)
	}
	if err := CheckEntries(entries("x", `{"comand":"x"}`)); err == nil || !strings.Contains(err.Error(), `unknown key "comand"`) {
		t.Errorf("CheckEntries: %v", err)
	}
}

// logSays reports whether a value of a line of the JSON log holds want.
func logSays(log, want string) bool {
	for line := range strings.SplitSeq(log, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil {
			continue
		}
		for _, v := range m {
			if s, ok := v.(string); ok && strings.Contains(s, want) {
				return true
			}
		}
	}
	return false
}

// mountAndSettle puts entries in use and waits for the servers' first
// attempts to start.
func mountAndSettle(t *testing.T, m *Mount, e map[string]json.RawMessage, taken map[string]string) {
	t.Helper()
	commit, _, err := m.Prepare(e, allOn, taken)
	if err != nil {
		t.Fatal(err)
	}
	if err := commit(); err != nil {
		t.Fatal(err)
	}
	settled(t, m)
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
	mountAndSettle(t, m, entries("a", `{"url":"`+toolServer(t, "one")+`","subagents":true}`, "b", urlEntry(toolServer(t, "two"))), nil)
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
