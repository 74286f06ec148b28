package policy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func testNames() Names {
	return Names{
		Keys:  []string{"alice", "bob", "carol", "ops"},
		Tools: []string{"read_file", "write_file", "list_dir", "exec", "web_fetch", "memory"},
		Toolsets: map[string][]string{
			"files": {"read_file", "write_file", "list_dir"},
			"shell": {"exec"},
			"web":   {"web_fetch"},
		},
		Servers: []string{"fs"},
	}
}

func TestParseDecides(t *testing.T) {
	p, err := Parse([]byte(`
default: {rate: {per_minute: 600, burst: 20}}
keys:
  bob:   {tools: {allow: [read_file]}}
  carol: {rate: {per_minute: 60, burst: 5}, max_concurrent: 2, tools: {allow: [files, "fs__*"], deny: [write_file]}}
  ops:   {tools: {deny: [shell]}}
`), testNames())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key, tool string
		want      bool
	}{
		{"alice", "exec", true}, // the default has no tools rule: every tool
		{"bob", "read_file", true},
		{"bob", "write_file", false},
		{"bob", "fs__read", false},
		{"carol", "list_dir", true},    // by its toolset
		{"carol", "write_file", false}, // deny wins
		{"carol", "fs__read", true},    // by the server's glob
		{"carol", "exec", false},
		{"ops", "exec", false}, // deny only: every tool but those
		{"ops", "web_fetch", true},
		{"nobody", "exec", true}, // a key the file does not list gets the default
	} {
		if got := p.Allows(c.key, c.tool); got != c.want {
			t.Errorf("Allows(%s, %s) = %v, want %v", c.key, c.tool, got, c.want)
		}
	}
	if !p.SeesAll("alice") || p.SeesAll("bob") {
		t.Error("SeesAll: alice sees all, bob does not")
	}
	// bob's entry sets no rate: the default's holds.
	if r := p.rule("bob"); r.perSecond != 10 || r.burst != 20 {
		t.Errorf("bob's rate = %v/s burst %v, want the default's 10/s burst 20", r.perSecond, r.burst)
	}
	if r := p.rule("carol"); r.perSecond != 1 || r.burst != 5 || r.maxConcurrent != 2 {
		t.Errorf("carol's rule = %+v", r)
	}
}

func TestParseRefuses(t *testing.T) {
	for _, c := range []struct{ name, file, want string }{
		{"unknown field", `keys: {bob: {tool: {allow: [read_file]}}}`, "field tool not found"},
		{"unknown top field", `key: {}`, "field key not found"},
		{"workspace absolute", `keys: {bob: {workspace: /srv/bob}}`, `keys.bob.workspace: "/srv/bob" gives "/srv/bob" for key "bob", which is not a folder inside TOOLSVC_WORKSPACE`},
		{"workspace climbs", `default: {workspace: "../{key}"}`, `default.workspace: "../{key}" gives "../alice" for key "alice"`},
		{"workspace climbs inside", `keys: {bob: {workspace: "a/../../b"}}`, "not a folder inside TOOLSVC_WORKSPACE"},
		{"workspace empty", `keys: {bob: {workspace: ""}}`, "keys.bob.workspace: is empty"},
		{"workspace other placeholder", `default: {workspace: "t/{name}"}`, "the only placeholder is {key}"},
		{"workspace backslash", `keys: {bob: {workspace: 'a\b'}}`, `separate folders with "/"`},
		{"workspace not a string", `keys: {bob: {workspace: [a]}}`, "cannot unmarshal"},
		{"workspace nested", `default: {workspace: "t/{key}"}
keys: {ops: {workspace: t}}`, `keys.ops.workspace: key "ops"'s folder "t" holds key "alice"'s folder "t/alice"`},
		{"subagents unknown field", `default: {subagents: {max: 2}}`, "field max not found"},
		{"subagents no running", `keys: {bob: {subagents: {max_running: 0}}}`, "keys.bob.subagents.max_running: must be 1 or more"},
		{"subagents no turns", `default: {subagents: {max_turns: -3}}`, "default.subagents.max_turns: must be 1 or more"},
		{"subagents not a number", `keys: {bob: {subagents: {max_turns: many}}}`, "cannot unmarshal"},
		{"unknown key", `keys: {bobb: {}}`, `no key is named "bobb" (did you mean "bob"?)`},
		{"unknown tool", `keys: {bob: {tools: {allow: [read_fil]}}}`, `no tool, toolset or MCP server is named "read_fil" (did you mean "read_file"?)`},
		{"unknown toolset", `keys: {bob: {tools: {deny: [shel]}}}`, `did you mean "shell"?`},
		{"unknown server", `keys: {bob: {tools: {allow: ["fz__*"]}}}`, `no MCP server is named "fz" (did you mean "fs"?)`},
		{"glob matching nothing", `keys: {bob: {tools: {allow: ["zz*"]}}}`, `"zz*" matches no tool`},
		{"bad glob", `keys: {bob: {tools: {allow: ["[a"]}}}`, "not a valid pattern"},
		{"no rate", `keys: {bob: {rate: {per_minute: 0, burst: 1}}}`, "per_minute: must be"},
		{"no burst", `keys: {bob: {rate: {per_minute: 5}}}`, "burst: must be 1 or more"},
		{"no concurrency", `keys: {bob: {max_concurrent: 0}}`, "max_concurrent: must be 1 or more"},
		{"JSON", `{"keys": {"bob": {"tools": {"allow": ["exce"]}}}}`, `did you mean "exec"?`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.file), testNames())
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to say %q", err, c.want)
			}
		})
	}
}

