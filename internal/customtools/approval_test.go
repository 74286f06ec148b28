package customtools

import (
	"strings"
	"testing"

	"github.com/countbot/toolsvc/internal/approval"
)

// TestApprovalRuleOfEntries: each form of an entry's approval becomes the
// rule the hold point asks the tool for, on command and http tools, and
// an entry without one gives none, so that only the policy decides.
func TestApprovalRuleOfEntries(t *testing.T) {
	f, err := Parse("t.yaml", []byte(`
tools:
  - name: deploy
    description: Deploy a service.
    parameters: {type: object, properties: {service: {type: string}, env: {type: string}}}
    command: [deploy.sh]
    approval: [{env: "prod*"}, {service: "billing"}]
  - name: wipe
    description: Wipe the cache.
    shell: rm -rf cache
    approval: always
  - name: notify
    description: Notify the team.
    http: {url: "https://hooks.example.com/notify"}
    approval: destructive
    annotations: {destructiveHint: false}
  - name: lookup
    description: Look something up.
    http: {url: "https://api.example.com/lookup"}
    approval: never
  - name: plain
    description: No rule of its own.
    shell: "true"
`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]approval.Ruled{}
	for _, s := range f.Tools {
		if s.HTTP != nil {
			tools[s.Name] = &HTTP{spec: s}
		} else {
			tools[s.Name] = &Command{spec: s}
		}
	}
	for _, tc := range []struct {
		tool        string
		destructive bool
		args        string
		ruled, hold bool
	}{
		{"deploy", true, `{"service": "web", "env": "production"}`, true, true},
		{"deploy", true, `{"service": "billing", "env": "staging"}`, true, true},
		{"deploy", true, `{"service": "web", "env": "staging"}`, true, false},
		{"deploy", true, `{}`, true, false},
		{"wipe", false, `{}`, true, true},
		// The hint the hold point passes is the tool's own: false here.
		{"notify", false, `{}`, true, false},
		{"notify", true, `{}`, true, true},
		{"lookup", true, `{}`, true, false},
		{"plain", true, `{}`, false, false},
	} {
		r, ok := tools[tc.tool].ApprovalRule()
		if ok != tc.ruled {
			t.Errorf("%s: ApprovalRule given = %v, want %v", tc.tool, ok, tc.ruled)
			continue
		}
		if got := r.Holds(tc.destructive, []byte(tc.args)); got != tc.hold {
			t.Errorf("%s(%s): holds = %v, want %v", tc.tool, tc.args, got, tc.hold)
		}
	}
	if f.Tools[2].Hints.Destructive {
		t.Error("notify: destructiveHint false was not kept")
	}
}

// TestApprovalEntryMistakes: a value that is no rule, or a pattern that
// could never match, stops the file with a message naming the tool.
func TestApprovalEntryMistakes(t *testing.T) {
	const head = "tools:\n  - name: deploy\n    description: Deploy.\n    shell: ./deploy.sh\n"
	const params = "    parameters: {type: object, properties: {env: {type: string}, service: {type: string}}}\n"
	for _, tc := range []struct {
		name, file string
		wants      []string
	}{
		{"unknown word", head + "    approval: sometimes\n", []string{`tool "deploy" (entry 1, line 2)`, `approval: "sometimes" is no approval rule`}},
		{"a number", head + "    approval: 3\n", []string{`tool "deploy"`, "approval: an approval rule is always, never, destructive"}},
		{"a map, not a list", head + params + "    approval: {env: prod}\n", []string{`tool "deploy"`, "approval: an approval rule is"}},
		{"empty list", head + "    approval: []\n", []string{`tool "deploy"`, "empty list of patterns"}},
		{"pattern not an object", head + params + "    approval: [prod]\n", []string{`tool "deploy"`, "pattern 1: want an object"}},
		{"empty glob", head + params + "    approval: [{env: \"\"}]\n", []string{`tool "deploy"`, "the glob of env must be a non-empty string"}},
		{"glob not a string", head + params + "    approval: [{env: 3}]\n", []string{`tool "deploy"`, "the glob of env must be a non-empty string"}},
		{"unknown argument", head + params + "    approval: [{env: prod}, {enviroment: prod}]\n",
			[]string{`tool "deploy"`, `pattern 2 names the argument "enviroment"`, "its arguments are env, service", "never hold a call"}},
		{"no arguments", head + "    approval: [{env: prod}]\n", []string{`tool "deploy"`, `"env"`, "it takes no arguments"}},
		{"typo of the key", head + "    aproval: always\n", []string{`unknown key "aproval"`, "approval)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(tc.file), Options{})
			if err == nil {
				t.Fatal("parsed")
			}
			for _, w := range append([]string{"tools file t.yaml"}, tc.wants...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	// A schema that takes arguments it does not list may be matched on
	// any name.
	open := head + "    parameters: {type: object, additionalProperties: {type: string}}\n    approval: [{env: prod}]\n"
	if _, err := Parse("t.yaml", []byte(open), Options{}); err != nil {
		t.Errorf("a pattern on a schema open to any argument: %v", err)
	}
	// true is always, false never, as the policy file reads them.
	for v, want := range map[string]approval.Kind{"true": approval.Always, "false": approval.Never} {
		f, err := Parse("t.yaml", []byte(head+"    approval: "+v+"\n"), Options{})
		if err != nil || f.Tools[0].Approval == nil || f.Tools[0].Approval.Kind != want {
			t.Errorf("approval: %s: %+v, %v", v, f, err)
		}
	}
}
