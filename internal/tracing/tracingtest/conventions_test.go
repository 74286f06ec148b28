package tracingtest

import (
	"strings"
	"testing"
)

// TestCheckFindsViolations: the checker is not satisfied by anything: a
// wrong name, kind, type or enum value, a missing required attribute and
// an attribute the group does not list are each found.
func TestCheckFindsViolations(t *testing.T) {
	conv, err := LoadConventions(ModelDir())
	if err != nil {
		t.Fatal(err)
	}
	good := Span{Name: "tools/call echo", Kind: "SERVER", Attrs: map[string]any{
		"mcp.method.name": "tools/call", "gen_ai.tool.name": "echo", "gen_ai.operation.name": "execute_tool",
		"network.transport": "tcp", "jsonrpc.request.id": "1", "toolsvc.anything": 1.5}}
	if v := conv.Check(good); len(v) != 0 {
		t.Fatalf("a good span: %v", v)
	}
	for _, tc := range []struct {
		change func(s *Span)
		want   string
	}{
		{func(s *Span) { s.Name = "tools/call" }, `name "tools/call"`},
		{func(s *Span) { s.Attrs["jsonrpc.request.id"] = int64(1) }, "the registry says string"},
		{func(s *Span) { s.Attrs["network.transport"] = "carrier-pigeon" }, "not one of the enum's members"},
		{func(s *Span) { s.Attrs["url.full"] = "http://x" }, "url.full is not an attribute of span.mcp.server"},
		{func(s *Span) { s.Attrs["mcp.tool"] = "x" }, "mcp.tool is no attribute"},
		{func(s *Span) { s.Attrs["gen_ai.operation.name"] = "chat"; delete(s.Attrs, "mcp.method.name") }, "lacks gen_ai.provider.name"},
	} {
		s := good
		s.Attrs = map[string]any{}
		for k, v := range good.Attrs {
			s.Attrs[k] = v
		}
		tc.change(&s)
		var all []string
		for _, v := range conv.Check(s) {
			all = append(all, v.String())
		}
		if !strings.Contains(strings.Join(all, "\n"), tc.want) {
			t.Errorf("want a violation with %q, got %q", tc.want, all)
		}
	}
}
