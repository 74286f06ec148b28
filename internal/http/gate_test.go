package http

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/countbot/toolsvc/internal/callinfo"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/tracing"
)

// callTool records the call context each run sees.
type callTool struct {
	mu    sync.Mutex
	calls []registry.Call
}

func (c *callTool) Name() string                { return "whoami" }
func (c *callTool) Description() string         { return "records its call" }
func (c *callTool) Parameters() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (c *callTool) Execute(ctx context.Context, _ json.RawMessage) (string, error) {
	call, _ := registry.CallFrom(ctx)
	c.mu.Lock()
	c.calls = append(c.calls, call)
	c.mu.Unlock()
	return "ok", nil
}

func (c *callTool) last() registry.Call {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[len(c.calls)-1]
}

// headerTransport adds fixed headers to every request, as an MCP client
// configured with them sends them.
type headerTransport map[string]string

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// folderPolicy lets every key call everything and gives each a folder
// named after it.
type folderPolicy struct{}

func (folderPolicy) Allows(string, string) bool           { return true }
func (folderPolicy) SeesAll(string) bool                  { return true }
func (folderPolicy) Admit(string) (time.Duration, string) { return 0, "" }
func (folderPolicy) Release(string)                       {}
func (folderPolicy) Folder(key string) string             { return "tenants/" + key }
func (folderPolicy) Generation() uint64                   { return 1 }

// TestGateSameFactsOnEveryDoor: REST invoke and /mcp hand the tool the
// same facts (every header of callHeaders, the name of the caller's key
// and its policy's folder, and with tracing on the call's span in the
// caller's trace), and the access log names the key, never showing it.
func TestGateSameFactsOnEveryDoor(t *testing.T) {
	const secret = "alice-secret-key-0123456789"
	var logs syncBuffer
	tool := &callTool{}
	spans := tracetest.NewInMemoryExporter()
	tracer := tracing.NewWithProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans)), tracing.Options{})
	reg := registry.New(registry.Options{Policy: folderPolicy{}, Tracer: tracer})
	if err := reg.Register(tool); err != nil {
		t.Fatal(err)
	}
	// The span ID of the call's own span, which each call has anew.
	callSpan := func(got *registry.Call) {
		t.Helper()
		for _, s := range spans.GetSpans() {
			if s.Name == "execute_tool whoami" && s.SpanContext.SpanID().String() == got.SpanID {
				got.SpanID = "the call's span"
				return
			}
		}
		t.Errorf("the call's SpanID %q is no execute_tool span's", got.SpanID)
	}
	srv := httptest.NewServer(NewHandler(Options{Registry: reg, Log: zerolog.New(&logs), Tracer: tracer,
		Keys: []Key{{Name: "alice", Secret: secret}, {Name: "root", Secret: "root-secret-key-0123456789", Admin: true}}}))
	defer srv.Close()
	headers := headerTransport{
		"Authorization": "Bearer " + secret, "X-Session-ID": "s-1", "X-Source": "telegram",
		"X-Channel": "telegram", "X-Chat-ID": "chat-42", "X-Reply-To": "msg-9", "X-Request-ID": "req-1", "X-Approval": "ap-1",
		"Traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	}
	want := registry.Call{Tool: "whoami", Facts: callinfo.Facts{SessionID: "s-1", Source: "telegram", Channel: "telegram",
		ChatID: "chat-42", ReplyTo: "msg-9", Key: "alice", Workspace: "tenants/alice", RequestID: "req-1", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736",
		SpanID: "the call's span", Approval: "ap-1"}}
	// Every fact is set, so that each is seen to come through both doors.
	for _, f := range reflect.VisibleFields(reflect.TypeFor[callinfo.Facts]()) {
		if reflect.ValueOf(want.Facts).FieldByIndex(f.Index).IsZero() {
			t.Fatalf("the test sets no %s", f.Name)
		}
	}

	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/tools/whoami/invoke", strings.NewReader(`{}`))
	resp, err := (&http.Client{Transport: headers}).Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("REST invoke: %v %v", resp, err)
	}
	resp.Body.Close()
	got := tool.last()
	got.ID = ""
	callSpan(&got)
	if got != want {
		t.Errorf("REST call %+v, want %+v", got, want)
	}

	client := mcp.NewClient(&mcp.Implementation{Name: "gate-test", Version: "1"}, nil)
	sess, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: srv.URL + "/mcp", MaxRetries: -1, HTTPClient: &http.Client{Transport: headers}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	res, err := sess.CallTool(context.Background(), &mcp.CallToolParams{Name: "whoami"})
	if err != nil || res.IsError {
		t.Fatalf("MCP call: %v %+v", err, res)
	}
	got = tool.last()
	got.ID = ""
	callSpan(&got)
	if got != want {
		t.Errorf("MCP call %+v, want %+v", got, want)
	}

	srv.Close()
	lines := logs.lines()
	if len(lines) == 0 {
		t.Fatal("no access log lines")
	}
	for _, l := range lines {
		if l["key"] != "alice" {
			t.Errorf("access log line without the key's name: %v", l)
		}
	}
	if strings.Contains(logs.b.String(), secret) {
		t.Error("the log shows the key")
	}
}

