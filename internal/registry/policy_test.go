package registry

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/toolerr"
)

// fakePolicy lets bob call "say" only and holds carol back.
type fakePolicy struct {
	mu       sync.Mutex
	running  map[string]int
	gen      uint64
	released int
}

func (p *fakePolicy) Allows(key, tool string) bool { return key != "bob" || tool == "say" }
func (p *fakePolicy) SeesAll(key string) bool      { return key != "bob" }
func (p *fakePolicy) Folder(key string) string     { return "" }
func (p *fakePolicy) Admit(key string) (time.Duration, string) {
	if key == "carol" {
		return 2500 * time.Millisecond, "rate"
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running[key]++
	return 0, ""
}
func (p *fakePolicy) Release(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running[key]--
	p.released++
}
func (p *fakePolicy) Generation() uint64 { return p.gen }

type namedTool struct{ name string }

func (t namedTool) Name() string                { return t.name }
func (t namedTool) Description() string         { return "a tool" }
func (t namedTool) Parameters() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (t namedTool) Execute(context.Context, json.RawMessage) (string, error) {
	return "ran " + t.name, nil
}

// TestPolicyDecidesEveryCall: a tool the key may not call is answered as
// an unknown tool and listed nowhere for it; a key held back gets a
// rate_limited result telling the model how long to wait; both are
// audited with their decision and run nothing; an admitted call is
// released once it ends.
func TestPolicyDecidesEveryCall(t *testing.T) {
	pol := &fakePolicy{running: map[string]int{}}
	al := &memAudit{}
	rec := &recorder{}
	reg := New(Options{Policy: pol, Audit: al, Observer: rec})
	for _, n := range []string{"say", "shout"} {
		if err := reg.Register(namedTool{n}); err != nil {
			t.Fatal(err)
		}
	}
	unknown := reg.Invoke(context.Background(), "nope", nil, Meta{Key: "bob"})
	denied := reg.Invoke(context.Background(), "shout", nil, Meta{Key: "bob"})
	if denied.Error == nil || denied.Error.Code != toolerr.UnknownTool ||
		strings.ReplaceAll(denied.Result, "shout", "X") != strings.ReplaceAll(unknown.Result, "nope", "X") {
		t.Fatalf("bob's shout = %+v, want what an unknown tool gets: %+v", denied, unknown)
	}
	if res := reg.Invoke(context.Background(), "shout", nil, Meta{Key: "alice"}); res.Result != "ran shout" {
		t.Fatalf("alice's shout: %+v", res)
	}
	held := reg.Invoke(context.Background(), "say", nil, Meta{Key: "carol"})
	if held.Error == nil || held.Error.Code != toolerr.RateLimited || held.RetryAfter != 2500*time.Millisecond ||
		!strings.Contains(held.Result, "wait 3 seconds") {
		t.Fatalf("carol's call = %+v", held)
	}
	if pol.running["alice"] != 0 || pol.released != 1 {
		t.Fatalf("admissions not released: %v, %d releases", pol.running, pol.released)
	}
	var decisions []string
	for _, r := range al.recs {
		if r.Decision != "" {
			decisions = append(decisions, r.Key+" "+r.ToolName+" "+r.Decision+" "+r.ErrorCode)
		}
	}
	if strings.Join(decisions, "; ") != "bob shout denied unknown_tool; carol say rate_limited rate_limited" {
		t.Fatalf("audited decisions: %v", decisions)
	}
	if got := strings.Join(rec.events, "; "); !strings.Contains(got, "refused bob denied") || !strings.Contains(got, "refused carol rate") {
		t.Fatalf("observer: %s", got)
	}
	// Listings: bob sees say only, on every listing; alice every tool.
	if got := string(reg.DefinitionsJSONFor("bob")); strings.Contains(got, "shout") || !strings.Contains(got, `"say"`) {
		t.Fatalf("bob's definitions: %s", got)
	}
	if string(reg.DefinitionsJSONFor("alice")) != string(reg.DefinitionsJSON()) {
		t.Fatal("alice's definitions are not everyone's")
	}
	if _, ok := reg.DefinitionJSONFor("bob", "shout"); ok || len(reg.DefinitionsFor("bob")) != 1 {
		t.Fatal("bob finds shout")
	}
	// A policy change is a new generation: caches built per generation
	// are built again.
	gen := reg.Generation()
	pol.gen++
	if reg.Generation() == gen {
		t.Fatal("the generation did not follow the policy")
	}
}
