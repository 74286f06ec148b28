package mcpmount

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/sandbox"
	"github.com/countbot/toolsvc/internal/toolerr"
)

// goServer is an in-process Streamable HTTP MCP server with a tool that
// returns as many MiB of text as asked.
func goServer(t *testing.T, jsonResponse bool) *httptest.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "go", Version: "1"}, nil)
	type bigArgs struct {
		MB int `json:"mb"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "big", Description: "Return mb MiB of text."}, func(_ context.Context, _ *mcp.CallToolRequest, a bigArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("y", a.MB<<20)}}}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{JSONResponse: jsonResponse})
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts
}

// TestHTTPBounds: a response larger than MaxMessage, as one JSON body or
// as one server-sent event, ends the call with a clear error, and the
// next call works on a new connection.
func TestHTTPBounds(t *testing.T) {
	for _, jsonResponse := range []bool{true, false} {
		name := "event-stream"
		if jsonResponse {
			name = "json"
		}
		t.Run(name, func(t *testing.T) {
			ts := goServer(t, jsonResponse)
			e := newEnv(t, sandbox.None)
			e.deps.MaxMessage = 1 << 20
			s := e.start(t, "go", Config{Type: TypeHTTP, URL: ts.URL})
			reg := registryOf(t, s)
			r := invoke(reg, context.Background(), "go__big", `{"mb":3}`)
			t.Logf("result: %s", r.Result)
			if r.Status != registry.StatusError || r.Error.Code == toolerr.InvalidArguments {
				t.Fatalf("3 MiB through a 1 MiB bound: %+v", r)
			}
			if !strings.Contains(r.Result, "larger than 1048576 bytes") {
				t.Errorf("the error does not name the bound: %s", r.Result)
			}
			if r := invoke(reg, context.Background(), "go__big", `{"mb":0}`); r.Status != registry.StatusSuccess {
				t.Errorf("next call: %+v", r)
			}
		})
	}
}

// TestHTTPRedirectToOtherHost: the headers' credentials are not sent to
// a host the operator did not name.
func TestHTTPRedirectToOtherHost(t *testing.T) {
	var leaked bool
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaked = leaked || r.Header.Get("Authorization") != ""
		http.Error(w, "no", http.StatusNotFound)
	}))
	defer other.Close()
	// Same address, another host name: a different host to the client.
	target := strings.Replace(other.URL, "127.0.0.1", "localhost", 1)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target+"/mcp", http.StatusTemporaryRedirect)
	}))
	defer front.Close()
	e := newEnv(t, sandbox.None)
	e.deps.ConnectTimeout = 5e9
	e.deps.LookupEnv = func(string) (string, bool) { return "secret-token-123456", true }
	s := New("redir", Config{Type: TypeHTTP, URL: front.URL + "/mcp", Headers: map[string]string{"Authorization": "Bearer ${T}"}}, e.deps)
	defer s.Close()
	err := s.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("Start: %v", err)
	}
	if strings.Contains(err.Error(), "secret-token-123456") || leaked {
		t.Errorf("the token leaked: %v, sent to the other host: %v", err, leaked)
	}
}
