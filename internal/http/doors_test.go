package http

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/toolerr"
)

func mcpSession(t *testing.T, url string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "http-test", Version: "1"}, nil)
	sess, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url + "/mcp", MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	return sess
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

// TestMCPSharesTheSlots: a call over MCP takes one of the same
// MAX_CONCURRENT_CALLS slots as REST calls; with none free it is an error
// result that says to retry, not a protocol error.
func TestMCPSharesTheSlots(t *testing.T) {
	srv, bt := newTestServer(t, Options{MaxConcurrent: 1})
	sess := mcpSession(t, srv.URL)
	done := make(chan *mcp.CallToolResult)
	go func() {
		res, err := sess.CallTool(context.Background(), &mcp.CallToolParams{Name: "block"})
		if err != nil {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
		}
		done <- res
	}()
	<-bt.started
	// The slot is taken by the MCP call: a REST call is refused...
	resp, err := http.Post(srv.URL+"/tools/block/invoke", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("REST call with the slot taken by MCP: %d", resp.StatusCode)
	}
	// ... and so is another MCP call.
	res, err := sess.CallTool(context.Background(), &mcp.CallToolParams{Name: "block"})
	if err != nil || !res.IsError || !strings.Contains(mcpText(res), "already running") || !strings.Contains(mcpText(res), "Next:") {
		t.Errorf("MCP call with no slot free: %v %+v", err, res)
	}
	close(bt.release)
	if res := <-done; res.IsError || mcpText(res) != "released" {
		t.Errorf("first MCP call: %+v", res)
	}
}

// TestMCPStopping: a running MCP call is canceled when the service stops,
// and a new one is refused with an error result.
func TestMCPStopping(t *testing.T) {
	stopping, stop := context.WithCancel(context.Background())
	srv, bt := newTestServer(t, Options{Stopping: stopping})
	sess := mcpSession(t, srv.URL)
	done := make(chan *mcp.CallToolResult)
	go func() {
		res, _ := sess.CallTool(context.Background(), &mcp.CallToolParams{Name: "block"})
		done <- res
	}()
	<-bt.started
	stop()
	if res := <-done; res == nil || !res.IsError || res.Content[0].(*mcp.TextContent).Meta["error_code"] != toolerr.Canceled {
		t.Errorf("running MCP call after stop: %+v", res)
	}
	res, err := sess.CallTool(context.Background(), &mcp.CallToolParams{Name: "block"})
	if err != nil || !res.IsError || !strings.Contains(mcpText(res), "shutting down") {
		t.Errorf("new MCP call while stopping: %v %+v", err, res)
	}
}

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["message"] == "request" {
			out = append(out, m)
		}
	}
	return out
}

// TestProbesLoggedAtDebug: health probes and metrics scrapes, polled
// every few seconds, are access-logged at debug; other requests, and a
// scrape refused for want of the key, at info.
func TestProbesLoggedAtDebug(t *testing.T) {
	var logs syncBuffer
	reg := registry.New(registry.Options{})
	srv := httptest.NewServer(NewHandler(Options{
		Registry: reg, Log: zerolog.New(&logs).Level(zerolog.DebugLevel), Keys: []Key{{Name: "probe", Secret: "probe-key-0123456789"}},
		Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("m 1\n")) }),
	}))
	defer srv.Close()
	cases := []struct {
		path   string
		key    bool
		status int
		want   string
	}{
		{"/healthz", false, 200, "debug"}, {"/readyz", false, 200, "debug"}, {"/metrics", true, 200, "debug"},
		{"/tools", true, 200, "info"}, {"/metrics", false, 401, "info"},
	}
	for _, tc := range cases {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+tc.path, nil)
		if tc.key {
			req.Header.Set("Authorization", "Bearer probe-key-0123456789")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	// Close waits for the handlers, whose last act is the log line.
	srv.Close()
	got := map[string]any{}
	for _, l := range logs.lines() {
		got[fmt.Sprint(l["path"], " ", l["status"])] = l["level"]
	}
	for _, tc := range cases {
		if lvl := got[fmt.Sprint(tc.path, " ", tc.status)]; lvl != tc.want {
			t.Errorf("GET %s -> %d logged at %v, want %s", tc.path, tc.status, lvl, tc.want)
		}
	}
}

// TestMCPBodyLimit: an MCP request larger than MaxBodyBytes is refused
// with the same 413 as a call's body, before the MCP handler reads it.
func TestMCPBodyLimit(t *testing.T) {
	srv, _ := newTestServer(t, Options{MaxBodyBytes: 1024})
	big := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"block","arguments":{"x":"` + strings.Repeat("a", 2048) + `"}}}`
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(big))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var e errorBody
	_ = json.NewDecoder(resp.Body).Decode(&e)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || e.Error.Code != kindBodyTooLarge {
		t.Errorf("large MCP request: %d %+v", resp.StatusCode, e)
	}
}

// TestMCPRefusesRebinding: a page that made a host name resolve to
// 127.0.0.1 (DNS rebinding) reaches the loopback listener with its own
// Host header; /mcp refuses it, and accepts the same request under the
// loopback address.
func TestMCPRefusesRebinding(t *testing.T) {
	srv, _ := newTestServer(t, Options{})
	for _, tc := range []struct {
		host string
		want int
	}{{"attacker.example", http.StatusForbidden}, {"", http.StatusOK}} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tc.host != "" {
			req.Host = tc.host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("Host %q: %d, want %d", tc.host, resp.StatusCode, tc.want)
		}
	}
}

// waitTool waits for its context and reports that it ended.
type waitTool struct{ started, ended chan struct{} }

func (w *waitTool) Name() string                { return "wait" }
func (w *waitTool) Description() string         { return "waits until canceled" }
func (w *waitTool) Parameters() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (w *waitTool) Execute(ctx context.Context, _ json.RawMessage) (string, error) {
	close(w.started)
	<-ctx.Done()
	close(w.ended)
	return "", ctx.Err()
}

// TestMCPClientGoneCancels: an MCP client that gives up on a call (its
// context canceled, the request dropped) stops the tool, as a REST client
// that disconnects does.
func TestMCPClientGoneCancels(t *testing.T) {
	wt := &waitTool{started: make(chan struct{}), ended: make(chan struct{})}
	reg := registry.New(registry.Options{})
	if err := reg.Register(wt); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(NewHandler(Options{Registry: reg, Log: zerolog.Nop()}))
	defer srv.Close()
	sess := mcpSession(t, srv.URL)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "wait"})
		done <- err
	}()
	<-wt.started
	cancel()
	// A bound on liveness, not a timing claim: a call that is never
	// canceled would wait for the registry's two-minute deadline.
	select {
	case <-wt.ended:
	case <-time.After(30 * time.Second):
		t.Fatal("the tool was not canceled when the MCP client gave up")
	}
	if err := <-done; err == nil {
		t.Error("the canceled call returned no error")
	}
}
