package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countbot/toolsvc/internal/audit"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/toolerr"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// TestToolsListing checks GET /tools against a golden file and that it is
// byte-for-byte the same between calls, and GET /tools/{name}.
func TestToolsListing(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	resp, first := s.do(t, "GET", "/tools", nil, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("GET /tools: %d %s", resp.StatusCode, first)
	}
	_, second := s.do(t, "GET", "/tools", nil, nil)
	if !bytes.Equal(first, second) {
		t.Fatal("GET /tools is not byte-stable between calls")
	}
	var defs []registry.Definition
	if err := json.Unmarshal(first, &defs); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range defs {
		names = append(names, d.Function.Name)
		if d.Type != "function" || d.Function.Description == "" || !json.Valid(d.Function.Parameters) {
			t.Errorf("bad definition %+v", d)
		}
	}
	for i := 1; i < len(names); i++ {
		if names[i-1] >= names[i] {
			t.Errorf("definitions not sorted by name: %v", names)
		}
	}
	for _, want := range []string{"edit_file", "list_dir", "read_file", "write_file"} {
		if !strings.Contains(","+strings.Join(names, ",")+",", ","+want+",") {
			t.Errorf("GET /tools lacks %s: %v", want, names)
		}
	}

	// The golden file pins the filesystem tools' definitions, which models
	// and prompt caches depend on.
	var fsDefs []json.RawMessage
	var raw []json.RawMessage
	_ = json.Unmarshal(first, &raw)
	for i, d := range defs {
		switch d.Function.Name {
		case "read_file", "write_file", "edit_file", "list_dir":
			fsDefs = append(fsDefs, raw[i])
		}
	}
	got, _ := json.MarshalIndent(fsDefs, "", "  ")
	golden := filepath.Join("testdata", "fs_tools.golden.json")
	if *update {
		os.MkdirAll("testdata", 0o755)
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./cmd/toolsvc -run TestToolsListing -update)", err)
	}
	if !bytes.Equal(bytes.TrimSpace(got), bytes.TrimSpace(want)) {
		t.Errorf("filesystem tool definitions changed; if intended, run with -update.\ngot:\n%s", got)
	}

	resp, one := s.do(t, "GET", "/tools/read_file", nil, nil)
	var def registry.Definition
	if resp.StatusCode != 200 || json.Unmarshal(one, &def) != nil || def.Function.Name != "read_file" {
		t.Errorf("GET /tools/read_file: %d %s", resp.StatusCode, one)
	}
	resp, body := s.do(t, "GET", "/tools/nope", nil, nil)
	if resp.StatusCode != 404 || !strings.Contains(string(body), "unknown_tool") {
		t.Errorf("GET /tools/nope: %d %s", resp.StatusCode, body)
	}
}

func TestHealthAndRoutes(t *testing.T) {
	t.Parallel()
	s := startServer(t, map[string]string{"API_KEYS": "k-0123456789abcdef"})
	for _, p := range []string{"/healthz", "/readyz"} {
		resp, body := s.do(t, "GET", p, nil, nil)
		if resp.StatusCode != 200 {
			t.Errorf("GET %s without a key: %d %s", p, resp.StatusCode, body)
		}
		if resp.Header.Get("X-Request-ID") == "" {
			t.Errorf("GET %s: no X-Request-ID", p)
		}
	}
	s.Key = "k-0123456789abcdef"
	resp, body := s.do(t, "POST", "/tools/nope/invoke", strings.NewReader(`{}`), nil)
	if resp.StatusCode != 404 || !strings.Contains(string(body), `"unknown_tool"`) || !strings.Contains(string(body), "Tool 'nope' not found") {
		t.Errorf("unknown tool: %d %s", resp.StatusCode, body)
	}
	resp, body = s.do(t, "GET", "/tools/read_file/invoke", nil, nil)
	if resp.StatusCode != 405 {
		t.Errorf("GET on invoke: %d %s", resp.StatusCode, body)
	}
	resp, body = s.do(t, "GET", "/nowhere", nil, nil)
	if resp.StatusCode != 404 || !strings.Contains(string(body), `"not_found"`) {
		t.Errorf("unknown route: %d %s", resp.StatusCode, body)
	}
	resp, _ = s.do(t, "GET", "/healthz", nil, map[string]string{"X-Request-ID": "my-req-1"})
	if got := resp.Header.Get("X-Request-ID"); got != "my-req-1" {
		t.Errorf("X-Request-ID not echoed: %q", got)
	}
}