// TestParseServerToolByName: a tool of a known MCP server may be named
// before the server has listed it (servers start in the background);
// one of an unknown server may not.
func TestParseServerToolByName(t *testing.T) {
	p, err := Parse([]byte(`keys: {bob: {tools: {allow: [fs__read_file]}}}`), testNames())
	if err != nil {
		t.Fatal(err)
	}
	if !p.Allows("bob", "fs__read_file") || p.Allows("bob", "fs__write_file") {
		t.Error("bob's allow of fs__read_file")
	}
	if _, err := Parse([]byte(`keys: {bob: {tools: {allow: [fz__read_file]}}}`), testNames()); err == nil {
		t.Error("a tool of an unknown server accepted")
	}
}

// TestParseFolders: {key} expands to each key's name, whether the key is
// named in the file or served by the default; a key's own entry wins; "."
// is the whole workspace; two keys may share a folder.
func TestParseFolders(t *testing.T) {
	p, err := Parse([]byte(`
default: {workspace: "tenants/{key}"}
keys:
  bob:   {tools: {allow: [read_file]}}
  carol: {workspace: "shared/./team/"}
  ops:   {workspace: "."}
`), testNames())
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"alice": "tenants/alice", "bob": "tenants/bob", "carol": "shared/team", "ops": "", "nobody": ""} {
		if got := p.Folder(key); got != want {
			t.Errorf("Folder(%s) = %q, want %q", key, got, want)
		}
	}
	p, err = Parse([]byte(`keys: {alice: {workspace: team}, bob: {workspace: team}}`), testNames())
	if err != nil {
		t.Fatal(err)
	}
	if p.Folder("alice") != "team" || p.Folder("bob") != "team" || p.Folder("carol") != "" {
		t.Errorf("shared folder: alice %q, bob %q, carol %q", p.Folder("alice"), p.Folder("bob"), p.Folder("carol"))
	}
}

// TestParseNoFolders: where commands run unconfined, a folder is refused
// with the reason, once per place it is written; "." (the whole
// workspace) is not a folder of the key's own and passes.
func TestParseNoFolders(t *testing.T) {
	n := testNames()
	n.NoFolders = "exec's sandbox is none"
	_, err := Parse([]byte(`default: {workspace: "t/{key}"}`), n)
	if err == nil || err.Error() != "default.workspace: a key cannot have a folder of its own here: exec's sandbox is none" {
		t.Fatalf("err = %v", err)
	}
	if _, err := Parse([]byte(`keys: {ops: {workspace: "."}}`), n); err != nil {
		t.Fatal(err)
	}
}

// TestParseSubagents: a key's sub-agent bounds, taken from the default
// field by field, and 0 (the service's bounds alone) where nothing sets
// them.
func TestParseSubagents(t *testing.T) {
	p, err := Parse([]byte(`
default: {subagents: {max_running: 3, max_turns: 10}}
keys:
  alice: {subagents: {max_running: 1}}
  bob:   {subagents: {max_turns: 2}}
  carol: {max_concurrent: 4}
`), testNames())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key            string
		running, turns int
	}{
		{"alice", 1, 10}, {"bob", 3, 2}, {"carol", 3, 10}, {"ops", 3, 10},
	} {
		if r, n := p.Subagents(c.key); r != c.running || n != c.turns {
			t.Errorf("Subagents(%s) = %d, %d; want %d, %d", c.key, r, n, c.running, c.turns)
		}
	}
	p, err = Parse([]byte(`keys: {alice: {subagents: {max_turns: 5}}}`), testNames())
	if err != nil {
		t.Fatal(err)
	}
	if r, n := p.Subagents("alice"); r != 0 || n != 5 {
		t.Errorf("Subagents(alice) = %d, %d; want 0, 5", r, n)
	}
	if r, n := p.Subagents("bob"); r != 0 || n != 0 {
		t.Errorf("Subagents(bob) = %d, %d; want no bounds", r, n)
	}
	e := NewEnforcer(testNames().Keys, nil)
	if r, n := e.Subagents("alice"); r != 0 || n != 0 {
		t.Errorf("without a policy: %d, %d; want no bounds", r, n)
	}
	e.Set(p)
	if _, n := e.Subagents("alice"); n != 5 {
		t.Errorf("after Set: max_turns %d, want 5", n)
	}
}

func TestLoadNamesTheFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(f, []byte(`keys: {eve: {}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(f, testNames()); err == nil || !strings.Contains(err.Error(), f) {
		t.Fatalf("err = %v, want it to name the file", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "none.yaml"), testNames()); err == nil {
		t.Fatal("a missing file was accepted")
	}
}

// clock is a settable time for the bucket tests.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestEnforcerRate(t *testing.T) {
	p, err := Parse([]byte(`keys: {carol: {rate: {per_minute: 60, burst: 5}}}`), testNames())
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: time.Unix(1000, 0)}
	e := NewEnforcer(testNames().Keys, clk.now)
	e.Set(p)
	passed := 0
	var wait time.Duration
	for range 20 {
		w, reason := e.Admit("carol")
		if reason == "" {
			passed++
			e.Release("carol")
			continue
		}
		if reason != ReasonRate {
			t.Fatalf("reason = %q", reason)
		}
		wait = w
	}
	if passed != 5 || wait != time.Second {
		t.Fatalf("passed %d (want the burst, 5), wait %v (want 1s)", passed, wait)
	}
	// alice has no rule: never held back.
	for range 100 {
		if _, reason := e.Admit("alice"); reason != "" {
			t.Fatalf("alice refused: %s", reason)
		}
		e.Release("alice")
	}
	clk.t = clk.t.Add(2500 * time.Millisecond) // 2.5 tokens back
	for i := range 3 {
		w, reason := e.Admit("carol")
		if (i < 2) != (reason == "") {
			t.Fatalf("call %d after 2.5s: reason %q", i, reason)
		}
		if i == 2 && w != 500*time.Millisecond {
			t.Fatalf("wait = %v, want 500ms", w)
		}
	}
}

func TestEnforcerConcurrencyAndReload(t *testing.T) {
	p, err := Parse([]byte(`keys: {carol: {max_concurrent: 2}}`), testNames())
	if err != nil {
		t.Fatal(err)
	}
	e := NewEnforcer(testNames().Keys, nil)
	// Calls admitted before any policy count once one is set.
	if _, reason := e.Admit("carol"); reason != "" {
		t.Fatal(reason)
	}
	gen := e.Generation()
	e.Set(p)
	if e.Generation() == gen || !e.Active() {
		t.Fatal("Set did not change the generation")
	}
	if _, reason := e.Admit("carol"); reason != "" {
		t.Fatal(reason)
	}
	if w, reason := e.Admit("carol"); reason != ReasonConcurrency || w != time.Second {
		t.Fatalf("third call: %v %q, want 1s concurrency", w, reason)
	}
	e.Release("carol")
	if _, reason := e.Admit("carol"); reason != "" {
		t.Fatalf("after a release: %q", reason)
	}
	e.Set(nil)
	if !e.Allows("bob", "anything") || !e.SeesAll("bob") || e.Active() {
		t.Fatal("without a policy every key sees every tool")
	}
}

func TestEnforcerAllocatesNothing(t *testing.T) {
	p, err := Parse([]byte(`
default: {rate: {per_minute: 6000000, burst: 1000000}}
keys: {bob: {tools: {allow: [files, "fs__*", "web*"]}, max_concurrent: 4}}`), testNames())
	if err != nil {
		t.Fatal(err)
	}
	e := NewEnforcer(testNames().Keys, nil)
	e.Set(p)
	allocs := testing.AllocsPerRun(1000, func() {
		if !e.Allows("bob", "web_fetch") || e.Allows("bob", "exec") {
			t.Fatal("wrong decision")
		}
		if _, reason := e.Admit("bob"); reason != "" {
			t.Fatal(reason)
		}
		e.Release("bob")
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per call, want 0", allocs)
	}
}
