package customtools

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/netguard"
	"github.com/countbot/toolsvc/internal/toolerr"
)

func TestEnvName(t *testing.T) {
	for in, want := range map[string]string{
		"path": "TOOL_ARG_PATH", "user-id": "TOOL_ARG_USER_ID", "a.b c": "TOOL_ARG_A_B_C",
		"2fa": "TOOL_ARG_2FA", "café": "TOOL_ARG_CAF_", "x=y": "TOOL_ARG_X_Y",
	} {
		if got := EnvName(in); got != want {
			t.Errorf("EnvName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestArgEnv(t *testing.T) {
	big := strings.Repeat("x", MaxEnvValue+1)
	env, err := argEnv(json.RawMessage(`{"s":"a b; $(c)","n":5,"o":{"k":[1,"two"]},"b":true,"nil":null,"big":"` + big + `","a-b":"first","a_b":"second"}`))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(env, "\n")
	want := strings.Join([]string{"TOOL_ARG_A_B=first", "TOOL_ARG_B=true", "TOOL_ARG_N=5", "TOOL_ARG_NIL=null", `TOOL_ARG_O={"k":[1,"two"]}`, "TOOL_ARG_S=a b; $(c)"}, "\n")
	if got != want {
		t.Errorf("env =\n%s\nwant\n%s", got, want)
	}
	_, err = argEnv(json.RawMessage(`{"s":"a\u0000b"}`))
	var te *toolerr.Error
	if !errors.As(err, &te) || te.Code != toolerr.InvalidArguments || !strings.Contains(te.Message, `argument "s" holds a NUL`) {
		t.Errorf("NUL: %v", err)
	}
}

// TestParseJSON: a JSON file works as well as YAML, mcpServers alone is
// valid and is kept as JSON for the mounting package.
func TestParseJSON(t *testing.T) {
	f, err := Parse("t.json", []byte(`{
  "mcpServers": {"memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"], "network": false},
                 "remote": {"type": "streamable-http", "url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ${X}"}}}
}`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Tools) != 0 || len(f.MCPServers) != 2 {
		t.Fatalf("parsed %+v", f)
	}
	var m struct {
		Command string
		Args    []string
		Network *bool
	}
	if err := json.Unmarshal(f.MCPServers["memory"], &m); err != nil || m.Command != "npx" || len(m.Args) != 2 || m.Network == nil {
		t.Errorf("memory = %s (%v)", f.MCPServers["memory"], err)
	}
	if _, err := Parse("t.json", []byte(`{"mcpServers": {"a__b": {"command": "x"}}}`), Options{}); err == nil {
		t.Errorf("a server name with __ was accepted")
	}

	f, err = Parse("t.json", []byte(`{"tools":[{"name":"t","description":"d","shell":"true","timeout":5,"max_output":100}]}`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := f.Tools[0]
	if s.Timeout != 5*time.Second || s.MaxOutput != 100 || s.Toolset != DefaultToolset || s.Runner() != "command" || string(s.Parameters) != `{"type":"object","properties":{},"additionalProperties":false}` {
		t.Errorf("spec = %+v", s)
	}
}

func TestParseHeaders(t *testing.T) {
	env := map[string]string{"TOKEN": "tok-123456789"}
	getenv := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	f, err := Parse("t.yaml", []byte(`
tools:
  - name: t
    description: d
    http:
      url: http://127.0.0.1:1/x
      headers: {Authorization: "Bearer ${TOKEN}", X-Plain: "v"}
`), Options{Getenv: getenv})
	if err != nil {
		t.Fatal(err)
	}
	h := f.Tools[0].HTTP
	if h.Headers["Authorization"] != "Bearer tok-123456789" || h.Headers["X-Plain"] != "v" || len(h.Secrets) != 1 || h.Secrets[0] != "tok-123456789" {
		t.Errorf("http = %+v", h)
	}
	for _, bad := range []string{
		`{url: "ftp://x/y"}`, `{url: "https://u:p@x/y"}`, `{url: "/relative"}`,
		`{url: "https://x", headers: {"Bad Name": "v"}}`, `{url: "https://x", headers: {A: "${MISSING}"}}`,
	} {
		if _, err := Parse("t.yaml", []byte("tools:\n  - {name: t, description: d, http: "+bad+"}\n"), Options{Getenv: getenv}); err == nil {
			t.Errorf("accepted http %s", bad)
		}
	}
}

// loopbackHTTP builds an http tool for url that may reach loopback.
func loopbackHTTP(t *testing.T, url string, maxOutput int) *HTTP {
	t.Helper()
	f, err := Parse("t.yaml", []byte("tools:\n  - {name: t, description: d, http: {url: '"+url+"', allow_private: true}, timeout: 10s}\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	g, _ := netguard.New(netguard.Options{})
	h, err := NewHTTP(f.Tools[0], HTTPDeps{Guard: g, DefaultMaxOutput: maxOutput, GuardAllowing: func(host string) (*netguard.Guard, error) {
		return netguard.New(AllowHost(netguard.Options{}, host))
	}})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestHTTPBounds: a huge answer is read only as far as the bound and
// marked cut; a redirect to another host is not followed; the guard
// refuses loopback without allow_private.
func TestHTTPBounds(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/huge":
			// 100 MB, written until the client stops reading.
			chunk := strings.Repeat("a", 1<<16)
			for i := 0; i < 1600; i++ {
				if _, err := io.WriteString(w, chunk); err != nil {
					return
				}
			}
		case "/away":
			http.Redirect(w, r, "http://localhost:1/elsewhere", http.StatusTemporaryRedirect)
		case "/here":
			http.Redirect(w, r, "/ok", http.StatusTemporaryRedirect)
		case "/ok":
			b, _ := io.ReadAll(r.Body)
			_, _ = w.Write(b)
		}
	}))
	defer srv.Close()
	ctx := context.Background()

	out, err := loopbackHTTP(t, srv.URL+"/huge", 1000).Execute(ctx, json.RawMessage(`{}`))
	if err != nil || !strings.HasPrefix(out, strings.Repeat("a", 1000)+"\n\n[... the answer was cut here") {
		t.Errorf("huge: %v %.80q", err, out)
	}
	if _, err := loopbackHTTP(t, srv.URL+"/away", 1000).Execute(ctx, json.RawMessage(`{}`)); err == nil || !strings.Contains(err.Error(), "another host") {
		t.Errorf("redirect away: %v", err)
	}
	if out, err := loopbackHTTP(t, srv.URL+"/here", 1000).Execute(ctx, json.RawMessage(`{"a":1}`)); err != nil || out != `{"a":1}` {
		t.Errorf("redirect on the same host: %q %v", out, err)
	}

	f, _ := Parse("t.yaml", []byte("tools:\n  - {name: t, description: d, http: {url: '"+srv.URL+"/ok'}}\n"), Options{})
	g, _ := netguard.New(netguard.Options{})
	h, err := NewHTTP(f.Tools[0], HTTPDeps{Guard: g, DefaultTimeout: 5 * time.Second, DefaultMaxOutput: 100})
	if err != nil {
		t.Fatal(err)
	}
	var te *toolerr.Error
	if _, err := h.Execute(ctx, json.RawMessage(`{}`)); !errors.As(err, &te) || te.Code != toolerr.PolicyDenied {
		t.Errorf("loopback without allow_private: %v", err)
	}
}

// TestParseHints: an entry's title and annotations reach its Spec; what
// it leaves out takes MCP's defaults, and an unknown hint is an error.
func TestParseHints(t *testing.T) {
	f, err := Parse("t.yaml", []byte(`tools:
  - name: weather
    description: The weather.
    title: Weather
    annotations: {readOnlyHint: true, idempotentHint: true, destructiveHint: false}
    shell: "echo sunny"
  - name: plain
    description: A plain tool.
    shell: "true"
`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	w, p := f.Tools[0].Hints, f.Tools[1].Hints
	if w.Title != "Weather" || !w.ReadOnly || !w.Idempotent || w.Destructive || !w.OpenWorld {
		t.Errorf("weather: %+v", w)
	}
	if p.Title != "plain" || p.ReadOnly || !p.Destructive || !p.OpenWorld || p.Idempotent {
		t.Errorf("plain: %+v", p)
	}
	_, err = Parse("t.yaml", []byte("tools:\n  - name: x\n    description: d.\n    shell: \"true\"\n    annotations: {readOnly: true}\n"), Options{})
	if err == nil || !strings.Contains(err.Error(), "readOnlyHint") {
		t.Errorf("unknown hint: %v", err)
	}
}