func TestAuth(t *testing.T) {
	t.Parallel()
	const key1, key2 = "first-key-0123456789", "second-key-0123456789"
	t.Run("off", func(t *testing.T) {
		t.Parallel()
		s := startServer(t, nil)
		resp, _ := s.do(t, "GET", "/tools", nil, nil)
		if resp.StatusCode != 200 {
			t.Errorf("no keys configured: GET /tools = %d", resp.StatusCode)
		}
	})
	t.Run("on", func(t *testing.T) {
		t.Parallel()
		s := startServer(t, map[string]string{"API_KEYS": key1 + "," + key2})
		cases := []struct {
			name, header string
			want         int
		}{
			{"missing", "", 401},
			{"wrong", "Bearer wrong-key-0123456789", 401},
			{"prefix of a key", "Bearer " + key1[:10], 401},
			{"key with suffix", "Bearer " + key1 + "x", 401},
			{"basic scheme", "Basic " + key1, 401},
			{"first key", "Bearer " + key1, 200},
			{"second key", "Bearer " + key2, 200},
			{"lower-case scheme", "bearer " + key2, 200},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				h := map[string]string{}
				if c.header != "" {
					h["Authorization"] = c.header
				}
				for _, route := range []struct{ method, path string }{{"GET", "/tools"}, {"GET", "/tools/read_file"}, {"POST", "/tools/list_dir/invoke"}} {
					resp, body := s.do(t, route.method, route.path, strings.NewReader("{}"), h)
					if resp.StatusCode != c.want {
						t.Errorf("%s %s: %d, want %d: %s", route.method, route.path, resp.StatusCode, c.want, body)
					}
					if c.want == 401 && !strings.Contains(string(body), `"unauthorized"`) {
						t.Errorf("401 body: %s", body)
					}
				}
			})
		}
		if strings.Contains(s.Logs(), key1) || strings.Contains(s.Logs(), key2) {
			t.Error("an API key appears in the service log")
		}
	})
}

func TestBodyTooLarge(t *testing.T) {
	t.Parallel()
	s := startServer(t, map[string]string{"MAX_BODY_BYTES": "1024"})
	big := `{"path":"a.txt","content":"` + strings.Repeat("x", 2000) + `"}`
	resp, body := s.do(t, "POST", "/tools/write_file/invoke", strings.NewReader(big), nil)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), "body_too_large") {
		t.Fatalf("got %d %s", resp.StatusCode, body)
	}
	if _, err := os.Stat(filepath.Join(s.Workspace, "a.txt")); err == nil {
		t.Error("the file was written despite the 413")
	}
	res := s.invoke(t, "write_file", `{"path":"a.txt","content":"small"}`)
	mustSucceed(t, res)
}

func TestMalformedArguments(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	cases := []struct {
		tool, body string
		code       string
		wants      []string
	}{
		{"read_file", `{"path": "a.txt"`, toolerr.MalformedArguments, []string{"truncated or malformed", "regenerate the tool call"}},
		{"write_file", `{"path": "a.txt", "content": "long text cut off here`, toolerr.MalformedArguments, []string{"truncated or malformed", "mode=\"append\""}},
		{"edit_file", `{"path": "a.txt", "old_str": 'x'}`, toolerr.MalformedArguments, []string{"malformed", "regenerate"}},
		{"list_dir", `[1, 2]`, toolerr.InvalidArguments, []string{"must be a JSON object"}},
		{"list_dir", `"just a string"`, toolerr.InvalidArguments, []string{"must be a JSON object"}},
	}
	for _, c := range cases {
		t.Run(c.tool+" "+c.body, func(t *testing.T) {
			mustFail(t, s.invoke(t, c.tool, c.body), c.code, c.wants...)
		})
	}
	// An empty body means {}.
	mustSucceed(t, s.invoke(t, "list_dir", ""))
}

// TestValidationRules tries each schema rule the real tools use, through
// the real server. The registry's own tests cover number and nested-object
// rules with a schema built for that.
func TestValidationRules(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	cases := []struct {
		name, tool string
		args       string
		wants      []string
	}{
		{"string type", "read_file", `{"path": 5}`, []string{"path should be string, not integer"}},
		{"string minLength", "read_file", `{"path": ""}`, []string{"path must be at least 1 characters long"}},
		{"string maxLength", "read_file", `{"path": "` + strings.Repeat("a", 4097) + `"}`, []string{"path must be at most 4096 characters long"}},
		{"integer type", "read_file", `{"path": "a", "start_line": "3"}`, []string{"start_line should be integer, not string"}},
		{"integer not fraction", "read_file", `{"path": "a", "start_line": 1.5}`, []string{"start_line should be integer, not number"}},
		{"integer minimum", "read_file", `{"path": "a", "start_line": 0}`, []string{"start_line must be >= 1"}},
		{"boolean", "list_dir", `{"recursive": "yes"}`, []string{"recursive should be boolean, not string"}},
		{"array type", "read_file", `{"paths": "a.txt"}`, []string{"paths should be array, not string"}},
		{"array items", "read_file", `{"paths": ["a.txt", 7]}`, []string{"paths[1] should be string, not integer"}},
		{"array maxItems", "read_file", `{"paths": [` + strings.TrimSuffix(strings.Repeat(`"a",`, 21), ",") + `]}`, []string{"paths must have at most 20 items"}},
		{"enum", "write_file", `{"path": "a", "content": "x", "mode": "prepend"}`, []string{"mode must be one of [\"overwrite\", \"append\"]"}},
		{"required", "edit_file", `{"path": "a"}`, []string{"missing required old_str", "missing required new_str"}},
		{"unknown parameter", "list_dir", `{"path": ".", "depth": 3}`, []string{"unknown parameter depth"}},
		{"several problems", "read_file", `{"start_line": 0, "end_line": "x", "path": 1}`, []string{"start_line must be >= 1", "end_line should be integer", "path should be string", "; "}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := s.invoke(t, c.tool, c.args)
			mustFail(t, res, toolerr.InvalidArguments, append([]string{"Invalid parameters for tool '" + c.tool + "': "}, c.wants...)...)
		})
	}
}

