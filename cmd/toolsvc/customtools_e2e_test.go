package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countbot/toolsvc/internal/agent/agenttest"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/toolfmt"
)

// weatherToken is the secret the example's weather tool sends; it must
// never be seen outside the request to the weather service.
const weatherToken = "wx-token-5f1c9e7a2b"

// weatherServer stands for the example's weather service: it checks the
// token, answers 503 for Atlantis, and echoes the token back in its
// answer, as a careless service might, to prove the result is redacted.
type weatherServer struct {
	*httptest.Server
	hits atomic.Int64
	mu   sync.Mutex
	last map[string]any
}

func newWeatherServer(t *testing.T) *weatherServer {
	w := &weatherServer{}
	w.Server = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.hits.Add(1)
		if r.Method != http.MethodPost || r.Header.Get("Authorization") != "Bearer "+weatherToken || r.Header.Get("Content-Type") != "application/json" {
			http.Error(rw, "bad request: "+r.Method+" "+r.Header.Get("Authorization"), http.StatusUnauthorized)
			return
		}
		var args map[string]any
		if err := json.NewDecoder(r.Body).Decode(&args); err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		w.mu.Lock()
		w.last = args
		w.mu.Unlock()
		if args["city"] == "Atlantis" {
			http.Error(rw, "no weather station in Atlantis (token "+weatherToken+")", http.StatusServiceUnavailable)
			return
		}
		rw.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(rw, `{"city":`+mustJSON(args["city"])+`,"temp_c":21,"conditions":"sunny","debug":"auth Bearer `+weatherToken+`"}`)
	}))
	t.Cleanup(w.Close)
	return w
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// exampleToolsFile is docs/examples/tools.yaml with the weather URL
// pointed at this test's stand-in (the file names the stand-in the docs
// start, on a fixed port), written into a temporary folder.
func exampleToolsFile(t *testing.T, weatherURL string) string {
	t.Helper()
	data, err := os.ReadFile("../../docs/examples/tools.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const documented = "http://127.0.0.1:8091/v1/current"
	if !bytes.Contains(data, []byte(documented)) {
		t.Fatalf("the example no longer names %s", documented)
	}
	data = bytes.ReplaceAll(data, []byte(documented), []byte(weatherURL+"/v1/current"))
	p := filepath.Join(t.TempDir(), "tools.yaml")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// installWordCount puts the example's script where the example's
// word_count tool runs it.
func installWordCount(t *testing.T, s *testServer) {
	t.Helper()
	script, err := os.ReadFile("../../docs/examples/word_count.sh")
	if err != nil {
		t.Fatal(err)
	}
	s.writeWS(t, "scripts/word_count.sh", string(script))
}

// TestCustomToolsExample loads the documented example file and goes
// through every door: the command tool runs its workspace script in the
// sandbox, the HTTP tool reaches its (loopback) service with the token,
// both are listed in every format, in /openapi.json and over MCP, bad
// arguments are refused before either runner runs, every call is audited
// and counted, and the token is never in a result, an audit file or the
// log.
func TestCustomToolsExample(t *testing.T) {
	ws := newWeatherServer(t)
	s := startServer(t, map[string]string{
		"TOOLS_FILE": exampleToolsFile(t, ws.URL), // allow_private: the stand-in is on loopback
	}, withEnv("WEATHER_TOKEN", weatherToken))
	installWordCount(t, s)
	s.writeWS(t, "notes/todo.md", "buy milk\nwrite the docs\n")

	// The command tool.
	out := mustSucceed(t, s.invoke(t, "word_count", map[string]any{"path": "notes/todo.md"}))
	if strings.TrimSpace(out) != "notes/todo.md: 2 lines, 5 words, 24 bytes" {
		t.Errorf("word_count = %q", out)
	}
	// A non-zero exit is an error result with the end of stderr.
	mustFail(t, s.invoke(t, "word_count", map[string]any{"path": "missing.md"}), "tool_error", "exit code 1", "STDERR (last part):\nno file missing.md in the workspace\n\nNext: ")
	// The sandbox: the script cannot write outside the workspace.
	mustFail(t, s.invoke(t, "word_count", map[string]any{"path": "../etc/passwd"}), "tool_error", "relative to the workspace")

	// The HTTP tool: the token reaches the service, never the result.
	out = mustSucceed(t, s.invoke(t, "weather", map[string]any{"city": "Lisbon", "units": "metric"}))
	assertContains(t, "weather result", out, `"city":"Lisbon"`, `"temp_c":21`, "[REDACTED]")
	ws.mu.Lock()
	if ws.last["city"] != "Lisbon" || ws.last["units"] != "metric" {
		t.Errorf("the service got %v", ws.last)
	}
	ws.mu.Unlock()
	// Anything but 2xx is an error result with an excerpt of the body.
	mustFail(t, s.invoke(t, "weather", map[string]any{"city": "Atlantis"}), "tool_error", "HTTP 503", "no weather station in Atlantis", "[REDACTED]")

	// Arguments against the schema are refused before the runner runs.
	hits := ws.hits.Load()
	mustFail(t, s.invoke(t, "weather", map[string]any{"units": "kelvin"}), "invalid_arguments", "city", "units")
	if ws.hits.Load() != hits {
		t.Errorf("the weather service was called with invalid arguments")
	}
	mustFail(t, s.invoke(t, "word_count", map[string]any{"path": "notes/todo.md", "shell": "rm -rf /"}), "invalid_arguments", "shell")

	// Listed in every format, in the OpenAPI document and over MCP.
	for _, f := range toolfmt.Formats() {
		resp, body := s.do(t, "GET", "/tools?format="+f, nil, nil)
		if resp.StatusCode != 200 || !bytes.Contains(body, []byte(`"word_count"`)) || !bytes.Contains(body, []byte(`"weather"`)) {
			t.Errorf("GET /tools?format=%s lacks the file's tools: %d %.200s", f, resp.StatusCode, body)
		}
	}
	if _, body := s.do(t, "GET", "/tools/weather", nil, nil); !bytes.Contains(body, []byte(`"enum":["metric","imperial"]`)) {
		t.Errorf("GET /tools/weather: %s", body)
	}
	if _, body := s.do(t, "GET", "/openapi.json", nil, nil); !bytes.Contains(body, []byte(`"/tools/weather/invoke"`)) || !bytes.Contains(body, []byte(`"/tools/word_count/invoke"`)) {
		t.Errorf("/openapi.json lacks the file's tools")
	}
	names, res := mcpCall(t, s, "word_count", map[string]any{"path": "notes/todo.md"})
	if !names["weather"] || !names["word_count"] {
		t.Errorf("MCP tools/list = %v", names)
	}
	if res.IsError || !strings.Contains(mcpText(res), "2 lines, 5 words") {
		t.Errorf("word_count over MCP: %+v", mcpText(res))
	}

	// Counted, ready, logged at start-up.
	_, metrics := s.do(t, "GET", "/metrics", nil, nil)
	assertContains(t, "/metrics", string(metrics), `toolsvc_tool_calls_total{status="success",tool="weather"} 1`, `tool="word_count"`)
	_, ready := s.do(t, "GET", "/readyz", nil, nil)
	assertContains(t, "/readyz", string(ready), `"tools_file":"ok"`)
	assertContains(t, "start-up log", s.Logs(), `"tool":"word_count","state":"on","source":"file","toolset":"text"`, `"tool":"weather","state":"on","source":"file"`)

	// One audit file per call, none holding the token.
	s.Stop(t)
	var weatherCalls int
	_ = filepath.Walk(filepath.Join(s.DataDir, "audit_logs"), func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(data, []byte(weatherToken)) {
			t.Errorf("audit file %s holds the token", p)
		}
		var rec struct {
			ToolName string `json:"tool_name"`
		}
		if strings.HasSuffix(p, ".json") && json.Unmarshal(data, &rec) == nil && rec.ToolName == "weather" {
			weatherCalls++
		}
		return nil
	})
	if weatherCalls != 3 {
		t.Errorf("%d audit files of weather calls, want 3 (two run, one refused)", weatherCalls)
	}
	if strings.Contains(s.Logs(), weatherToken) {
		t.Errorf("the log holds the token")
	}
}

// mcpCall lists the tools over MCP with the SDK's client and calls one.
func mcpCall(t *testing.T, s *testServer, tool string, args map[string]any) (map[string]bool, *mcp.CallToolResult) {
	t.Helper()
	ctx := context.Background()
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	sess, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.URL + "/mcp", MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	list, err := sess.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tl := range list.Tools {
		names[tl.Name] = true
	}
	res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	return names, res
}

func mcpText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// writeToolsFile writes a tools file into a temporary folder.
func writeToolsFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tools.yaml")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCustomCommandInjection sends arguments built to break out of a
// shell to a command tool of each kind (an argv program and an operator's
// shell script that uses the variable, quoted): none of them is ever
// interpreted by a shell, which the canary file would show, and each
// comes back byte for byte. A NUL cannot be an environment variable's
// value: the call is refused before anything runs.
func TestCustomCommandInjection(t *testing.T) {
	file := writeToolsFile(t, `
tools:
  - name: echo_argv
    description: Echo text (program without a shell).
    parameters:
      type: object
      properties:
        text: {type: string}
        user-id: {type: string}
      required: [text]
    command: ["sh", "scripts/echo.sh"]
  - name: echo_shell
    description: Echo text (an operator's script).
    parameters:
      type: object
      properties:
        text: {type: string}
      required: [text]
    shell: printf '%s' "$TOOL_ARG_TEXT"
`)
	s := startServer(t, map[string]string{"TOOLS_FILE": file})
	// The script prints both variables, then stdin, apart by a record
	// separator: each must be literal.
	s.writeWS(t, "scripts/echo.sh", "printf '%s\\036%s\\036' \"$TOOL_ARG_TEXT\" \"$TOOL_ARG_USER_ID\"\ncat\n")
	canaryWS := filepath.Join(s.Workspace, "canary")
	payloads := []string{
		"; touch " + canaryWS + "; rm -rf " + canaryWS + ".d",
		"$(touch " + canaryWS + ")",
		"`touch " + canaryWS + "`",
		"line one\ntouch " + canaryWS + "\n",
		"' ; touch " + canaryWS + " ; echo '",
		"\" ; touch " + canaryWS + " ; echo \"",
		"${IFS}touch${IFS}" + canaryWS,
		"| touch " + canaryWS + " &",
	}
	for _, p := range payloads {
		args := map[string]any{"text": p, "user-id": "$(touch " + canaryWS + ")"}
		out := mustSucceed(t, s.invoke(t, "echo_argv", args))
		parts := strings.SplitN(out, "\x1e", 3)
		var stdin map[string]any
		if len(parts) != 3 || parts[0] != p || parts[1] != args["user-id"] || json.Unmarshal([]byte(parts[2]), &stdin) != nil ||
			stdin["text"] != p || stdin["user-id"] != args["user-id"] || !strings.HasSuffix(parts[2], "}\n") {
			t.Errorf("echo_argv(%q) = %q", p, out)
		}
		if out := mustSucceed(t, s.invoke(t, "echo_shell", map[string]any{"text": p})); out != p {
			t.Errorf("echo_shell(%q) = %q", p, out)
		}
	}
	for _, tool := range []string{"echo_argv", "echo_shell"} {
		mustFail(t, s.invoke(t, tool, `{"text":"a\u0000; touch `+canaryWS+`"}`), "invalid_arguments", "NUL")
	}
	if _, err := os.Stat(canaryWS); err == nil {
		t.Fatalf("an argument reached a shell: %s exists", canaryWS)
	}
}

// TestCustomToolsReload changes the file and sends the reload signal: a
// tool added and one changed show in every door; a call in flight
// finishes on the old definition; a broken file keeps the old set, says
// why in the log and in /readyz.
func TestCustomToolsReload(t *testing.T) {
	const v1 = `
tools:
  - name: greet
    description: Say hello (version one).
    shell: 'touch started; while [ ! -e go ]; do sleep 0.05; done; echo old'
`
	const v2 = `
tools:
  - name: greet
    description: Say hello (version two).
    shell: 'echo new'
  - name: added
    description: A tool added by a reload.
    parameters: {type: object, properties: {n: {type: integer}}, required: [n]}
    shell: 'echo "n=$TOOL_ARG_N"'
`
	file := writeToolsFile(t, v1)
	s := startServer(t, map[string]string{"TOOLS_FILE": file})

	// A call of the old greet, held until the file "go" exists.
	inFlight := make(chan registry.Result, 1)
	go func() { inFlight <- s.invoke(t, "greet", "{}") }()
	waitFile(t, filepath.Join(s.Workspace, "started"))

	if err := os.WriteFile(file, []byte(v2), 0o600); err != nil {
		t.Fatal(err)
	}
	s.reload <- struct{}{}
	waitLog(t, s, `"message":"tools file reloaded"`, 1)

	if out := mustSucceed(t, s.invoke(t, "greet", "{}")); out != "new\n" {
		t.Errorf("greet after the reload = %q", out)
	}
	if err := os.WriteFile(filepath.Join(s.Workspace, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if out := mustSucceed(t, <-inFlight); out != "old\n" {
		t.Errorf("the call in flight = %q, want the old definition's output", out)
	}
	if out := mustSucceed(t, s.invoke(t, "added", map[string]any{"n": 7})); out != "n=7\n" {
		t.Errorf("added = %q", out)
	}
	mustFail(t, s.invoke(t, "added", map[string]any{}), "invalid_arguments", "n")
	checkListed := func(want, gone string) {
		t.Helper()
		for _, f := range toolfmt.Formats() {
			_, body := s.do(t, "GET", "/tools?format="+f, nil, nil)
			if !bytes.Contains(body, []byte(want)) || (gone != "" && bytes.Contains(body, []byte(gone))) {
				t.Errorf("GET /tools?format=%s: want %q, not %q: %.300s", f, want, gone, body)
			}
		}
		_, body := s.do(t, "GET", "/openapi.json", nil, nil)
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("/openapi.json lacks %q", want)
		}
		names, _ := mcpCall(t, s, "greet", nil)
		if !names["added"] {
			t.Errorf("MCP tools/list = %v", names)
		}
	}
	checkListed("version two", "version one")

	// A broken file: the old set stays.
	if err := os.WriteFile(file, []byte(strings.Replace(v2, "shell: 'echo new'", "shel: 'echo typo'", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	s.reload <- struct{}{}
	waitLog(t, s, `"message":"tools file reload failed; the tools of the last good load are kept"`, 1)
	assertContains(t, "log", s.Logs(), `unknown key \"shel\"`, `tool \"greet\" (entry 1`)
	if out := mustSucceed(t, s.invoke(t, "greet", "{}")); out != "new\n" {
		t.Errorf("greet after a failed reload = %q", out)
	}
	checkListed("version two", "")
	_, ready := s.do(t, "GET", "/readyz", nil, nil)
	assertContains(t, "/readyz", string(ready), `"status":"ready"`, "reload failed, the tools of the last good load are served")

	// A clash with a built-in tool on reload: also kept.
	if err := os.WriteFile(file, []byte("tools:\n  - name: read_file\n    description: x\n    shell: 'true'\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s.reload <- struct{}{}
	waitLog(t, s, `"message":"tools file reload failed; the tools of the last good load are kept"`, 2)
	assertContains(t, "log", s.Logs(), `clashes with the built-in tool \"read_file\"`)
	mustSucceed(t, s.invoke(t, "added", map[string]any{"n": 1}))

	// Fixed again: the ready check is back to ok.
	if err := os.WriteFile(file, []byte(v2), 0o600); err != nil {
		t.Fatal(err)
	}
	s.reload <- struct{}{}
	waitLog(t, s, `"message":"tools file reloaded"`, 2)
	_, ready = s.do(t, "GET", "/readyz", nil, nil)
	assertContains(t, "/readyz", string(ready), `"tools_file":"ok"`)
}

// waitFile waits for a file a tool creates.
func waitFile(t *testing.T, p string) {
	t.Helper()
	waitFor(t, "file "+p, func() bool { _, err := os.Stat(p); return err == nil })
}

// waitLog waits until the log holds line at least n times.
func waitLog(t *testing.T, s *testServer, line string, n int) {
	t.Helper()
	waitFor(t, "log line "+line, func() bool { return strings.Count(s.Logs(), line) >= n })
}

// TestCustomToolsFileErrorsStopStartup: each mistake in the file is a
// start-up error naming the file and the entry.
func TestCustomToolsFileErrorsStopStartup(t *testing.T) {
	const okSchema = "    parameters: {type: object, properties: {a: {type: string}}}\n"
	for _, tc := range []struct {
		name, file string
		wants      []string
	}{
		{"typo in a key", "tools:\n  - name: a\n    description: x\n    comand: [ls]\n", []string{`tool "a" (entry 1, line 2)`, `unknown key "comand"`}},
		{"no runner", "tools:\n  - name: a\n    description: x\n" + okSchema, []string{`tool "a"`, "no runner"}},
		{"two runners", "tools:\n  - name: a\n    description: x\n    shell: ls\n    command: [ls]\n", []string{"more than one runner (command, shell)"}},
		{"command not a list", "tools:\n  - name: a\n    description: x\n    command: ls -l\n", []string{"command must be a list"}},
		{"no description", "tools:\n  - name: a\n    shell: ls\n", []string{"description is missing"}},
		{"no name", "tools:\n  - description: x\n    shell: ls\n", []string{"tools entry 1", "name is missing"}},
		{"bad name", "tools:\n  - name: my tool\n    description: x\n    shell: ls\n", []string{`tool "my tool"`, "name must match"}},
		{"invalid schema", "tools:\n  - name: a\n    description: x\n    shell: ls\n    parameters: {type: object, properties: {n: {type: integr}}}\n", []string{"not a valid JSON Schema"}},
		{"schema not an object", "tools:\n  - name: a\n    description: x\n    shell: ls\n    parameters: {type: string}\n", []string{`must have "type": "object"`}},
		{"two args, one variable", "tools:\n  - name: a\n    description: x\n    shell: ls\n    parameters: {type: object, properties: {user-id: {type: string}, user_id: {type: string}}}\n", []string{"TOOL_ARG_USER_ID"}},
		{"duplicate", "tools:\n  - name: a\n    description: x\n    shell: ls\n  - name: a\n    description: y\n    shell: ls\n", []string{`tool "a" (entry 1`, `tool "a" (entry 2`, "same name"}},
		{"clash with a built-in", "tools:\n  - name: exec\n    description: x\n    shell: ls\n", []string{`tool "exec" (entry 1`, `clashes with the built-in tool "exec"`}},
		{"toolset clash", "tools:\n  - name: a\n    description: x\n    shell: ls\n    toolset: files\n", []string{`toolset "files" clashes with the built-in toolset`}},
		{"unknown http key", "tools:\n  - name: a\n    description: x\n    http: {url: 'https://example.com', method: GET}\n", []string{`http: unknown key "method"`}},
		{"variable not set", "tools:\n  - name: a\n    description: x\n    http: {url: 'https://example.com', headers: {Authorization: 'Bearer ${TOOLS_TEST_NOT_SET_TOKEN}'}}\n", []string{"TOOLS_TEST_NOT_SET_TOKEN, which is not set"}},
		{"not YAML", "tools: [\n", []string{"not valid YAML or JSON"}},
		{"unknown top key", "tool:\n  - name: a\n", []string{`unknown key "tool" at the top`}},
		{"mcp server key typo", `{"mcpServers": {"memory": {"comand": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]}}}`, []string{`mcpServers "memory"`, `unknown key "comand"`}},
		{"mcp server sse", `{"mcpServers": {"old": {"type": "sse", "url": "http://127.0.0.1:1/sse"}}}`, []string{`mcpServers "old"`, `type "sse"`}},
		{"mcp server variable not set", `{"mcpServers": {"remote": {"type": "http", "url": "http://127.0.0.1:1/mcp", "headers": {"Authorization": "Bearer ${TOOLS_TEST_NOT_SET_TOKEN}"}}}}`, []string{`mcpServers "remote"`, "TOOLS_TEST_NOT_SET_TOKEN is not set"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeToolsFile(t, tc.file)
			t.Parallel()
			err := startError(t, map[string]string{"TOOLS_FILE": path})
			if err == nil {
				t.Fatal("the service started")
			}
			assertContains(t, "error", err.Error(), append([]string{"tools file " + path}, tc.wants...)...)
		})
	}
}

// TestCustomToolsSwitches: the switches take the file's tools and
// toolsets like built-in ones.
func TestCustomToolsSwitches(t *testing.T) {
	file := writeToolsFile(t, `
tools:
  - {name: one, description: x, shell: 'echo 1', toolset: numbers}
  - {name: two, description: x, shell: 'echo 2', toolset: numbers}
  - {name: three, description: x, shell: 'echo 3'}
`)
	for _, tc := range []struct {
		env     map[string]string
		on, off []string
	}{
		{map[string]string{"TOOLS_DISABLED": "numbers"}, []string{"three", "exec"}, []string{"one", "two"}},
		{map[string]string{"TOOLS_DISABLED": "three,one"}, []string{"two"}, []string{"one", "three"}},
		{map[string]string{"TOOLS_ENABLED": "custom"}, []string{"three"}, []string{"one", "two", "exec", "read_file"}},
		{map[string]string{"TOOLS_ENABLED": "one,files"}, []string{"one", "read_file"}, []string{"two", "three", "exec"}},
	} {
		env := map[string]string{"TOOLS_FILE": file}
		for k, v := range tc.env {
			env[k] = v
		}
		s := startServer(t, env)
		_, body := s.do(t, "GET", "/tools", nil, nil)
		_, ready := s.do(t, "GET", "/readyz", nil, nil)
		for _, n := range tc.on {
			if !bytes.Contains(body, []byte(`"name":"`+n+`"`)) {
				t.Errorf("%v: %s is not listed", tc.env, n)
			}
		}
		for _, n := range tc.off {
			if bytes.Contains(body, []byte(`"name":"`+n+`"`)) {
				t.Errorf("%v: %s is listed", tc.env, n)
			}
			if resp, b := s.do(t, "POST", "/tools/"+n+"/invoke", strings.NewReader("{}"), nil); resp.StatusCode != http.StatusNotFound {
				t.Errorf("%v: calling %s: %d %s", tc.env, n, resp.StatusCode, b)
			}
		}
		if strings.Contains(tc.env["TOOLS_DISABLED"], "one") && !bytes.Contains(ready, []byte(`"tool:one":"off: switched off by TOOLSVC_TOOLS_DISABLED"`)) {
			t.Errorf("/readyz: %s", ready)
		}
		s.Stop(t)
	}
	// A switch naming a tool the file does not have stops start-up, with
	// the nearest name.
	err := startError(t, map[string]string{"TOOLS_FILE": file, "TOOLS_DISABLED": "numbrs"})
	if err == nil || !strings.Contains(err.Error(), `did you mean "numbers"?`) {
		t.Errorf("run() = %v", err)
	}
}

// TestCustomCommandBounds: a command tool's output, time and network are
// exec's, under each sandbox the machine offers: 100 MB of output comes
// back cut to max_output, a program past its timeout is stopped, and the
// network is off unless the tool says network: true. Arguments a program
// never reads do not hold it up.
func TestCustomCommandBounds(t *testing.T) {
	hits := atomic.Int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	file := writeToolsFile(t, `
tools:
  - {name: flood, description: d, shell: "head -c 100000000 /dev/zero | tr '\\000' a", max_output: 1000}
  - {name: slow, description: d, shell: "echo begun; sleep 120", timeout: 1s}
  - {name: deaf, description: d, shell: 'echo "${TOOL_ARG_TEXT:-no variable}"', parameters: {type: object, properties: {text: {type: string}}}}
  - name: fetch_off
    description: d
    parameters: {type: object, properties: {url: {type: string}}, required: [url]}
    shell: 'curl -sS -o /dev/null -w "%{http_code}" --max-time 20 "$TOOL_ARG_URL"'
  - name: fetch_on
    description: d
    parameters: {type: object, properties: {url: {type: string}}, required: [url]}
    shell: 'curl -sS -o /dev/null -w "%{http_code}" --max-time 20 "$TOOL_ARG_URL"'
    network: true
`)
	for _, mode := range sandboxModes(t) {
		t.Run(mode, func(t *testing.T) {
			s := startServer(t, map[string]string{"TOOLS_FILE": file, "EXEC_SANDBOX": mode})
			out := mustSucceed(t, s.invoke(t, "flood", "{}"))
			if len(out) > 1500 || !strings.Contains(out, "bytes of stdout cut here (100000000 bytes in all)") {
				t.Errorf("flood: %d characters: %.300s", len(out), out)
			}
			mustFail(t, s.invoke(t, "slow", "{}"), "timeout", "timed out after 1s", "begun")
			// 2 MB of arguments to a program that never reads stdin: too
			// long for a variable (left out), and no hang on the pipe.
			if out := mustSucceed(t, s.invoke(t, "deaf", map[string]any{"text": strings.Repeat("x", 2<<20)})); out != "no variable\n" {
				t.Errorf("deaf = %.100q", out)
			}
			if out := mustSucceed(t, s.invoke(t, "fetch_on", map[string]any{"url": srv.URL})); out != "200" {
				t.Errorf("fetch_on = %q", out)
			}
			before := hits.Load()
			mustFail(t, s.invoke(t, "fetch_off", map[string]any{"url": srv.URL}), "tool_error", "exit code")
			if hits.Load() != before {
				t.Errorf("fetch_off reached the server with the network off")
			}
		})
	}
}

// TestCustomToolsSubagents: a sub-agent is offered the file's tools that
// say subagents: true, and only those; a reload that sets it on another
// tool offers that one to the next sub-agent.
func TestCustomToolsSubagents(t *testing.T) {
	llm := agenttest.New(t,
		agenttest.Reply(agenttest.Call("c1", "shared", `{}`)),
		agenttest.Reply(agenttest.Final("first done")),
		agenttest.Reply(agenttest.Final("second done")),
	)
	const tmpl = `
tools:
  - {name: shared, description: d, shell: "echo shared", subagents: true}
  - {name: private, description: d, shell: "echo private", subagents: %s}
`
	file := writeToolsFile(t, strings.Replace(tmpl, "%s", "false", 1))
	s := startServer(t, llmEnv(llm.URL, map[string]string{"TOOLS_FILE": file}))
	out := mustSucceed(t, s.invoke(t, "spawn", map[string]any{"task": "use the shared tool", "wait": true}))
	assertContains(t, "spawn", out, "first done")
	if err := os.WriteFile(file, []byte(strings.Replace(tmpl, "%s", "true", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	s.reload <- struct{}{}
	waitLog(t, s, `"message":"tools file reloaded"`, 1)
	assertContains(t, "spawn", mustSucceed(t, s.invoke(t, "spawn", map[string]any{"task": "again", "wait": true})), "second done")

	reqs := llm.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests, want 3", len(reqs))
	}
	first, last := reqs[0].ToolNames(), reqs[2].ToolNames()
	if !slices.Contains(first, "shared") || slices.Contains(first, "private") || !slices.Contains(first, "read_file") {
		t.Errorf("the first sub-agent was offered %v", first)
	}
	if !slices.Contains(last, "shared") || !slices.Contains(last, "private") {
		t.Errorf("the sub-agent after the reload was offered %v", last)
	}
	if !strings.Contains(string(reqs[1].Body), "shared") {
		t.Errorf("the shared tool's result did not reach the model: %s", reqs[1].Body)
	}
}
