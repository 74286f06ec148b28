package http

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/policy"
	"github.com/countbot/toolsvc/internal/registry"
)

// BenchmarkPolicyDecision is what the key policy adds to every call,
// beside BenchmarkInvokeHandler's whole call: the decision (may the key
// call the tool: a name, a toolset, a glob) and the admission (its
// bucket and its calls at once), the key's folder, then the release. It must stay well
// under a microsecond and allocate nothing.
func BenchmarkPolicyDecision(b *testing.B) {
	names := policy.Names{
		Keys:     []string{"alice", "bob"},
		Tools:    []string{"read_file", "write_file", "list_dir", "exec", "web_fetch"},
		Toolsets: map[string][]string{"files": {"read_file", "write_file", "list_dir"}, "shell": {"exec"}},
		Servers:  []string{"fs"},
	}
	p, err := policy.Parse([]byte(`
default: {rate: {per_minute: 600000000, burst: 1000000}, workspace: "tenants/{key}"}
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
				if e.Folder(c.key) == "" {
					b.Fatal("no folder")
				}
				e.Release(c.key)
			}
		})
	}
}

// BenchmarkInvokePolicy is one REST call of a trivial tool through the
// whole handler with a key, without a policy and with one that lets the
// key call the tool by a toolset and holds it to a rate and a bound of
// calls at once: the difference is what the policy costs a call.
//
//	go test -run '^$' -bench 'InvokePolicy|PolicyDecision' -benchmem ./internal/http/
func BenchmarkInvokePolicy(b *testing.B) {
	const secret = "bench-key-0123456789abcdef"
	for _, withPolicy := range []bool{false, true} {
		name := "keys"
		if withPolicy {
			name = "keys+policy"
		}
		b.Run(name, func(b *testing.B) {
			opts := registry.Options{}
			if withPolicy {
				names := policy.Names{Keys: []string{"bob"}, Tools: []string{"echo"}, Toolsets: map[string][]string{"mine": {"echo"}}}
				p, err := policy.Parse([]byte(`keys: {bob: {tools: {allow: [mine]}, rate: {per_minute: 600000000, burst: 1000000}, max_concurrent: 64}}`), names)
				if err != nil {
					b.Fatal(err)
				}
				e := policy.NewEnforcer(names.Keys, nil)
				e.Set(p)
				opts.Policy = e
			}
			reg := registry.New(opts)
			if err := reg.Register(echoTool{}); err != nil {
				b.Fatal(err)
			}
			h := NewHandler(Options{Registry: reg, Log: zerolog.Nop(), Keys: []Key{{Name: "bob", Secret: secret}}})
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, "/tools/echo/invoke", strings.NewReader(`{"text":"hi"}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+secret)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatal(rec.Code, rec.Body.String())
				}
			}
		})
	}
}