// readAudit returns the audit record of a call, failing if it is missing.
func readAudit(t *testing.T, s *testServer, callID string) audit.Record {
	t.Helper()
	matches, _ := filepath.Glob(filepath.Join(s.DataDir, "audit_logs", "*", "*_"+callID+".json"))
	if len(matches) != 1 {
		t.Fatalf("want one audit file for %s, found %v", callID, matches)
	}
	data, err := os.ReadFile(matches[0])
	if err != nil {
		t.Fatal(err)
	}
	var rec audit.Record
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatalf("audit file %s: %v: %s", matches[0], err, data)
	}
	return rec
}

func TestAuditFiles(t *testing.T) {
	t.Parallel()
	const secret = "sk-live-0123456789abcdef"
	s := startServer(t, map[string]string{"API_KEYS": secret, "AUDIT_MAX_RESULT_CHARS": "50"})
	s.Key = secret
	s.writeWS(t, "notes.txt", strings.Repeat("a line of text\n", 20))

	ok := s.invoke(t, "read_file", `{"path":"notes.txt"}`, "X-Session-ID", "sess-42")
	mustSucceed(t, ok)
	rec := readAudit(t, s, ok.CallID)
	if rec.Status != "success" || rec.ToolName != "read_file" || rec.SessionID != "sess-42" || rec.CallID != ok.CallID {
		t.Errorf("success record: %+v", rec)
	}
	if !rec.ResultTruncated || len([]rune(rec.Result)) != 50 || rec.ResultLength != len([]rune(ok.Result)) {
		t.Errorf("result not cut to 50 chars with the full length: truncated=%v len=%d full=%d", rec.ResultTruncated, len(rec.Result), rec.ResultLength)
	}
	if args, _ := json.Marshal(rec.Arguments); string(args) != `{"path":"notes.txt"}` {
		t.Errorf("arguments: %s", args)
	}
	if rec.Timestamp.IsZero() || rec.Timestamp.Location().String() != "UTC" {
		t.Errorf("timestamp: %v", rec.Timestamp)
	}
	name := filepath.Base(audit.FileName(rec))
	if !strings.HasSuffix(name, "_"+ok.CallID+".json") || !strings.HasPrefix(filepath.Dir(audit.FileName(rec)), rec.Timestamp.Format("2006-01-02")) {
		t.Errorf("file name %s", audit.FileName(rec))
	}

	bad := s.invoke(t, "read_file", `{"path":"missing.txt"}`)
	mustFail(t, bad, toolerr.NotFound)
	rec = readAudit(t, s, bad.CallID)
	if rec.Status != "error" || rec.ErrorCode != toolerr.NotFound || !strings.HasPrefix(rec.Result, "Error:") {
		t.Errorf("error record: %+v", rec)
	}

	// A secret the model happens to send never reaches the audit log.
	leak := s.invoke(t, "write_file", map[string]any{"path": "k.txt", "content": "key=" + secret})
	mustSucceed(t, leak)
	raw, _ := os.ReadFile(filepath.Join(s.DataDir, "audit_logs", rec.Timestamp.Format("2006-01-02"), filepath.Base(audit.FileName(readAudit(t, s, leak.CallID)))))
	if strings.Contains(string(raw), secret) || !strings.Contains(string(raw), "[REDACTED]") {
		t.Errorf("audit record keeps the secret: %s", raw)
	}
	// Malformed arguments are recorded as the text received.
	mal := s.invoke(t, "read_file", `{"path": "x`)
	if a, ok := readAudit(t, s, mal.CallID).Arguments.(string); !ok || a != `{"path": "x` {
		t.Errorf("malformed arguments recorded as %#v", readAudit(t, s, mal.CallID).Arguments)
	}
}

