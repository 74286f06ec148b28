package http

import (
	"testing"

	"github.com/countbot/toolsvc/internal/policy"
)

// BenchmarkPolicyDecision is what the key policy adds to every call,
// beside BenchmarkInvokeHandler's whole call: the decision (may the key
// call the tool: a name, a toolset, a glob) and the admission (its
// bucket and its calls at once), then the release. It must stay well
// under a microsecond and allocate nothing.
func BenchmarkPolicyDecision(b *testing.B) {
	names := policy.Names{
		Keys:     []string{"alice", "bob"},
		Tools:    []string{"read_file", "write_file", "list_dir", "exec", "web_fetch"},
		Toolsets: map[string][]string{"files": {"read_file", "write_file", "list_dir"}, "shell": {"exec"}},
		Servers:  []string{"fs"},
	}
	p, err := policy.Parse([]byte(`
default: {rate: {per_minute: 600000000, burst: 1000000}}
keys:
  bob: {tools: {allow: [files, "fs__*", "web*"], deny: [write_file]}, max_concurrent: 64}`), names)
	if err != nil {
		b.Fatal(err)
	}
	e := policy.NewEnforcer(names.Keys, nil)
	e.Set(p)
	for _, c := range []struct{ name, key, tool string }{
		{"all tools", "alice", "exec"},
		{"by toolset", "bob", "list_dir"},
		{"by glob", "bob", "web_fetch"},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !e.Allows(c.key, c.tool) {
					b.Fatal("denied")
				}
				if _, reason := e.Admit(c.key); reason != "" {
					b.Fatal(reason)
				}
				e.Release(c.key)
			}
		})
	}
}
