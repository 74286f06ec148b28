package app

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/config"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/workspace"
)

// testConfig is the configuration's defaults with temporary folders and
// the given variables (names without the prefix), read from nothing else.
func testConfig(t *testing.T, vars map[string]string) config.Config {
	t.Helper()
	all := map[string]string{"WORKSPACE": t.TempDir() + "/ws", "DATA_DIR": t.TempDir() + "/data"}
	for k, v := range vars {
		all[k] = v
	}
	cfg, err := config.LoadFrom(func(name string) (string, bool) {
		v, ok := all[strings.TrimPrefix(name, config.Prefix+"_")]
		return v, ok
	})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestResolve: a toolset stands for its tools, a tool for itself, each
// once, in the order the rows build them. The expectations come from the
// rows, so that a new tool does not change them.
func TestResolve(t *testing.T) {
	setTools := map[string][]string{}
	var all []string
	for _, s := range Toolsets() {
		setTools[s.Name] = s.Tools
		all = append(all, s.Tools...)
	}
	// inOrder is the given tools in build order.
	inOrder := func(names ...string) []string {
		var out []string
		for _, n := range all {
			if slices.Contains(names, n) {
				out = append(out, n)
			}
		}
		return out
	}
	tests := []struct {
		in      []string
		want    []string
		wantErr string
	}{
		{[]string{"memory", "web", "exec"}, inOrder(append(append([]string{"exec"}, setTools[Web]...), setTools[Memory]...)...), ""},
		{[]string{"read_file", "files"}, setTools[Files], ""},
		{[]string{"list_dir", "read_file"}, inOrder("list_dir", "read_file"), ""},
		{nil, nil, ""},
		{[]string{"agent"}, nil, `"agent" is neither a tool nor a toolset (did you mean "agents"?)`},
		{[]string{"Read_File"}, nil, `(did you mean "read_file"?)`},
		{[]string{"kubectl"}, nil, `"kubectl" is neither a tool nor a toolset (toolsets: files = `},
	}
	for _, s := range Toolsets() {
		tests = append(tests, struct {
			in      []string
			want    []string
			wantErr string
		}{[]string{s.Name}, s.Tools, ""})
		for _, tool := range s.Tools {
			tests = append(tests, struct {
				in      []string
				want    []string
				wantErr string
			}{[]string{tool}, []string{tool}, ""})
		}
	}
	for _, tc := range tests {
		got, err := Resolve(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Resolve(%q) error = %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("Resolve(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// TestToolsetsCoverEveryTool: each tool is in exactly one toolset, and no
// tool is named like another toolset (memory is the memory toolset's
// tool), so a name in a switch means one thing.
func TestToolsetsCoverEveryTool(t *testing.T) {
	seen := map[string]string{}
	sets := map[string]bool{}
	for _, s := range Toolsets() {
		sets[s.Name] = true
		for _, tool := range s.Tools {
			if other, dup := seen[tool]; dup {
				t.Errorf("%s is in %s and %s", tool, other, s.Name)
			}
			seen[tool] = s.Name
		}
	}
	for tool, set := range seen {
		if sets[tool] && tool != set {
			t.Errorf("tool %s of toolset %s shares its name with another toolset", tool, set)
		}
	}
}

// TestSubagentTools: the agent lists come from the rows; every tool a
// sub-agent may use, the conversation agent may use too, and screenshot,
// whose picture a sub-agent could not look at, goes to the conversation
// agent only.
func TestSubagentTools(t *testing.T) {
	sub, conv := SubagentTools(), ConversationTools()
	for _, tool := range sub {
		if !slices.Contains(conv, tool) {
			t.Errorf("a sub-agent may use %s, the conversation agent not", tool)
		}
	}
	if slices.Contains(sub, "screenshot") || !slices.Contains(conv, "screenshot") {
		t.Errorf("screenshot: sub-agents %q, conversation %q", sub, conv)
	}
	if len(sub) == 0 || !slices.Contains(sub, "read_file") {
		t.Errorf("sub-agents get %q", sub)
	}
}

func TestSelection(t *testing.T) {
	sel, err := NewSelection([]string{"files", "web"}, []string{"write_file", "screenshot"})
	if err != nil {
		t.Fatal(err)
	}
	for tool, want := range map[string]string{
		"read_file":  "",
		"web_fetch":  "",
		"write_file": "switched off by TOOLSVC_TOOLS_DISABLED",
		"screenshot": "switched off by TOOLSVC_TOOLS_DISABLED",
		"exec":       "not in TOOLSVC_TOOLS_ENABLED",
		"spawn":      "not in TOOLSVC_TOOLS_ENABLED",
	} {
		why, off := sel.Off(tool)
		if off != (want != "") || why != want {
			t.Errorf("Off(%s) = %q, %v; want %q", tool, why, off, want)
		}
	}
	all, err := NewSelection(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range Toolsets() {
		for _, tool := range s.Tools {
			if why, off := all.Off(tool); off {
				t.Errorf("no switches, but %s is off: %s", tool, why)
			}
		}
	}
	if _, err := NewSelection(nil, []string{"shell", "exce"}); err == nil || !strings.Contains(err.Error(), `TOOLSVC_TOOLS_DISABLED: "exce" is neither a tool nor a toolset (did you mean "exec"?)`) {
		t.Errorf("misspelt name: %v", err)
	}
}

// TestRegisterSubset builds a registry of one toolset, as a caller that
// needs only some tools does: nothing else is built or advertised.
func TestRegisterSubset(t *testing.T) {
	cfg := testConfig(t, nil)
	ws, err := workspace.Open(cfg.Workspace, true)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	sel, err := Only(Files)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	reg := registry.New(registry.Options{Log: zerolog.Nop()})
	got, err := Register(reg, Deps{Config: cfg, Workspace: ws, DataDir: t.TempDir(), Log: zerolog.New(&logs)}, sel)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	files, err := Resolve([]string{Files})
	if err != nil {
		t.Fatal(err)
	}
	if names := reg.Names(); !slices.Equal(names, slices.Sorted(slices.Values(files))) {
		t.Errorf("registry holds %q, want %q", names, files)
	}
	if !slices.Equal(got.On, files) {
		t.Errorf("On = %q, want %q", got.On, files)
	}
	for _, s := range Toolsets() {
		for _, tool := range s.Tools {
			if s.Name != Files && got.Off[tool] != "not in TOOLSVC_TOOLS_ENABLED" {
				t.Errorf("Off[%s] = %q", tool, got.Off[tool])
			}
		}
	}
	// The sandbox was never tried: exec was not built.
	if strings.Contains(logs.String(), "exec sandbox") {
		t.Errorf("exec was built although switched off:\n%s", logs.String())
	}
}

// TestNewServesFromConfig builds the whole service from a config value and
// serves it with httptest: the tools that are on are advertised, spawn is
// on with a model configured, and /readyz lists the tools left out.
func TestNewServesFromConfig(t *testing.T) {
	cfg := testConfig(t, map[string]string{
		"EXEC_SANDBOX": "none", "TOOLS_DISABLED": "screenshot",
		"LLM_BASE_URL": "http://127.0.0.1:9/v1", "LLM_MODEL": "m", "LLM_API_KEY": "llm-secret-0123456789",
	})
	var logs bytes.Buffer
	a, err := New(cfg, Options{Out: &logs, Version: "v-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/tools")
	if err != nil {
		t.Fatal(err)
	}
	var defs []registry.Definition
	if err := json.NewDecoder(resp.Body).Decode(&defs); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var names []string
	for _, d := range defs {
		names = append(names, d.Function.Name)
	}
	// What is on, as Register reports it, is what is advertised: spawn and
	// workflow_run (a model), not screenshot (switched off), send_message
	// (no conversation mode) or send_media (no channel).
	if want := slices.Sorted(slices.Values(a.tools.On)); !slices.Equal(names, want) {
		t.Errorf("GET /tools = %q, want %q", names, want)
	}
	for tool, want := range map[string]bool{"spawn": true, "workflow_run": true, "read_file": true, "exec": true,
		"screenshot": false, "send_message": false, "send_media": false} {
		if slices.Contains(names, tool) != want {
			t.Errorf("GET /tools = %q: %s advertised is %v, want %v", names, tool, !want, want)
		}
	}
	ok, checks := a.Ready()
	if !ok || checks["tool:screenshot"] != "off: switched off by TOOLSVC_TOOLS_DISABLED" || checks["tool:spawn"] != "" {
		t.Errorf("Ready = %v %q", ok, checks)
	}
	// The access log line is written after the response: read the log once
	// the server has finished every request.
	srv.Close()
	a.Close() // twice is fine: the deferred one does nothing
	if strings.Contains(logs.String(), "llm-secret-0123456789") {
		t.Errorf("the log holds the model key:\n%s", logs.String())
	}
}

// TestNewFailsCleanly: a setting that cannot work stops New with an error
// naming it, and nothing is left running.
func TestNewFailsCleanly(t *testing.T) {
	for _, tc := range []struct {
		vars map[string]string
		want string
	}{
		{map[string]string{"TOOLS_ENABLED": "file"}, `did you mean "files"?`},
		{map[string]string{"EXEC_USER": "0"}, "TOOLSVC_EXEC_USER"},
	} {
		a, err := New(testConfig(t, tc.vars), Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) || a != nil {
			t.Errorf("%v: New = %v, %v; want an error naming %q", tc.vars, a, err, tc.want)
		}
	}
}

// TestToolOffLogLevel: a tool left out for want of its dependency is an
// info line at a plain start, and a warning when the operator asked for
// it in TOOLSVC_TOOLS_ENABLED.
func TestToolOffLogLevel(t *testing.T) {
	for _, tc := range []struct {
		enabled []string
		want    string
	}{
		{nil, "info"},
		{[]string{Files, Agents}, "warn"},
		{[]string{Files, "spawn"}, "warn"},
	} {
		cfg := testConfig(t, nil)
		ws, err := workspace.Open(cfg.Workspace, true)
		if err != nil {
			t.Fatal(err)
		}
		sel, err := NewSelection(tc.enabled, []string{Shell, Web})
		if err != nil {
			t.Fatal(err)
		}
		var logs bytes.Buffer
		got, err := Register(registry.New(registry.Options{Log: zerolog.Nop()}), Deps{Config: cfg, Workspace: ws, DataDir: t.TempDir(), Log: zerolog.New(&logs)}, sel)
		if err != nil {
			t.Fatal(err)
		}
		got.Close()
		ws.Close()
		found := false
		for _, line := range strings.Split(logs.String(), "\n") {
			var l struct{ Level, Tool, State string }
			if json.Unmarshal([]byte(line), &l) == nil && l.Tool == "spawn" {
				found = true
				if l.State != "off" || l.Level != tc.want {
					t.Errorf("enabled %q: spawn logged %s; want off at %s", tc.enabled, line, tc.want)
				}
			}
		}
		if !found {
			t.Errorf("enabled %q: no line for spawn:\n%s", tc.enabled, logs.String())
		}
	}
}