func TestAuditDisabled(t *testing.T) {
	t.Parallel()
	s := startServer(t, map[string]string{"AUDIT_ENABLED": "false"})
	mustSucceed(t, s.invoke(t, "list_dir", `{}`))
	if _, err := os.Stat(filepath.Join(s.DataDir, "audit_logs")); !os.IsNotExist(err) {
		t.Errorf("audit_logs exists with auditing off: %v", err)
	}
}

func TestAuditRetentionAppliedAtStart(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	data := filepath.Join(base, "data")
	old := filepath.Join(data, "audit_logs", "2000-01-01")
	if err := os.MkdirAll(old, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(old, "x.json"), []byte("{}"), 0o644)
	s := startServer(t, map[string]string{"DATA_DIR": data, "AUDIT_RETENTION_DAYS": "30"})
	mustSucceed(t, s.invoke(t, "list_dir", `{}`))
	s.Stop(t)
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("a day folder past retention survived: %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"AUDIT_RETENTION_DAYS": "many"}, "TOOLSVC_AUDIT_RETENTION_DAYS"},
		{map[string]string{"ADDR": "0.0.0.0:0"}, "TOOLSVC_API_KEYS"},
		{map[string]string{"ADDR": "nonsense"}, "TOOLSVC_ADDR"},
		{map[string]string{"LOG_LEVEL": "loud"}, "TOOLSVC_LOG_LEVEL"},
		{map[string]string{"CALL_TIMEOUT": "soon"}, "TOOLSVC_CALL_TIMEOUT"},
		{map[string]string{"RESTRICT_TO_WORKSPACE": "maybe"}, "TOOLSVC_RESTRICT_TO_WORKSPACE"},
		{map[string]string{"API_KEYS": "short"}, "TOOLSVC_API_KEYS"},
		{map[string]string{"API_KEYS": "a=first-key-0123456789,a=second-key-0123456789"}, `TOOLSVC_API_KEYS is not a valid list of keys: the key name "a" is given twice`},
		{map[string]string{"API_KEYS": "a=first-key-0123456789", "ADMIN_KEYS": "b=first-key-0123456789"}, `TOOLSVC_ADMIN_KEYS: the keys named "a" and "b" are the same key`},
		{map[string]string{"ADMIN_KEYS": "bad name=first-key-0123456789"}, "TOOLSVC_ADMIN_KEYS"},
		{map[string]string{"EXEC_ENV_ALLOW": "MYAPP_*,*"}, "TOOLSVC_EXEC_ENV_ALLOW"},
	}
	for _, c := range cases {
		t.Run(c.want, func(t *testing.T) {
			t.Parallel()
			err := startError(t, c.env)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("run() = %v, want an error naming %s", err, c.want)
			}
		})
	}
	t.Run("insecure allowed explicitly", func(t *testing.T) {
		t.Parallel()
		// Starts, then stops at once.
		if err := startError(t, map[string]string{"ADDR": "0.0.0.0:0", "ALLOW_INSECURE": "true"}); err != nil {
			t.Errorf("run() = %v", err)
		}
	})
}

func TestHelpListsEveryVariable(t *testing.T) {
	t.Parallel()
	var out, stderr bytes.Buffer
	err := run(t.Context(), []string{"-h"}, nil, &out, &stderr)
	if err == nil || !strings.Contains(err.Error(), "help requested") {
		t.Fatalf("run -h = %v", err)
	}
	if stderr.Len() != 0 {
		t.Errorf("-h wrote to stderr, not only to stdout: %s", stderr.String())
	}
	for _, v := range []string{"TOOLSVC_ADDR", "127.0.0.1:8080", "TOOLSVC_WORKSPACE", "./workspace", "TOOLSVC_DATA_DIR", "TOOLSVC_API_KEYS", "TOOLSVC_LOG_LEVEL"} {
		if !strings.Contains(out.String(), v) {
			t.Errorf("-h lacks %s:\n%s", v, out.String())
		}
	}
	// The rest are in toolsvc help all, and in their group's help.
	var all bytes.Buffer
	if err := run(t.Context(), []string{"help", "all"}, nil, &all, &stderr); err != nil || stderr.Len() != 0 {
		t.Fatalf("help all: %v %s", err, stderr.String())
	}
	for _, v := range []string{"TOOLSVC_RESTRICT_TO_WORKSPACE (default true)", "TOOLSVC_AUDIT_ENABLED", "TOOLSVC_AUDIT_RETENTION_DAYS", "TOOLSVC_ALLOW_INSECURE", "TOOLSVC_READ_MAX_CHARS"} {
		if !strings.Contains(all.String(), v) {
			t.Errorf("help all lacks %s", v)
		}
	}
}
