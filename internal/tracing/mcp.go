package tracing

import (
	"context"
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// The _meta keys that carry the trace context of an MCP request, as the
// MCP semantic conventions name them: W3C Trace Context's header names.
const (
	MetaTraceparent = "traceparent"
	MetaTracestate  = "tracestate"
)

// MetaCarrier reads and writes the trace context in an MCP request's
// _meta (the SDK's Meta is such a map).
type MetaCarrier map[string]any

// Get returns the string under key, "" for none or another type.
func (m MetaCarrier) Get(key string) string {
	s, _ := m[key].(string)
	return s
}

// Set sets key.
func (m MetaCarrier) Set(key, value string) { m[key] = value }

// Keys lists the keys.
func (m MetaCarrier) Keys() []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}

// MCPRequest is what the server span of an MCP request says of it.
type MCPRequest struct {
	// Method is the JSON-RPC method (tools/call); Tool the tool it
	// calls, for tools/call.
	Method, Tool string
	// RequestID is the JSON-RPC ID as text; empty for a notification.
	RequestID string
	// ProtocolVersion is the MCP protocol version the client sent
	// (Mcp-Protocol-Version); empty when unknown.
	ProtocolVersion string
	// Traceparent and Tracestate are the request's _meta keys; empty:
	// the HTTP request's headers are the parent, when they carry one.
	Traceparent, Tracestate string
}

// StartMCPServer starts the server span of one MCP request that came over
// r (Streamable HTTP): "{mcp.method.name} {gen_ai.tool.name}" (or the
// method alone), kind server, the child of the trace context in the
// request's _meta, else of r's traceparent header. End it with EndMCP.
// Its attributes are set once the sampler has kept it (see startBare).
func (t *Tracer) StartMCPServer(ctx context.Context, r *http.Request, m MCPRequest) (context.Context, Span) {
	if t == nil {
		return ctx, Span{}
	}
	if m.Traceparent != "" {
		carrier := MetaCarrier{MetaTraceparent: m.Traceparent}
		if m.Tracestate != "" {
			carrier[MetaTracestate] = m.Tracestate
		}
		ctx = t.prop.Extract(ctx, carrier)
	} else {
		ctx = t.Extract(ctx, r.Header)
	}
	name := m.Method
	if m.Tool != "" {
		name += " " + m.Tool
	}
	ctx, s := t.startBare(ctx, name, trace.SpanKindServer)
	if s.Recording() {
		s.s.SetAttributes(mcpAttrs(r, m)...)
	}
	return ctx, s
}

// mcpAttrs are the MCP conventions' attributes of a server span for m,
// which came over r.
func mcpAttrs(r *http.Request, m MCPRequest) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 10)
	attrs = append(attrs, attribute.String(AttrMCPMethod, m.Method),
		attribute.String(AttrNetworkTransport, "tcp"), attribute.String(AttrNetworkProtocol, "http"),
		attribute.String(AttrNetworkProtoVer, protoVersion(r)))
	if m.Tool != "" {
		attrs = append(attrs, attribute.String(AttrGenAIToolName, m.Tool), attribute.String(AttrGenAIOperation, OpExecuteTool))
	}
	if m.RequestID != "" {
		attrs = append(attrs, attribute.String(AttrJSONRPCRequestID, m.RequestID))
	}
	if m.ProtocolVersion != "" {
		attrs = append(attrs, attribute.String(AttrMCPProtocolVersion, m.ProtocolVersion))
	}
	return appendHostPort(attrs, AttrClientAddress, AttrClientPort, r.RemoteAddr)
}

// EndMCP ends an MCP span: isError (a CallToolResult with isError) sets
// error.type tool_error, as the conventions say, though the JSON-RPC
// answer is a success; rpcCode, when not 0, is the JSON-RPC error the
// request was answered with.
func (s Span) EndMCP(isError bool, rpcCode int64, message string) {
	if s.s == nil {
		return
	}
	switch {
	case rpcCode != 0:
		s.rpcFailed(rpcCode, message)
	case isError:
		s.failed(ErrorTypeTool, message)
	}
	s.s.End()
}

// MCPClientCall is what the client span of a call to a mounted MCP
// server says of it.
type MCPClientCall struct {
	// Server is the server's name in the tools file, Tool the tool's
	// name on the server (not the mounted <server>__<tool>).
	Server, Tool string
	// Transport is network.transport: pipe for a server on stdio, tcp
	// for one over HTTP, whose URL is ServerURL.
	Transport string
	ServerURL string
	// Arguments are the call's arguments, captured (redacted) only when
	// content is.
	Arguments []byte
}

// StartMCPClient starts the client span of a tools/call to a mounted MCP
// server: "tools/call {tool}", kind client. Inject then puts its context
// in the request's _meta, so that the server's spans join the trace.
func (t *Tracer) StartMCPClient(ctx context.Context, c MCPClientCall) (context.Context, Span) {
	if t == nil {
		return ctx, Span{}
	}
	attrs := []attribute.KeyValue{
		attribute.String(AttrMCPMethod, "tools/call"),
		attribute.String(AttrGenAIToolName, c.Tool),
		attribute.String(AttrGenAIOperation, OpExecuteTool),
		attribute.String(AttrNetworkTransport, c.Transport),
		attribute.String(AttrMCPServer, c.Server),
	}
	if c.ServerURL != "" {
		attrs = appendURLHost(attrs, c.ServerURL)
	}
	if t.capture && c.Arguments != nil {
		attrs = append(attrs, attribute.String(AttrGenAIToolArgs, t.content(string(c.Arguments))))
	}
	return t.start(ctx, "tools/call "+c.Tool, trace.SpanKindClient, attrs...)
}

// Inject writes ctx's span context into meta (traceparent, tracestate),
// for the _meta of an MCP request; meta is returned, made when nil. Nil t
// or a ctx without a span leaves meta as it is.
func (t *Tracer) Inject(ctx context.Context, meta map[string]any) map[string]any {
	if t == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return meta
	}
	if meta == nil {
		meta = map[string]any{}
	}
	t.prop.Inject(ctx, MetaCarrier(meta))
	return meta
}

// EndMCPClient ends a mounted server's call: err is a failure to get an
// answer (error.type from ErrorType, or the JSON-RPC code when rpcCode is
// not 0), isError an answer that is an error result (tool_error); result
// is its text, captured when content is.
func (s Span) EndMCPClient(err error, rpcCode int64, isError bool, result string) {
	if s.s == nil {
		return
	}
	switch {
	case rpcCode != 0:
		s.rpcFailed(rpcCode, "")
	case err != nil:
		s.failed(ErrorType(err), ErrorType(err))
	case isError:
		s.failed(ErrorTypeTool, ErrorTypeTool)
	}
	if s.t.capture && err == nil && rpcCode == 0 {
		s.s.SetAttributes(attribute.String(AttrGenAIToolResult, s.t.content(result)))
	}
	s.s.End()
}

// rpcFailed marks the span as answered with the JSON-RPC error rpcCode:
// the code is its error.type and rpc status, message (else the code) its
// status's description.
func (s Span) rpcFailed(rpcCode int64, message string) {
	code := strconv.FormatInt(rpcCode, 10)
	s.s.SetAttributes(attribute.String(AttrErrorType, code), attribute.String(AttrRPCStatusCode, code))
	if message == "" {
		message = code
	}
	s.s.SetStatus(codes.Error, message)
}
