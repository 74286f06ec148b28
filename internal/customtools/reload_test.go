package customtools

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/registry"
)

// fakeServers records what the Reloader asks of the MCP servers; fail
// makes Prepare fail.
type fakeServers struct {
	fail      error
	prepared  []map[string]string // the taken names of each Prepare
	committed int
	abandoned int
}

func (f *fakeServers) Prepare(_ map[string]json.RawMessage, _ func(server, tool string) (string, bool), taken map[string]string) (func() error, func(), error) {
	if f.fail != nil {
		return nil, nil, f.fail
	}
	f.prepared = append(f.prepared, taken)
	return func() error { f.committed++; return nil }, func() { f.abandoned++ }, nil
}

func (f *fakeServers) Ready(checks map[string]string) { checks["mcp:fake"] = "ok" }
func (f *fakeServers) SubagentTools() []string        { return []string{"fake__tool"} }

// switches leaves out the tools named in off.
type switches struct{ off []string }

func (s switches) Off(tool string) (string, bool) {
	return "switched off", slices.Contains(s.off, tool)
}
func (s switches) OffMCP(string, string) (string, bool) { return "", false }

func httpTool(name string, subagents bool) string {
	sub := ""
	if subagents {
		sub = ", subagents: true"
	}
	return "  - {name: " + name + ", description: d, http: {url: 'https://example.com/" + name + "'}" + sub + "}\n"
}

// newTestReloader is a Reloader of the file at path over a fresh registry.
func newTestReloader(t *testing.T, path string, servers *fakeServers) (*Reloader, *registry.Registry) {
	t.Helper()
	reg := registry.New(registry.Options{Log: zerolog.Nop()})
	r := NewReloader(ReloaderOptions{
		Path:      path,
		Workspace: t.TempDir(),
		Switches: func(f *File) (Switches, error) {
			for _, s := range f.Tools {
				if s.Name == "unknown-switch" {
					return nil, errors.New(`"unknown-switch" is switched by name`)
				}
			}
			return switches{}, nil
		},
		Registry: reg,
		Servers:  servers,
		Log:      zerolog.Nop(),
	})
	return r, reg
}

// TestReloaderStartAndReload: Start and Reload put the file's tools in
// the registry and commit the servers' change; the servers' names are
// checked against the file's tools; a reload that fails at any step
// keeps the last good tools, abandons the servers' change when it had
// begun, and says why in /readyz until a good one.
func TestReloaderStartAndReload(t *testing.T) {
	path := filepath.Join(resolvedTempDir(t), "tools.yaml")
	writeFile(t, path, "tools:\n"+httpTool("one", true)+httpTool("two", false))
	servers := &fakeServers{}
	r, reg := newTestReloader(t, path, servers)
	f, err := Load(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(f, switches{off: []string{"two"}}); err != nil {
		t.Fatal(err)
	}
	if got := reg.Names(); !slices.Equal(got, []string{"one"}) {
		t.Fatalf("after Start: %v", got)
	}
	if servers.committed != 1 || servers.prepared[0]["two"] != "the tool of the tools file" {
		t.Errorf("servers: %+v", servers)
	}
	if got := r.SubagentTools(); !slices.Equal(got, []string{"one", "fake__tool"}) {
		t.Errorf("SubagentTools = %v", got)
	}
	checks := map[string]string{}
	r.Ready(checks)
	if checks["tool:two"] != "off: switched off" || checks["tools_file"] != "ok" || checks["mcp:fake"] != "ok" {
		t.Errorf("Ready: %v", checks)
	}

	writeFile(t, path, "tools:\n"+httpTool("three", false))
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := reg.Names(); !slices.Equal(got, []string{"three"}) {
		t.Fatalf("after Reload: %v", got)
	}

	for _, tc := range []struct {
		name, file string
		fail       error
		want       string
		abandoned  int
	}{
		{"a mistake in the file", "tools: [", nil, "tools file " + path, 0},
		{"the switches", "tools:\n" + httpTool("unknown-switch", false), nil, "with its toolsets and MCP servers, \"unknown-switch\"", 0},
		{"the servers", "tools:\n" + httpTool("four", false), errors.New("mcpServers \"x\": no"), "tools file " + path + ": mcpServers \"x\": no", 0},
		{"a name given twice", "tools:\n" + httpTool("three", false) + httpTool("three", false), nil, "three", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			writeFile(t, path, tc.file)
			servers.fail = tc.fail
			defer func() { servers.fail = nil }()
			err := r.Reload()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Reload = %v, want %q", err, tc.want)
			}
			if got := reg.Names(); !slices.Equal(got, []string{"three"}) {
				t.Errorf("the tools after a failed reload: %v", got)
			}
			checks := map[string]string{}
			r.Ready(checks)
			if !strings.HasPrefix(checks["tools_file"], "reload failed, the tools of the last good load are served: ") {
				t.Errorf("tools_file = %q", checks["tools_file"])
			}
		})
	}
	writeFile(t, path, "tools:\n"+httpTool("three", false))
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	checks = map[string]string{}
	r.Ready(checks)
	if checks["tools_file"] != "ok" {
		t.Errorf("after a good reload, tools_file = %q", checks["tools_file"])
	}
}

// TestReloaderAbandons: when the file's tools cannot be put in the
// registry, the servers' change is given up, not committed.
func TestReloaderAbandons(t *testing.T) {
	path := filepath.Join(resolvedTempDir(t), "tools.yaml")
	writeFile(t, path, "tools:\n"+httpTool("one", false))
	servers := &fakeServers{}
	r, reg := newTestReloader(t, path, servers)
	if err := reg.Register(stub("one")); err != nil {
		t.Fatal(err)
	}
	err := r.Reload()
	if err == nil || !strings.Contains(err.Error(), `"one"`) {
		t.Fatalf("Reload = %v", err)
	}
	if servers.abandoned != 1 || servers.committed != 0 {
		t.Errorf("servers: %+v", servers)
	}
}

// stub is a built-in tool of the given name.
type stub string

func (s stub) Name() string                { return string(s) }
func (s stub) Description() string         { return "A stub." }
func (s stub) Parameters() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (s stub) Execute(context.Context, json.RawMessage) (string, error) {
	return "", nil
}

// A nil Reloader (no tools file) adds nothing.
func TestReloaderNil(t *testing.T) {
	var r *Reloader
	checks := map[string]string{}
	r.Ready(checks)
	if len(checks) != 0 || r.SubagentTools() != nil {
		t.Errorf("a nil Reloader added %v", checks)
	}
}
