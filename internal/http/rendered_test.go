package http

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/toolfmt"
)

type namedTool string

func (n namedTool) Name() string                { return string(n) }
func (n namedTool) Description() string         { return "tool " + string(n) }
func (n namedTool) Parameters() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (n namedTool) Execute(context.Context, json.RawMessage) (string, error) {
	return string(n), nil
}

// TestRenderingsFollowTheRegistry: every format, the OpenAPI document and
// MCP's tools/list show a set of tools replaced after the handler was
// built, and keep the same bytes while nothing changes.
func TestRenderingsFollowTheRegistry(t *testing.T) {
	reg := registry.New(registry.Options{})
	if err := reg.ReplaceSet("file", []registry.Tool{namedTool("before")}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(NewHandler(Options{Registry: reg, Log: zerolog.Nop()}))
	defer srv.Close()
	get := func(method, path, body string) string {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	paths := []string{"/openapi.json", "/openapi.json?scope=tools"}
	for _, f := range toolfmt.Formats() {
		paths = append(paths, "/tools?format="+f)
	}
	mcpList := func() string {
		return get("POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	}
	first := map[string]string{}
	for _, p := range paths {
		first[p] = get("GET", p, "")
		if !strings.Contains(first[p], "before") {
			t.Errorf("%s lacks the tool: %.200s", p, first[p])
		}
		if again := get("GET", p, ""); again != first[p] {
			t.Errorf("%s changed with nothing replaced", p)
		}
	}
	if !strings.Contains(mcpList(), `"name":"before"`) {
		t.Errorf("MCP lacks the tool")
	}
	if err := reg.ReplaceSet("file", []registry.Tool{namedTool("after")}); err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		if body := get("GET", p, ""); !strings.Contains(body, "after") || strings.Contains(body, "tool before") {
			t.Errorf("%s after the replace: %.200s", p, body)
		}
	}
	if l := mcpList(); !strings.Contains(l, `"name":"after"`) || strings.Contains(l, `"name":"before"`) {
		t.Errorf("MCP after the replace: %.300s", l)
	}
}