// TestGateAuthenticate: each key becomes its own caller; an admin key
// sees all; without keys every request sees all; a wrong key is a 401.
func TestGateAuthenticate(t *testing.T) {
	keys := []Key{{Name: "alice", Secret: "alice-secret-key-0123456789"}, {Name: "bob", Secret: "bob-secret-key-0123456789"},
		{Name: "root", Secret: "root-secret-key-0123456789", Admin: true}}
	cases := []struct {
		name   string
		keys   []Key
		header string
		want   Caller
		status int
	}{
		{"alice", keys, "Bearer alice-secret-key-0123456789", Caller{Key: "alice"}, 200},
		{"bob, lower-case scheme", keys, "bearer  bob-secret-key-0123456789 ", Caller{Key: "bob"}, 200},
		{"admin", keys, "Bearer root-secret-key-0123456789", Caller{Key: "root", All: true}, 200},
		{"wrong key", keys, "Bearer alice-secret-key-012345678", Caller{}, 401},
		{"no key", keys, "", Caller{}, 401},
		{"basic", keys, "Basic alice-secret-key-0123456789", Caller{}, 401},
		{"no keys configured", nil, "", Caller{All: true}, 200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := newGate(tc.keys, context.Background(), 1)
			var got Caller
			h := g.authenticate(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got, _ = CallerFrom(r.Context())
			}))
			req := httptest.NewRequest(http.MethodGet, "/tools", nil)
			if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.status || got != tc.want {
				t.Errorf("status %d caller %+v, want %d %+v", rec.Code, got, tc.status, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		c     Caller
		owner string
		sees  bool
	}{
		{Caller{Key: "alice"}, "alice", true}, {Caller{Key: "alice"}, "bob", false}, {Caller{Key: "alice"}, "", false},
		{Caller{Key: "root", All: true}, "bob", true}, {Caller{Key: "root", All: true}, "", true}, {Caller{All: true}, "alice", true},
	} {
		if got := tc.c.Sees(tc.owner); got != tc.sees {
			t.Errorf("%+v sees %q: %v", tc.c, tc.owner, got)
		}
	}
}

// TestGateAdmit: a context that did not pass a door is refused; the call
// gets the deadline given; the slot is held until done, also once the call
// is canceled; a stopped service cancels running calls and refuses new
// ones.
func TestGateAdmit(t *testing.T) {
	stopping, stop := context.WithCancel(context.Background())
	g := newGate(nil, stopping, 1)
	if _, err := g.admit(context.Background(), time.Minute); !errors.Is(err, errNoDoor) {
		t.Errorf("admit without a door: %v", err)
	}
	var ctx context.Context
	g.door(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { ctx = r.Context() })).
		ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/mcp", nil))
	p, err := g.admit(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if dl, ok := p.ctx.Deadline(); !ok || time.Until(dl) > time.Minute || time.Until(dl) < 50*time.Second {
		t.Errorf("the call's deadline is %v away, want the timeout given", time.Until(dl))
	}
	if _, err := g.admit(ctx, time.Minute); !errors.Is(err, errBusy) {
		t.Errorf("second admit with one slot: %v", err)
	}
	// A client gone: the call is canceled, and holds its slot until done.
	p.cancel()
	<-p.ctx.Done()
	if _, err := g.admit(ctx, time.Minute); !errors.Is(err, errBusy) {
		t.Errorf("admit while a canceled call has not returned: %v", err)
	}
	p.done()
	p2, err := g.admit(ctx, time.Minute)
	if err != nil {
		t.Fatalf("admit after done: %v", err)
	}
	stop()
	<-p2.ctx.Done()
	p2.done()
	p.done()
	p.done()
	if _, err := g.admit(ctx, time.Minute); !errors.Is(err, errStopping) {
		t.Errorf("admit while stopping: %v", err)
	}
}
