package app

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReadyzReasonsRedactedAndWithheld builds the service with a key and
// an MCP server that writes values of its environment to stderr and
// exits. /readyz, through the service's handler, says why the server is
// down to a caller on the loopback and to one with the key, with every
// secret value cut: one read from a variable, one under a secret-looking
// name, the service's own key. A caller from the network without the key
// gets "down" and nothing of the stderr. A value the file writes plainly
// under an ordinary name is no known secret: it reaches the first two
// callers only, which is why the network gets no reasons.
func TestReadyzReasonsRedactedAndWithheld(t *testing.T) {
	const (
		serviceKey = "svc-api-key-0123456789abcdef"
		fromVar    = "from-a-variable-0123456789"
		namedToken = "plain-token-value-0123"
		plainValue = "postgres://svc@db.internal:5432/tools"
	)
	t.Setenv("READYZ_TEST_MCP_SECRET", fromVar)
	file := filepath.Join(t.TempDir(), "tools.json")
	script := `echo "from_var=$FROM_VAR token=$SVC_TOKEN key=$SERVICE_KEY db=$DB_URL" >&2; exit 3`
	tools := map[string]any{"mcpServers": map[string]any{"broken": map[string]any{
		"command": "/bin/sh", "args": []string{"-c", script},
		"env": map[string]string{"FROM_VAR": "${READYZ_TEST_MCP_SECRET}", "SVC_TOKEN": namedToken, "SERVICE_KEY": serviceKey, "DB_URL": plainValue},
	}}}
	raw, _ := json.Marshal(tools)
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, map[string]string{"EXEC_SANDBOX": "none", "TOOLS_FILE": file, "API_KEYS": "agent=" + serviceKey, "TOOLS_ENABLED": "files"})
	a, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	srv := httptest.NewServer(a.Handler()) // on 127.0.0.1: the loopback
	defer srv.Close()

	// get asks /readyz: over a real connection from the loopback when
	// remote is "", else through the same handler as if from remote (the
	// peer net/http sets from the connection).
	get := func(remote, key string) (int, map[string]string, string) {
		t.Helper()
		var code int
		var body []byte
		if remote == "" {
			req, _ := http.NewRequest(http.MethodGet, srv.URL+"/readyz", nil)
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			code = resp.StatusCode
		} else {
			req := httptest.NewRequest(http.MethodGet, "http://toolsvc.internal/readyz", nil)
			req.RemoteAddr = remote
			if key != "" {
				req.Header.Set("Authorization", "Bearer "+key)
			}
			rec := httptest.NewRecorder()
			a.Handler().ServeHTTP(rec, req)
			code, body = rec.Code, rec.Body.Bytes()
		}
		var b struct{ Checks map[string]string }
		if err := json.Unmarshal(body, &b); err != nil {
			t.Fatalf("%d %s: %v", code, body, err)
		}
		return code, b.Checks, string(body)
	}

	// The server's first start has failed once New returns; its reason
	// names the exit once the process is reaped.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, checks, _ := get("", "")
		if strings.Contains(checks["mcp:broken"], "exit status 3") || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, tc := range []struct {
		name, remote, key string
	}{
		{"loopback", "", ""},
		{"network with the key", "192.0.2.7:40000", serviceKey},
	} {
		code, checks, body := get(tc.remote, tc.key)
		why := checks["mcp:broken"]
		if code != http.StatusOK || !strings.HasPrefix(why, "down, restarting in the background: ") ||
			!strings.Contains(why, "exit status 3") || !strings.Contains(why, "from_var=[REDACTED] token=[REDACTED] key=[REDACTED] db="+plainValue) {
			t.Errorf("%s: %d %q", tc.name, code, why)
		}
		for _, secret := range []string{serviceKey, fromVar, namedToken} {
			if strings.Contains(body, secret) {
				t.Errorf("%s: /readyz holds %q: %s", tc.name, secret, body)
			}
		}
	}
	code, checks, body := get("192.0.2.7:40000", "")
	if code != http.StatusOK || checks["mcp:broken"] != "down" || checks["tools_file"] != "ok" || checks["workspace"] != "ok" {
		t.Errorf("network: %d %s", code, body)
	}
	for _, s := range []string{"stderr", "exit status", plainValue, "[REDACTED]"} {
		if strings.Contains(body, s) {
			t.Errorf("network: /readyz holds %q: %s", s, body)
		}
	}
}

// TestReadyzReloadErrorRedacted: the error of a failed reload, which
// /readyz quotes in tools_file, passes the redaction: here a mistake in
// the file that quotes the service's key.
func TestReadyzReloadErrorRedacted(t *testing.T) {
	const serviceKey = "svc-api-key-0123456789abcdef"
	file := filepath.Join(t.TempDir(), "tools.yaml")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("tools:\n  - {name: hello, description: d, command: [/bin/echo, hi]}\n")
	cfg := testConfig(t, map[string]string{"EXEC_SANDBOX": "none", "TOOLS_FILE": file, "API_KEYS": "agent=" + serviceKey, "TOOLS_ENABLED": "files"})
	a, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	write("tools:\n  - {name: hello, description: d, command: [/bin/echo, hi], timeout: " + serviceKey + "}\n")
	if err := a.Reload(); err == nil || !strings.Contains(err.Error(), serviceKey) {
		t.Fatalf("the reload's error does not quote the value, so this test proves nothing: %v", err)
	}
	_, checks := a.Ready()
	if v := checks["tools_file"]; !strings.HasPrefix(v, "reload failed, ") || strings.Contains(v, serviceKey) || !strings.Contains(v, "[REDACTED]") {
		t.Errorf("tools_file = %q", v)
	}
}
