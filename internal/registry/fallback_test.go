package registry

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/toolerr"
)

// startingTool is what a Fallback gives for a name of a server that is
// starting.
type startingTool string

func (s startingTool) Name() string                { return string(s) }
func (s startingTool) Description() string         { return "" }
func (s startingTool) Parameters() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (s startingTool) Timeout() time.Duration      { return 7 * time.Second }
func (s startingTool) Execute(context.Context, json.RawMessage) (string, error) {
	return "", toolerr.Errorf(toolerr.Unavailable, "the server of %s is starting", string(s))
}

// denyPolicy lets every key call every tool but those of deny.
type denyPolicy struct{ deny string }

func (p denyPolicy) Allows(_, tool string) bool           { return !strings.HasPrefix(tool, p.deny) }
func (p denyPolicy) SeesAll(string) bool                  { return false }
func (p denyPolicy) Admit(string) (time.Duration, string) { return 0, "" }
func (p denyPolicy) Release(string)                       {}
func (p denyPolicy) Folder(string) string                 { return "" }
func (p denyPolicy) Generation() uint64                   { return 1 }

// simple is a registered tool of that name.
func simple(name string) Tool { return &fakeTool{name: name, schema: `{"type":"object"}`} }

// TestFallback: a name no tool has is given to the Fallback, which may
// answer it with a tool that is then called like any (its arguments only
// need to be an object), but never listed; a registered tool is found
// without asking it; the policy decides the Fallback's tools by name, so
// a key that may not call them gets exactly the unknown tool's answer.
func TestFallback(t *testing.T) {
	var asked atomic.Int64
	r := New(Options{Policy: denyPolicy{deny: "secret__"}})
	if err := r.Register(simple("files__read")); err != nil {
		t.Fatal(err)
	}
	r.SetFallback(func(name string) Tool {
		asked.Add(1)
		if strings.HasPrefix(name, "files__") || strings.HasPrefix(name, "secret__") {
			return startingTool(name)
		}
		return nil
	})

	if tg := r.Find("files__read"); !tg.Found() || asked.Load() != 0 {
		t.Fatalf("a registered tool: found %v, fallback asked %d times", tg.Found(), asked.Load())
	}
	tg := r.Find("files__later")
	if !tg.Found() || tg.Timeout() != 7*time.Second {
		t.Fatalf("the fallback's tool: found %v, timeout %s", tg.Found(), tg.Timeout())
	}
	if r.Find("other__x").Found() || r.Find("bad name!").Found() {
		t.Error("a name the fallback does not take, or an invalid one, was found")
	}
	res := r.Invoke(context.Background(), "files__later", []byte(`{"anything": [1, 2]}`), Meta{Key: "k"})
	if res.Error == nil || res.Error.Code != toolerr.Unavailable || !strings.Contains(res.Result, "is starting") {
		t.Errorf("the fallback's tool called: %+v", res)
	}
	if res := r.Invoke(context.Background(), "files__later", []byte(`[1]`), Meta{Key: "k"}); res.Error == nil || res.Error.Code != toolerr.InvalidArguments {
		t.Errorf("arguments that are no object: %+v", res)
	}
	// Denied: the unknown tool's answer, exactly.
	denied := r.Invoke(context.Background(), "secret__x", []byte(`{}`), Meta{Key: "k"})
	unknown := r.Invoke(context.Background(), "nothing__x", []byte(`{}`), Meta{Key: "k"})
	if denied.Error == nil || denied.Error.Code != toolerr.UnknownTool || denied.Result != strings.ReplaceAll(unknown.Result, "nothing__x", "secret__x") {
		t.Errorf("denied: %+v; unknown: %+v", denied, unknown)
	}
	if tg := r.FindFor("k", "secret__x"); tg.Found() || !tg.Denied() {
		t.Errorf("FindFor of a denied name: found %v denied %v", tg.Found(), tg.Denied())
	}
	// Listed nowhere.
	if names := r.Names(); len(names) != 1 || names[0] != "files__read" {
		t.Errorf("Names = %v", names)
	}
	if _, ok := r.DefinitionJSON("files__later"); ok {
		t.Error("DefinitionJSON of the fallback's tool")
	}
	if _, ok := r.DefinitionJSONFor("k", "files__later"); ok {
		t.Error("DefinitionJSONFor of the fallback's tool")
	}
	if strings.Contains(string(r.DefinitionsJSONFor("k")), "files__later") || r.Has("files__later") {
		t.Error("the fallback's tool is listed")
	}
	r.SetFallback(nil)
	if r.Find("files__later").Found() {
		t.Error("found after SetFallback(nil)")
	}
}

// TestFindAllocations: with a Fallback set, finding a registered tool and
// missing a name the Fallback does not take allocate nothing.
func TestFindAllocations(t *testing.T) {
	r := New(Options{})
	if err := r.Register(simple("files__read")); err != nil {
		t.Fatal(err)
	}
	r.SetFallback(func(name string) Tool {
		if strings.HasPrefix(name, "files__") {
			return startingTool(name)
		}
		return nil
	})
	for _, name := range []string{"files__read", "other__x"} {
		if n := testing.AllocsPerRun(1000, func() { _ = r.Find(name) }); n != 0 {
			t.Errorf("Find(%q) allocates %v times", name, n)
		}
	}
}

// BenchmarkFind: the look-up of a registered tool with a Fallback set,
// of a name nobody has, and of one the Fallback answers.
func BenchmarkFind(b *testing.B) {
	r := New(Options{})
	for _, n := range []string{"read_file", "write_file", "exec", "files__read"} {
		if err := r.Register(simple(n)); err != nil {
			b.Fatal(err)
		}
	}
	r.SetFallback(func(name string) Tool {
		if strings.HasPrefix(name, "files__") {
			return startingTool(name)
		}
		return nil
	})
	for _, name := range []string{"read_file", "nothing__x", "files__later"} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = r.Find(name)
			}
		})
	}
}
