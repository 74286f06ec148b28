package app

import (
	"strings"
	"testing"
)

// TestSelectionMCP: the switches take an MCP server's name (all its
// tools) or one tool's name, beside built-in names; a server named like a
// built-in toolset switches both; other unknown names still stop start-up.
func TestSelectionMCP(t *testing.T) {
	servers := []string{"memory", "gh"}
	type check struct {
		server, tool string
		off          bool
	}
	for _, tc := range []struct {
		name              string
		enabled, disabled []string
		err               string
		checks            []check
		builtinOff        map[string]bool
	}{
		{name: "nothing switched", checks: []check{{"gh", "gh__issues", false}}},
		{name: "a server off", disabled: []string{"gh"}, checks: []check{{"gh", "gh__issues", true}, {"memory", "memory__read_graph", false}}},
		{name: "one tool off", disabled: []string{"gh__issues"}, checks: []check{{"gh", "gh__issues", true}, {"gh", "gh__pulls", false}}},
		{name: "a server named like a toolset", disabled: []string{"memory"},
			checks: []check{{"memory", "memory__read_graph", true}}, builtinOff: map[string]bool{"memory": true, "exec": false}},
		{name: "only built-ins enabled", enabled: []string{"files"}, checks: []check{{"gh", "gh__issues", true}}, builtinOff: map[string]bool{"read_file": false, "exec": true}},
		{name: "a server enabled", enabled: []string{"gh"}, checks: []check{{"gh", "gh__issues", false}, {"memory", "memory__read_graph", true}}, builtinOff: map[string]bool{"read_file": true}},
		{name: "one tool enabled", enabled: []string{"gh__pulls"}, checks: []check{{"gh", "gh__pulls", false}, {"gh", "gh__issues", true}}},
		{name: "unknown name", disabled: []string{"gitlab"}, err: `"gitlab" is neither a tool nor a toolset`},
		{name: "a tool of an unknown server", disabled: []string{"gitlab__issues"}, err: `"gitlab__issues"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sel, err := newSelection(tc.enabled, tc.disabled, nil, servers)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range tc.checks {
				if _, off := sel.OffMCP(c.server, c.tool); off != c.off {
					t.Errorf("OffMCP(%s, %s) = %v, want %v", c.server, c.tool, off, c.off)
				}
			}
			for tool, want := range tc.builtinOff {
				if _, off := sel.Off(tool); off != want {
					t.Errorf("Off(%s) = %v, want %v", tool, off, want)
				}
			}
		})
	}
}
