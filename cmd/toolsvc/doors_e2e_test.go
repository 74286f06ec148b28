package main

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// keyTransport sends the key and a session with every request, as an MCP
// client configured for the service does.
type keyTransport struct{ key, session string }

func (k keyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+k.key)
	r.Header.Set("X-Session-ID", k.session)
	return http.DefaultTransport.RoundTrip(r)
}

// TestApiDoors runs the binary's run() and goes through every door with
// a real client, each answer checked against api/openapi.yaml: the tool
// formats, the OpenAPI document, MCP with the SDK's client, the metrics
// that count the MCP calls, CORS preflight without a key, and health
// probes kept out of the info-level access log.
func TestApiDoors(t *testing.T) {
	t.Parallel()
	s := startServer(t, map[string]string{
		"API_KEYS": "doors-e2e-key-0123456789", "TOOLS_ENABLED": "files",
		"CORS_ORIGINS": "http://localhost:3000",
	})
	s.Key = "doors-e2e-key-0123456789"

	for _, f := range []string{"openai", "responses", "anthropic", "gemini"} {
		if resp, body := s.do(t, "GET", "/tools?format="+f, nil, nil); resp.StatusCode != 200 {
			t.Errorf("format %s: %d %s", f, resp.StatusCode, body)
		}
	}
	if resp, body := s.do(t, "GET", "/tools?format=claude", nil, nil); resp.StatusCode != 400 || !strings.Contains(string(body), "gemini") {
		t.Errorf("unknown format: %d %s", resp.StatusCode, body)
	}
	for _, q := range []string{"", "?scope=tools"} {
		if resp, body := s.do(t, "GET", "/openapi.json"+q, nil, nil); resp.StatusCode != 200 || !strings.Contains(string(body), `"/tools/read_file/invoke"`) {
			t.Errorf("GET /openapi.json%s: %d", q, resp.StatusCode)
		}
	}
	// A JSON-RPC message as any client sends it, checked by the contract.
	resp, body := s.do(t, "POST", "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`),
		map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"name":"write_file"`) {
		t.Errorf("POST /mcp tools/list: %d %.300s", resp.StatusCode, body)
	}

	// The MCP SDK's client.
	ctx := context.Background()
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	sess, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: s.URL + "/mcp", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: keyTransport{key: s.Key, session: "e2e-mcp"}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "write_file", Arguments: map[string]any{"path": "door.txt", "content": "through MCP"}})
	if err != nil || res.IsError {
		t.Fatalf("write_file over MCP: %v %+v", err, res)
	}
	res, err = sess.CallTool(ctx, &mcp.CallToolParams{Name: "edit_file", Arguments: map[string]any{"path": "door.txt", "old_str": "absent", "new_str": "x"}})
	if err != nil || !res.IsError {
		t.Fatalf("a failing edit_file over MCP: %v %+v", err, res)
	}

	resp, body = s.do(t, "GET", "/metrics", nil, nil)
	for _, want := range []string{
		`toolsvc_tool_calls_total{status="success",tool="write_file"} 1`,
		`toolsvc_tool_calls_total{status="error",tool="edit_file"} 1`,
		`toolsvc_tool_calls_in_flight 0`,
	} {
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Errorf("GET /metrics lacks %s", want)
		}
	}

	// CORS preflight: no key, no contract route (OPTIONS is the browser's).
	req, _ := http.NewRequest(http.MethodOptions, s.URL+"/mcp", nil)
	req.Header.Set("Origin", "http://localhost:3000")
	req.Header.Set("Access-Control-Request-Method", "POST")
	pre, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	pre.Body.Close()
	if pre.StatusCode != http.StatusNoContent || pre.Header.Get("Access-Control-Allow-Origin") != "http://localhost:3000" {
		t.Errorf("preflight: %d %v", pre.StatusCode, pre.Header)
	}

	// Probes are at debug: the info-level log has no line for them.
	s.do(t, "GET", "/healthz", nil, nil)
	s.do(t, "GET", "/readyz", nil, nil)
	s.do(t, "GET", "/tools", nil, nil)
	s.Stop(t)
	logs := s.Logs()
	if strings.Contains(logs, `"path":"/healthz"`) || strings.Contains(logs, `"path":"/readyz"`) || strings.Contains(logs, `"path":"/metrics"`) {
		t.Errorf("probes logged at info:\n%s", logs)
	}
	if !strings.Contains(logs, `"path":"/tools"`) || !strings.Contains(logs, `"path":"/mcp"`) {
		t.Errorf("the access log lacks /tools or /mcp")
	}
}
