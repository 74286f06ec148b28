package tracing

import (
	"context"
	"net"
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Extract returns ctx carrying the remote parent a W3C traceparent (and
// tracestate) in h names; ctx as it is when there is none or it is not
// well formed.
func (t *Tracer) Extract(ctx context.Context, h http.Header) context.Context {
	if t == nil || len(h["Traceparent"]) == 0 {
		return ctx
	}
	return t.prop.Extract(ctx, propagation.HeaderCarrier(h))
}

// StartHTTPServer starts the server span of a request to route (the
// router's pattern, "/tools/{name}/invoke"): "POST /tools/{name}/invoke",
// kind server, the child of the caller's traceparent, with the HTTP
// conventions' attributes. End it with EndHTTP.
//
// The attributes are set once the sampler has kept the span (see
// startBare): a request the sampler leaves out builds none of them.
func (t *Tracer) StartHTTPServer(r *http.Request, route string) (*http.Request, Span) {
	if t == nil {
		return r, Span{}
	}
	ctx, s := t.startBare(t.Extract(r.Context(), r.Header), r.Method+" "+route, trace.SpanKindServer)
	if s.Recording() {
		s.s.SetAttributes(t.httpAttrs(r, route)...)
	}
	return r.WithContext(ctx), s
}

// httpAttrs are the HTTP conventions' attributes of a server span for r.
func (t *Tracer) httpAttrs(r *http.Request, route string) []attribute.KeyValue {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	attrs := make([]attribute.KeyValue, 0, 10)
	attrs = append(attrs,
		attribute.String(AttrHTTPMethod, r.Method),
		attribute.String(AttrHTTPRoute, route),
		attribute.String(AttrURLPath, r.URL.Path),
		attribute.String(AttrURLScheme, scheme),
		attribute.String(AttrNetworkProtoVer, protoVersion(r)))
	attrs = appendHostPort(attrs, AttrServerAddress, AttrServerPort, r.Host)
	attrs = appendHostPort(attrs, AttrClientAddress, AttrClientPort, r.RemoteAddr)
	if ua := r.Header.Get("User-Agent"); ua != "" {
		attrs = append(attrs, attribute.String(AttrUserAgentOriginal, t.redact(ua)))
	}
	return attrs
}

// EndHTTP ends a request's server span with its response status. Only a
// 5xx status fails the span (the HTTP conventions' rule for servers): a
// tool call that failed is a 200, and its execute_tool span tells.
func (s Span) EndHTTP(status int) {
	if s.s == nil {
		return
	}
	s.s.SetAttributes(attribute.Int(AttrHTTPStatusCode, status))
	if status >= 500 {
		code := strconv.Itoa(status)
		s.s.SetAttributes(attribute.String(AttrErrorType, code))
		s.s.SetStatus(codes.Error, code)
	}
	s.s.End()
}

// protoVersion is network.protocol.version of r: "1.1", "2".
func protoVersion(r *http.Request) string {
	if r.ProtoMinor == 0 && r.ProtoMajor > 1 {
		return strconv.Itoa(r.ProtoMajor)
	}
	return strconv.Itoa(r.ProtoMajor) + "." + strconv.Itoa(r.ProtoMinor)
}

// appendHostPort appends the address and port of hostport ("host:port",
// "[::1]:80", or a host alone) under the keys addr and port.
func appendHostPort(attrs []attribute.KeyValue, addr, port, hostport string) []attribute.KeyValue {
	if hostport == "" {
		return attrs
	}
	host, p, err := net.SplitHostPort(hostport)
	if err != nil {
		return append(attrs, attribute.String(addr, hostport))
	}
	attrs = append(attrs, attribute.String(addr, host))
	if n, err := strconv.Atoi(p); err == nil {
		attrs = append(attrs, attribute.Int(port, n))
	}
	return attrs
}

// StatusWriter records the status a handler answers with, for EndHTTP.
// Unwrap lets http.ResponseController reach the connection's own writer
// (flushes of event streams, write deadlines).
type StatusWriter struct {
	http.ResponseWriter
	Status int
}

// WriteHeader records the status and sends it.
func (w *StatusWriter) WriteHeader(code int) {
	if w.Status == 0 {
		w.Status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write records 200 when the handler wrote no status first.
func (w *StatusWriter) Write(b []byte) (int, error) {
	if w.Status == 0 {
		w.Status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap returns the writer it wraps.
func (w *StatusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Middleware wraps next, which serves route, in a server span (see
// StartHTTPServer). Nil t returns next itself: no span, no cost.
func (t *Tracer) Middleware(route string, next http.Handler) http.Handler {
	if t == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r, span := t.StartHTTPServer(r, route)
		sw := &StatusWriter{ResponseWriter: w}
		defer func() {
			if p := recover(); p != nil {
				span.EndHTTP(http.StatusInternalServerError) // what the recoverer outside answers
				panic(p)
			}
			if sw.Status == 0 {
				sw.Status = http.StatusOK
			}
			span.EndHTTP(sw.Status)
		}()
		next.ServeHTTP(sw, r)
	})
}
