package tracing_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/countbot/toolsvc/internal/toolerr"
	"github.com/countbot/toolsvc/internal/tracing"
	"github.com/countbot/toolsvc/internal/tracing/tracingtest"
)

const (
	callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan  = "00f067aa0ba902b7"
	traceparent = "00-" + callerTrace + "-" + callerSpan + "-01"
)

// everySpan makes one span of each kind the service makes, through the
// SDK and its OTLP/HTTP exporter to rcv, with content captured, and
// flushes them.
func everySpan(t *testing.T, rcv *tracingtest.Receiver) {
	t.Helper()
	tr, err := tracing.New(context.Background(), tracing.Options{Endpoint: rcv.URL, CaptureContent: true, ServiceVersion: "test",
		Redact: func(s string) string { return strings.ReplaceAll(s, "sk-secret", "[REDACTED]") }})
	if err != nil || tr == nil {
		t.Fatalf("New: %v %v", tr, err)
	}
	// REST: the server span around a handler that runs a call which
	// fails, answered 200.
	h := tr.Middleware("/tools/{name}/invoke", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, span := tr.StartTool(r.Context(), "exec")
		_, ex := tr.StartExec(ctx, "bwrap")
		ex.EndExec(3, true, nil)
		_, ex = tr.StartExec(ctx, "landlock")
		ex.EndExec(0, false, toolerr.Errorf(toolerr.Timeout, "slow"))
		span.EndTool(tracing.ToolEnd{CallID: "call-1", ErrorCode: toolerr.ToolError,
			Arguments: func() string { return `{"command":"echo sk-secret"}` }, Result: "Error: exit 3"})
		w.WriteHeader(http.StatusOK)
	}))
	req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8080/tools/exec/invoke", nil)
	req.RemoteAddr, req.Header["Traceparent"] = "127.0.0.1:50000", []string{traceparent}
	req.Header.Set("User-Agent", "python-urllib/3.12")
	h.ServeHTTP(httptest.NewRecorder(), req)

	// MCP: a tools/call whose trace context came in _meta, and what its
	// tool does: a page, a screenshot, a mounted server, a model.
	ctx, srv := tr.StartMCPServer(context.Background(), req, tracing.MCPRequest{Method: "tools/call", Tool: "web_fetch",
		RequestID: "7", ProtocolVersion: "2025-06-18", Traceparent: traceparent})
	_, page := tr.StartFetch(ctx, "https://user:pw@example.com/a?b=1")
	page.EndFetch(tracing.NetguardAllowed, 200, nil)
	_, page = tr.StartFetch(ctx, "http://169.254.169.254/latest")
	page.EndFetch(tracing.NetguardRefused, 0, toolerr.Errorf(toolerr.PolicyDenied, "refused"))
	_, shot := tr.StartScreenshot(ctx, "web", "https://example.com/")
	shot.EndErr(nil)
	mctx, mc := tr.StartMCPClient(ctx, tracing.MCPClientCall{Server: "echo", Tool: "trace", Transport: "pipe", Arguments: []byte(`{}`)})
	if meta := tr.Inject(mctx, nil); !strings.Contains(meta[tracing.MetaTraceparent].(string), callerTrace) {
		t.Errorf("Inject wrote %v", meta)
	}
	mc.EndMCPClient(nil, 0, true, "Error: no")
	_, mc = tr.StartMCPClient(ctx, tracing.MCPClientCall{Server: "remote", Tool: "sum", Transport: "tcp", ServerURL: "http://127.0.0.1:9000/mcp"})
	mc.EndMCPClient(errors.New("no answer"), -32601, false, "")
	_, chat := tr.StartChat(ctx, tracing.Chat{Provider: "openai", Model: "gpt-test", BaseURL: "http://127.0.0.1:4010/v1"})
	chat.EndChat(tracing.ChatEnd{ResponseID: "r-1", ResponseModel: "gpt-test", FinishReasons: []string{"stop"}, InputTokens: 12, OutputTokens: 5}, nil)
	_, chat = tr.StartChat(ctx, tracing.Chat{Provider: "openai", Model: "gpt-test", BaseURL: "https://api.example.com/v1"})
	chat.EndChat(tracing.ChatEnd{ErrorType: "429"}, errors.New("HTTP 429"))
	srv.EndMCP(true, 0, toolerr.ToolError)
	_, srv = tr.StartMCPServer(context.Background(), req, tracing.MCPRequest{Method: "tools/list", RequestID: "8"})
	srv.EndMCP(false, 0, "")
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestSpansFollowConventions: every span the service makes, as an OTLP
// receiver built on the official protobuf definitions decodes it, has
// the name, kind and attributes the semantic conventions' YAML gives its
// group (MCP, GenAI, HTTP), and the service's own spans use the
// registry's attributes as it defines them: 0 violations.
func TestSpansFollowConventions(t *testing.T) {
	rcv := tracingtest.NewReceiver(t)
	everySpan(t, rcv)
	conv, err := tracingtest.LoadConventions(tracingtest.ModelDir())
	if err != nil {
		t.Fatal(err)
	}
	spans := rcv.Spans()
	if len(spans) != 13 {
		t.Fatalf("%d spans received, want 13:\n%s", len(spans), tracingtest.Tree(spans))
	}
	groups := map[string]int{}
	for _, s := range spans {
		groups[tracingtest.Classify(s)]++
		for _, v := range conv.Check(s) {
			t.Error(v)
		}
	}
	for _, g := range []string{"span.http.server", "span.gen_ai.execute_tool.internal", "span.mcp.server", "span.mcp.client",
		"span.http.client", "span.gen_ai.inference.client", ""} {
		if groups[g] == 0 {
			t.Errorf("no span of %q: %v", g, groups)
		}
	}
	if t.Failed() {
		t.Log(tracingtest.Tree(spans))
	}
}

