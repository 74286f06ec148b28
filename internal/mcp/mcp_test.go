package mcp

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/countbot/toolsvc/internal/registry"
)

type echoTool struct{}

func (echoTool) Name() string        { return "echo" }
func (echoTool) Description() string { return "Echo the text." }
func (echoTool) Parameters() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}`)
}
func (echoTool) Execute(_ context.Context, args json.RawMessage) (string, error) {
	var a struct{ Text string }
	err := json.Unmarshal(args, &a)
	return a.Text, err
}
func (echoTool) Annotations() registry.Annotations {
	return registry.Annotations{Title: "Echo", ReadOnly: true, Idempotent: true}
}

func newTestServer(t *testing.T) *httptest.Server {
	t.Helper()
	reg := registry.New(registry.Options{})
	if err := reg.Register(echoTool{}); err != nil {
		t.Fatal(err)
	}
	h := NewHandler(Options{Registry: reg, Version: "test", MaxBodyBytes: 1 << 20,
		Invoke: func(ctx context.Context, t registry.Target, args []byte) (registry.Result, string) {
			return reg.InvokeTarget(ctx, t, args, registry.Meta{}), ""
		}})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		h.ServeBody(w, r, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func post(t *testing.T, url, version, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if version != "" {
		req.Header.Set("MCP-Protocol-Version", version)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestUnknownMethod: a request for a method the server lacks is a
// JSON-RPC -32601 over every protocol version, a notification of one is
// accepted and ignored.
func TestUnknownMethod(t *testing.T) {
	srv := newTestServer(t)
	for _, v := range []string{"", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"} {
		code, body := post(t, srv.URL, v, `{"jsonrpc":"2.0","id":7,"method":"foo/bar"}`)
		var resp struct {
			ID    int
			Error struct{ Code int }
		}
		if err := json.Unmarshal([]byte(body), &resp); err != nil || resp.ID != 7 || resp.Error.Code != -32601 {
			t.Errorf("version %q: %d %s", v, code, body)
		}
	}
	if code, body := post(t, srv.URL, "2025-11-25", `{"jsonrpc":"2.0","method":"notifications/foo"}`); code != http.StatusAccepted {
		t.Errorf("unknown notification: %d %s", code, body)
	}
	// The methods of capabilities the server does not declare (it offers
	// tools only) are not found either, not answered with empty lists.
	for _, m := range []string{"prompts/list", "resources/list", "resources/templates/list", "prompts/get", "resources/read", "completion/complete"} {
		// The answer comes from one middleware, whatever the version;
		// 2026-07-28 requests need headers this helper does not send.
		for _, v := range []string{"2025-06-18", "2025-11-25"} {
			_, body := post(t, srv.URL, v, `{"jsonrpc":"2.0","id":8,"method":"`+m+`","params":{}}`)
			var resp struct {
				ID     int
				Error  struct{ Code int }
				Result any
			}
			if err := json.Unmarshal([]byte(body), &resp); err != nil || resp.ID != 8 || resp.Error.Code != -32601 || resp.Result != nil {
				t.Errorf("%s over %s: %s", m, v, body)
			}
		}
	}
}

// TestParamsErrors: params that do not decode get a message in JSON's
// terms, without Go's type and package names.
func TestParamsErrors(t *testing.T) {
	srv := newTestServer(t)
	for _, c := range []struct{ params, want string }{
		{`{"name":5}`, "name must be a string"},
		{`{"name":"echo","arguments":{"text":1}}`, ""}, // a tool result, not a protocol error
		{`[1]`, "params must be an object"},
		{`{"name":true}`, "name must be a string"},
	} {
		_, body := post(t, srv.URL, "2025-11-25", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":`+c.params+`}`)
		if strings.Contains(body, "Go ") || strings.Contains(body, "mcp.") || strings.Contains(body, "unmarshal") || !strings.Contains(body, c.want) {
			t.Errorf("params %s: %s, want %q", c.params, body, c.want)
		}
	}
}

// TestToolsAndResults: tools carry their title and annotations, the
// server promises no list-changed notification, and a result's
// bookkeeping is its text block's _meta, not the result's.
func TestToolsAndResults(t *testing.T) {
	srv := newTestServer(t)
	_, body := post(t, srv.URL, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if !strings.Contains(body, `"capabilities":{"tools":{}}`) {
		t.Errorf("initialize: %s", body)
	}
	_, body = post(t, srv.URL, "2025-11-25", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	for _, want := range []string{`"title":"Echo"`, `"readOnlyHint":true`, `"idempotentHint":true`, `"destructiveHint":false`, `"openWorldHint":false`} {
		if !strings.Contains(body, want) {
			t.Errorf("tools/list lacks %s: %s", want, body)
		}
	}
	_, body = post(t, srv.URL, "2025-11-25", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`)
	var resp struct {
		Result struct {
			Meta              map[string]any `json:"_meta"`
			StructuredContent any            `json:"structuredContent"`
			Content           []struct {
				Text string
				Meta map[string]any `json:"_meta"`
			}
		}
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil {
		t.Fatal(err)
	}
	r := resp.Result
	if r.Meta != nil || r.StructuredContent != nil || len(r.Content) != 1 || r.Content[0].Text != "hi" ||
		r.Content[0].Meta["call_id"] == nil || r.Content[0].Meta["status"] != "success" {
		t.Errorf("tools/call: %s", body)
	}
}
