package registry

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

const emptySchema = `{"type":"object","properties":{}}`

func TestReplaceSet(t *testing.T) {
	r := New(Options{})
	if err := r.Register(&fakeTool{name: "builtin", schema: emptySchema}); err != nil {
		t.Fatal(err)
	}
	g0 := r.Generation()
	if err := r.ReplaceSet("file", []Tool{&fakeTool{name: "a", schema: emptySchema}, &fakeTool{name: "b", schema: emptySchema}}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.Names(), ","); got != "a,b,builtin" {
		t.Errorf("names = %s", got)
	}
	g1 := r.Generation()
	if g1 == g0 {
		t.Errorf("the generation did not change")
	}
	defs1 := string(r.DefinitionsJSON())

	for _, tc := range []struct {
		name  string
		tools []Tool
		want  string
	}{
		{"clash with a built-in", []Tool{&fakeTool{name: "builtin", schema: emptySchema}}, `"builtin": the tool of file clashes with the built-in tool`},
		{"two of a name", []Tool{&fakeTool{name: "c", schema: emptySchema}, &fakeTool{name: "c", schema: emptySchema}}, "two tools of file"},
		{"bad schema", []Tool{&fakeTool{name: "c", schema: `{"type":"string"}`}}, "invalid parameters schema"},
		{"bad name", []Tool{&fakeTool{name: "c d", schema: emptySchema}}, "name must match"},
	} {
		err := r.ReplaceSet("file", tc.tools)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
		if r.Generation() != g1 || string(r.DefinitionsJSON()) != defs1 {
			t.Errorf("%s: a failed replace changed the tools", tc.name)
		}
	}
	if err := r.ReplaceSet("other", []Tool{&fakeTool{name: "a", schema: emptySchema}}); err == nil || !strings.Contains(err.Error(), "clashes with the tool of file") {
		t.Errorf("a clash between sets: %v", err)
	}

	// Replaced: b gone, c added; the built-in stays.
	if err := r.ReplaceSet("file", []Tool{&fakeTool{name: "a", schema: emptySchema}, &fakeTool{name: "c", schema: emptySchema}}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.Names(), ","); got != "a,builtin,c" {
		t.Errorf("names = %s", got)
	}
	if got := strings.Join(r.Set("file"), ","); got != "a,c" {
		t.Errorf("set = %s", got)
	}
	gen, defs := r.Snapshot()
	if gen != r.Generation() || len(defs) != 3 || defs[2].Function.Name != "c" {
		t.Errorf("snapshot = %d %v", gen, defs)
	}
	if err := r.ReplaceSet("", nil); err == nil {
		t.Errorf("the unnamed set was replaced")
	}
}

// TestReplaceSetInFlight: a call that started before a replace finishes
// on the tool it started with.
func TestReplaceSetInFlight(t *testing.T) {
	r := New(Options{})
	started, release := make(chan struct{}), make(chan struct{})
	old := &fakeTool{name: "t", schema: emptySchema, run: func(ctx context.Context, _ json.RawMessage) (string, error) {
		close(started)
		<-release
		return "old", nil
	}}
	if err := r.ReplaceSet("file", []Tool{old}); err != nil {
		t.Fatal(err)
	}
	done := make(chan Result)
	go func() { done <- r.Invoke(context.Background(), "t", nil, Meta{}) }()
	<-started
	if err := r.ReplaceSet("file", []Tool{&fakeTool{name: "t", schema: emptySchema, run: func(context.Context, json.RawMessage) (string, error) { return "new", nil }}}); err != nil {
		t.Fatal(err)
	}
	if res := r.Invoke(context.Background(), "t", nil, Meta{}); res.Result != "new" {
		t.Errorf("a new call = %+v", res)
	}
	close(release)
	if res := <-done; res.Result != "old" {
		t.Errorf("the call in flight = %+v", res)
	}
}