// TestSpansCarryWhatTheySay: the caller's trace is continued, a failed
// call is error.type tool_error under a 200, captured content is
// redacted, a URL loses its password, and a mounted server's failure
// keeps its JSON-RPC code.
func TestSpansCarryWhatTheySay(t *testing.T) {
	rcv := tracingtest.NewReceiver(t)
	everySpan(t, rcv)
	by := map[string]tracingtest.Span{}
	for _, s := range rcv.Spans() {
		if s.TraceID != callerTrace && s.Name != "tools/list" {
			t.Errorf("%s is in trace %s, not the caller's", s.Name, s.TraceID)
		}
		if _, dup := by[s.Name]; !dup {
			by[s.Name] = s
		}
	}
	rest, call := by["POST /tools/{name}/invoke"], by["execute_tool exec"]
	if rest.ParentSpanID != callerSpan || rest.Attrs["http.response.status_code"] != int64(200) || rest.StatusError {
		t.Errorf("REST span %+v", rest)
	}
	if call.ParentSpanID != rest.SpanID || call.Attrs["error.type"] != "tool_error" || !call.StatusError ||
		call.Attrs["gen_ai.tool.call.id"] != "call-1" || call.Attrs["toolsvc.error.code"] != "tool_error" {
		t.Errorf("call span %+v", call)
	}
	if args := call.Attrs["gen_ai.tool.call.arguments"]; args != `{"command":"echo [REDACTED]"}` {
		t.Errorf("captured arguments %q", args)
	}
	if ex := by["exec"]; ex.ParentSpanID != call.SpanID || ex.Attrs["process.exit.code"] != int64(3) || ex.Attrs["toolsvc.sandbox.mode"] != "bwrap" {
		t.Errorf("exec span %+v", ex)
	}
	mcpSrv := by["tools/call web_fetch"]
	if mcpSrv.ParentSpanID != callerSpan || mcpSrv.Attrs["error.type"] != "tool_error" || mcpSrv.Attrs["jsonrpc.request.id"] != "7" {
		t.Errorf("MCP server span %+v", mcpSrv)
	}
	if u := by["GET"].Attrs["url.full"]; u != "https://example.com/a?b=1" {
		t.Errorf("url.full %q", u)
	}
	if c := by["tools/call sum"]; c.Attrs["rpc.response.status_code"] != "-32601" || c.Attrs["server.port"] != int64(9000) {
		t.Errorf("MCP client span %+v", c)
	}
	if c := by["chat gpt-test"]; c.Attrs["gen_ai.usage.input_tokens"] != int64(12) || c.Attrs["gen_ai.usage.output_tokens"] != int64(5) {
		t.Errorf("chat span %+v", c)
	}
}

// TestNilTracer: tracing off is a nil *Tracer, every method of which, and
// of the zero Span it gives, does nothing.
func TestNilTracer(t *testing.T) {
	var tr *tracing.Tracer
	ctx := context.Background()
	if c, s := tr.StartTool(ctx, "x"); c != ctx || s.Recording() {
		t.Error("StartTool of nil")
	}
	_, s := tr.StartChat(ctx, tracing.Chat{})
	s.EndChat(tracing.ChatEnd{}, nil)
	s.EndTool(tracing.ToolEnd{})
	s.EndHTTP(500)
	s.EndMCP(true, 0, "")
	if a, b := s.IDs(); a != "" || b != "" {
		t.Error("IDs of the zero Span")
	}
	h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	if got := tr.Middleware("/", h); got == nil {
		t.Error("Middleware of nil")
	}
	if m := tr.Inject(ctx, nil); m != nil {
		t.Error("Inject of nil wrote", m)
	}
	if err := tr.Shutdown(ctx); err != nil {
		t.Error(err)
	}
	if tr, err := tracing.New(ctx, tracing.Options{}); tr != nil || err != nil {
		t.Error("New without an endpoint", tr, err)
	}
	if tr, err := tracing.New(ctx, tracing.Options{Endpoint: "http://x", Getenv: func(string) string { return "true" }}); tr != nil || err != nil {
		t.Error("New with OTEL_SDK_DISABLED", tr, err)
	}
}

