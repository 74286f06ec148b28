package mcpmount

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseConfig(t *testing.T) {
	cases := []struct {
		name, in string
		want     Config
		err      string
	}{
		{"claude desktop stdio", `{"command":"npx","args":["-y","@modelcontextprotocol/server-memory"],"env":{"MEMORY_FILE_PATH":"memory.jsonl"}}`,
			Config{Type: TypeStdio, Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-memory"}, Env: map[string]string{"MEMORY_FILE_PATH": "memory.jsonl"}}, ""},
		{"url without type", `{"url":"https://mcp.example.com/mcp"}`, Config{Type: TypeHTTP, URL: "https://mcp.example.com/mcp"}, ""},
		{"type http", `{"type":"http","url":"http://127.0.0.1:3001/mcp","headers":{"Authorization":"Bearer ${T}"}}`,
			Config{Type: TypeHTTP, URL: "http://127.0.0.1:3001/mcp", Headers: map[string]string{"Authorization": "Bearer ${T}"}}, ""},
		{"cline streamableHttp", `{"type":"streamableHttp","url":"http://x/mcp","timeout":60,"autoApprove":[],"disabled":true}`,
			Config{Type: TypeHTTP, URL: "http://x/mcp", Timeout: time.Minute, Disabled: true}, ""},
		{"toolsvc keys", `{"command":"node","args":["s.js"],"network":true,"timeout":"90s","cwd":"tools"}`,
			Config{Type: TypeStdio, Command: "node", Args: []string{"s.js"}, Network: Network{On: true, Given: true}, Timeout: 90 * time.Second, Cwd: "tools"}, ""},
		{"typo", `{"comand":"npx"}`, Config{}, `unknown key "comand"`},
		{"envFile", `{"command":"x","envFile":".env"}`, Config{}, `"envFile" is not supported`},
		{"sse", `{"type":"sse","url":"http://x/sse"}`, Config{}, `type "sse"`},
		{"unknown type", `{"type":"websocket","url":"ws://x"}`, Config{}, `unknown type "websocket"`},
		{"both", `{"command":"x","url":"http://x"}`, Config{}, `belong to a Streamable HTTP server`},
		{"neither", `{"args":["x"]}`, Config{}, `needs a "command"`},
		{"network on http", `{"url":"http://x","network":true}`, Config{}, `"network" applies to stdio servers only`},
		{"bad url", `{"url":"file:///etc/passwd"}`, Config{}, "must start with http:// or https://"},
		{"bad timeout", `{"command":"x","timeout":"soon"}`, Config{}, "timeout"},
		{"not an object", `["npx"]`, Config{}, "must be a JSON object"},
		{"null", `null`, Config{}, "must be a JSON object"},
		{"wrong type of args", `{"command":"x","args":"-y"}`, Config{}, "args"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseConfig([]byte(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Type != tc.want.Type || got.Command != tc.want.Command || got.URL != tc.want.URL || !reflect.DeepEqual(got.Network, tc.want.Network) ||
				got.Timeout != tc.want.Timeout || got.Cwd != tc.want.Cwd || got.Disabled != tc.want.Disabled ||
				strings.Join(got.Args, " ") != strings.Join(tc.want.Args, " ") || len(got.Env) != len(tc.want.Env) || len(got.Headers) != len(tc.want.Headers) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestResolveSecrets(t *testing.T) {
	getenv := func(n string) (string, bool) {
		v, ok := map[string]string{"TOKEN": "abcdefgh12345678", "REGION": "eu-west-1"}[n]
		return v, ok
	}
	c := Config{Headers: map[string]string{"Authorization": "Bearer ${TOKEN}", "X-Region": "${REGION}"},
		Env: map[string]string{"GITHUB_TOKEN": "ghp_literal_value_1", "LOG_LEVEL": "debugging", "KEY_FROM_VAR": "${TOKEN}"}}
	c.Args = []string{"--root", "${WORKSPACE}/data", "${TOKEN}"}
	c.Env["MEMORY_FILE_PATH"] = "${WORKSPACE}/memory.jsonl"
	r, err := c.resolve("/srv/ws", getenv)
	if err != nil {
		t.Fatal(err)
	}
	if r.headers["Authorization"] != "Bearer abcdefgh12345678" || r.env["KEY_FROM_VAR"] != "abcdefgh12345678" ||
		r.env["MEMORY_FILE_PATH"] != "/srv/ws/memory.jsonl" || strings.Join(r.args, " ") != "--root /srv/ws/data ${TOKEN}" {
		t.Errorf("resolved %+v", r)
	}
	all := strings.Join(r.secrets, "|")
	for _, want := range []string{"Bearer abcdefgh12345678", "abcdefgh12345678", "eu-west-1", "ghp_literal_value_1"} {
		if !strings.Contains(all, want) {
			t.Errorf("secret %q missing from %q", want, all)
		}
	}
	if strings.Contains(all, "debugging") || strings.Contains(all, "/srv/ws") {
		t.Errorf("an ordinary env value is taken for a secret: %q", all)
	}
	if got := strings.Join(c.Secrets("/srv/ws", getenv), "|"); !strings.Contains(got, "ghp_literal_value_1") || !strings.Contains(got, "Bearer abcdefgh12345678") || strings.Contains(got, "debugging") || strings.Contains(got, "/srv/ws") {
		t.Errorf("Config.Secrets: %q", got)
	}
	if _, err := (Config{Headers: map[string]string{"A": "${MISSING}"}}).resolve("/srv/ws", getenv); err == nil || !strings.Contains(err.Error(), "MISSING is not set") {
		t.Errorf("missing variable: %v", err)
	}
}

func TestToolName(t *testing.T) {
	long := strings.Repeat("a", 70)
	cases := []struct{ server, tool, want string }{
		{"github", "create_issue", "github__create_issue"},
		{"fs", "read-file", "fs__read-file"},
		{"my server", "tools/list.v2", "my_server__tools_list_v2"},
		{"s", "ünïcode", "s___n_code"},
	}
	for _, tc := range cases {
		if got := ToolName(tc.server, tc.tool); got != tc.want || !validName.MatchString(got) {
			t.Errorf("ToolName(%q, %q) = %q, want %q", tc.server, tc.tool, got, tc.want)
		}
	}
	a, b := ToolName("srv", long+"x"), ToolName("srv", long+"y")
	if len(a) != 64 || !validName.MatchString(a) || a == b || a != ToolName("srv", long+"x") || !strings.HasPrefix(a, "srv__aaa") {
		t.Errorf("long names %q and %q", a, b)
	}
}

func TestNormalizeSchema(t *testing.T) {
	cases := []struct {
		name string
		in   any
		want string // substring of the result, or of the error after "!"
	}{
		{"nil", nil, `"type":"object"`},
		{"no type", map[string]any{"properties": map[string]any{"a": map[string]any{"type": "string"}}}, `"type":"object"`},
		{"draft 2020-12 dropped", map[string]any{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object"}, `{"type":"object"}`},
		{"draft 7 kept", map[string]any{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}, `draft-07`},
		{"string", map[string]any{"type": "string"}, `!not "object"`},
		{"array", []any{1}, `!not a JSON object`},
		{"remote ref", map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"$ref": "https://evil.example/s.json"}}}, `!points outside`},
		{"remote id", map[string]any{"type": "object", "$id": "https://evil.example/s.json"}, `!remote base`},
		{"local ref", map[string]any{"type": "object", "definitions": map[string]any{"n": map[string]any{"type": "integer"}}, "properties": map[string]any{"a": map[string]any{"$ref": "#/definitions/n"}}}, `#/definitions/n`},
		{"huge", map[string]any{"type": "object", "description": strings.Repeat("d", 70<<10)}, `!more than`},
		{"bad type inside", map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": 7}}}, `!`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := normalizeSchema(tc.in)
			if strings.HasPrefix(tc.want, "!") {
				if err == nil || !strings.Contains(err.Error(), tc.want[1:]) {
					t.Fatalf("got %s, %v; want an error with %q", got, err, tc.want[1:])
				}
				return
			}
			if err != nil || !strings.Contains(string(got), tc.want) {
				t.Fatalf("got %s, %v; want %q", got, err, tc.want)
			}
		})
	}
}
