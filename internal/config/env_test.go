package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// mapLookup answers for the variables in vars, names without the prefix.
func mapLookup(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := vars[strings.TrimPrefix(name, Prefix+"_")]
		return v, ok
	}
}

// TestLoadFromDefaults checks that every field decodes from its default
// and that the values are the documented ones.
func TestLoadFromDefaults(t *testing.T) {
	dir := t.TempDir()
	c, err := LoadFrom(mapLookup(map[string]string{"WORKSPACE": dir + "/ws", "DATA_DIR": dir + "/data"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != "127.0.0.1:8080" || c.CallTimeout != 2*time.Minute || !c.RestrictWorkspace || c.ExecMaxMemory != 2<<30 ||
		c.ExecSandbox != "auto" || c.ReadMaxChars != 50000 || len(c.ToolsEnabled) != 0 || len(c.ToolsDisabled) != 0 {
		t.Errorf("defaults: %+v", c)
	}
}

func TestLoadFromValues(t *testing.T) {
	dir := t.TempDir()
	c, err := LoadFrom(mapLookup(map[string]string{
		"WORKSPACE": dir + "/ws", "DATA_DIR": dir + "/data", "CALL_TIMEOUT": "5s", "AUDIT_ENABLED": "false",
		"MAX_BODY_BYTES": "0x100", "TOOLS_DISABLED": " shell, screenshot ,", "EXEC_MAX_MEMORY": "512MiB",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.CallTimeout != 5*time.Second || c.AuditEnabled || c.MaxBodyBytes != 256 || c.ExecMaxMemory != 512<<20 ||
		!reflect.DeepEqual(c.ToolsDisabled, List{"shell", "screenshot"}) {
		t.Errorf("got %+v", c)
	}
}

func TestLoadFromBadValue(t *testing.T) {
	for _, tc := range []struct{ name, value, want string }{
		{"CALL_TIMEOUT", "soon", `TOOLSVC_CALL_TIMEOUT="soon" is not a valid duration`},
		{"AUDIT_ENABLED", "", `TOOLSVC_AUDIT_ENABLED="" is not a valid boolean`},
		{"READ_MAX_CHARS", "many", `TOOLSVC_READ_MAX_CHARS="many" is not a valid whole number`},
		{"EXEC_MAX_MEMORY", "lots", `TOOLSVC_EXEC_MAX_MEMORY="lots" is not a valid amount of memory`},
	} {
		_, err := LoadFrom(mapLookup(map[string]string{tc.name: tc.value}))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s=%q: got %v, want %q", tc.name, tc.value, err, tc.want)
		}
	}
}

// TestLoadFromPrefixOnly: a variable named without the prefix is another
// program's, even when its name matches a setting's.
func TestLoadFromPrefixOnly(t *testing.T) {
	dir := t.TempDir()
	vars := map[string]string{"WORKSPACE": dir + "/ws", "DATA_DIR": dir + "/data"}
	c, err := LoadFrom(func(name string) (string, bool) {
		if name == "LOG_LEVEL" {
			return "bogus", true
		}
		return mapLookup(vars)(name)
	})
	if err != nil || c.LogLevel != "info" {
		t.Errorf("LOG_LEVEL without the prefix was read: %v %q", err, c.LogLevel)
	}
}

func TestNamesFromTags(t *testing.T) {
	names := Names()
	fields := 0
	for _, sec := range reflect.VisibleFields(reflect.TypeFor[Config]()) {
		if !sec.Anonymous {
			fields++
		}
	}
	if len(names) != fields {
		t.Errorf("%d names for %d fields", len(names), fields)
	}
	for _, want := range []string{"TOOLSVC_ADDR", "TOOLSVC_API_KEYS", "TOOLSVC_TOOLS_ENABLED", "TOOLSVC_TOOLS_DISABLED", "TOOLSVC_AGENT_MAX_CONCURRENT"} {
		found := false
		for _, n := range names {
			found = found || n == want
		}
		if !found {
			t.Errorf("Names lacks %s", want)
		}
	}
}

func TestCheckNames(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		want []string // substrings of the error; none: no error
	}{
		{[]string{"TOOLSVC_ADDR=x", "TOOLSVC_API_KEYS=", "PATH=/bin", "OTHER_API_KEY=1"}, nil},
		{[]string{"TOOLSVC_TEST_AS_USER=1", "TOOLSVC_TEST_ATTACK_BIN=/x"}, nil},
		{[]string{"TOOLSVC_API_KEY=abc"}, []string{"TOOLSVC_API_KEY is not a setting; did you mean TOOLSVC_API_KEYS?"}},
		{[]string{"TOOLSVC_TOOL_DISABLED=exec"}, []string{"did you mean TOOLSVC_TOOLS_DISABLED?"}},
		{[]string{"TOOLSVC_WORKSPASE=/w", "TOOLSVC_LOGLEVEL=debug"}, []string{"did you mean TOOLSVC_WORKSPACE?", "did you mean TOOLSVC_LOG_LEVEL?"}},
		{[]string{"TOOLSVC_KEY=abc"}, []string{"TOOLSVC_KEY is not a setting (toolsvc help all"}},
		{[]string{"TOOLSVC_FROBNICATE=1"}, []string{"TOOLSVC_FROBNICATE is not a setting (toolsvc help all"}},
	} {
		err := CheckNames(tc.env)
		if len(tc.want) == 0 {
			if err != nil {
				t.Errorf("%q: %v", tc.env, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%q: no error", tc.env)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q: %v; want %q", tc.env, err, w)
			}
		}
	}
}

func TestNearest(t *testing.T) {
	known := []string{"read_file", "write_file", "files", "shell", "exec", "web_fetch"}
	for _, tc := range []struct{ name, want string }{
		{"read_files", "read_file"},
		{"READ_FILE", "read_file"},
		{"shel", "shell"},
		{"webfetch", "web_fetch"},
		{"browser", ""},
	} {
		if got := Nearest(tc.name, known); got != tc.want {
			t.Errorf("Nearest(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
	if got := Nearest("x", nil); got != "" {
		t.Errorf("no known names: %q", got)
	}
}