// TestEndpointURL: /v1/traces is added to a base URL only.
func TestEndpointURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://localhost:4318":              "http://localhost:4318/v1/traces",
		"http://localhost:4318/":             "http://localhost:4318/v1/traces",
		"https://otel.example.com/v1/traces": "https://otel.example.com/v1/traces",
		"https://example.com/otlp/traces":    "https://example.com/otlp/traces",
		"localhost:4318":                     "",
	} {
		got, err := tracing.EndpointURL(in)
		if got != want || (err != nil) != (want == "") {
			t.Errorf("EndpointURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// A call's span names its IDs for the audit record only when the sampler
// kept it: a left-out span's IDs are in no trace store.
func TestToolSpanIDsOnlyWhenSampled(t *testing.T) {
	for _, c := range []struct {
		name    string
		sampler sdktrace.Sampler
		want    bool
	}{{"always", sdktrace.AlwaysSample(), true}, {"never", sdktrace.NeverSample(), false}} {
		t.Run(c.name, func(t *testing.T) {
			tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(c.sampler))
			defer tp.Shutdown(context.Background())
			tr := tracing.NewWithProvider(tp, tracing.Options{})
			_, span := tr.StartTool(context.Background(), "read_file")
			traceID, spanID := span.IDs()
			span.EndTool(tracing.ToolEnd{CallID: "c"})
			if got := traceID != "" && spanID != ""; got != c.want {
				t.Errorf("IDs() = %q, %q; want them: %v", traceID, spanID, c.want)
			}
		})
	}
}

// Each tool's span is named and described the same way whether its
// options were kept or made for the call (past the bound, for unknown
// tools' names).
func TestToolSpansPastTheBound(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	tr := tracing.NewWithProvider(tp, tracing.Options{})
	const n = 1100 // past the bound of kept tools
	for i := range n {
		_, span := tr.StartTool(context.Background(), fmt.Sprintf("tool%d", i))
		span.EndTool(tracing.ToolEnd{CallID: "c"})
	}
	spans := exp.GetSpans()
	if len(spans) != n {
		t.Fatalf("%d spans, want %d", len(spans), n)
	}
	for i, s := range spans {
		tool := fmt.Sprintf("tool%d", i)
		if s.Name != "execute_tool "+tool {
			t.Fatalf("span %d named %q", i, s.Name)
		}
		var name string
		for _, a := range s.Attributes {
			if a.Key == tracing.AttrGenAIToolName {
				name = a.Value.AsString()
			}
		}
		if name != tool {
			t.Fatalf("span %d: gen_ai.tool.name %q, want %q", i, name, tool)
		}
	}
}

// Below a span of the service's that the sampler left out, no span is
// made (every sampler would leave it out too), and the context keeps the
// parent's span context, unsampled, for what is passed on.
func TestChildrenOfALeftOutSpanAreNotMade(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0))))
	defer tp.Shutdown(context.Background())
	tr := tracing.NewWithProvider(tp, tracing.Options{})
	var inner context.Context
	h := tr.Middleware("/tools/{name}/invoke", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, span := tr.StartTool(r.Context(), "exec")
		if span.Recording() {
			t.Error("a tool span below a left-out door span is recorded")
		}
		if id, _ := span.IDs(); id != "" {
			t.Errorf("IDs of a span not made: %q", id)
		}
		ctx, ex := tr.StartExec(ctx, "bwrap")
		ex.EndExec(0, false, nil)
		span.EndTool(tracing.ToolEnd{CallID: "c"})
		inner = ctx
	}))
	req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8080/tools/exec/invoke", nil)
	h.ServeHTTP(httptest.NewRecorder(), req)
	if n := len(exp.GetSpans()); n != 0 {
		t.Errorf("%d spans exported, want none", n)
	}
	sc := trace.SpanContextFromContext(inner)
	if !sc.IsValid() || sc.IsSampled() {
		t.Errorf("the context below holds %v, want the door's unsampled span context", sc)
	}
	meta := tr.Inject(inner, nil)
	if tp, _ := meta[tracing.MetaTraceparent].(string); !strings.HasSuffix(tp, "-00") {
		t.Errorf("traceparent passed on %q, want the unsampled flag", tp)
	}
}
