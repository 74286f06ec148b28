// Package tracing sends OpenTelemetry traces of tool calls over OTLP/HTTP
// (TOOLSVC_OTEL_ENDPOINT) with the official OpenTelemetry Go SDK, and
// holds every span the service makes, named and described by the
// OpenTelemetry semantic conventions for HTTP, MCP and generative AI:
// the doors' server spans (http.go, mcp.go), the call's execute_tool span
// (tool.go) and the spans of the work a tool does (children.go: exec,
// web_fetch, screenshot, mounted MCP servers, model calls).
//
// A nil *Tracer is tracing switched off: every method returns at once, and
// a zero Span does nothing, so that a call costs nothing more when no
// endpoint is set. Nothing here is global: the service builds one Tracer
// and hands it to each piece that makes spans, by constructor.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of every span the service makes.
const ScopeName = "github.com/countbot/toolsvc"

// Options configure tracing.
type Options struct {
	// Endpoint is the OTLP/HTTP endpoint spans are sent to: a base URL
	// (http://localhost:4318), to which /v1/traces is added as for
	// OTEL_EXPORTER_OTLP_ENDPOINT, or a URL with a path, used as it is.
	// Empty: tracing is off (New returns nil).
	Endpoint string
	// CaptureContent puts a call's arguments and result on its spans
	// (gen_ai.tool.call.arguments and .result), after Redact, cut to
	// MaxContentChars. Off by default: they may hold what a user would not
	// send to a trace store.
	CaptureContent bool
	// Redact removes secrets from text put on spans: the audit record's
	// redaction. Default: identity.
	Redact func(string) string
	// ServiceVersion is the resource's service.version.
	ServiceVersion string
	// Log gets export failures, at most one line a minute.
	Log zerolog.Logger
	// Getenv reads OTEL_SDK_DISABLED; default: no variable is set. The
	// SDK reads the other OTEL_* variables from the process's
	// environment itself.
	Getenv func(string) string
}

// MaxContentChars bounds each captured argument or result on a span:
// trace stores cut or refuse larger attributes, and the audit log holds
// the whole.
const MaxContentChars = 8192

// Tracer makes the service's spans. Safe for concurrent use; nil is off.
type Tracer struct {
	tracer  trace.Tracer
	prop    propagation.TextMapPropagator
	capture bool
	redact  func(string) string
	// shutdown flushes and stops the SDK's provider; nil for a provider
	// the caller owns (NewWithProvider).
	shutdown func(context.Context) error
	// tools holds each tool's span name and start options (toolSpan).
	tools     sync.Map
	toolCount atomic.Int64
}

// New builds the SDK's tracer provider with an OTLP/HTTP exporter and a
// batching processor, or returns nil when o.Endpoint is empty or
// OTEL_SDK_DISABLED is true. The standard variables are honoured as the
// SDK reads them: OTEL_EXPORTER_OTLP_HEADERS (and _TRACES_HEADERS),
// _TIMEOUT, _COMPRESSION and _CERTIFICATE, OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES (over service.name=toolsvc), OTEL_TRACES_SAMPLER
// and _ARG (default parentbased_always_on), OTEL_BSP_* and the span limits.
// Close it with Shutdown, which sends what is queued.
func New(ctx context.Context, o Options) (*Tracer, error) {
	if o.Endpoint == "" {
		return nil, nil
	}
	if o.Getenv != nil && strings.EqualFold(strings.TrimSpace(o.Getenv("OTEL_SDK_DISABLED")), "true") {
		return nil, nil
	}
	endpoint, err := EndpointURL(o.Endpoint)
	if err != nil {
		return nil, err
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(endpoint))
	if err != nil {
		return nil, fmt.Errorf("TOOLSVC_OTEL_ENDPOINT: %w", err)
	}
	res, err := resource.New(ctx, resource.WithTelemetrySDK(),
		resource.WithAttributes(attribute.String("service.name", "toolsvc"), attribute.String("service.version", o.ServiceVersion)),
		resource.WithFromEnv())
	if err != nil && res == nil {
		// A partial resource (a malformed OTEL_RESOURCE_ATTRIBUTES entry)
		// comes with an error and is used; only none at all stops here.
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(&loggingExporter{SpanExporter: exp, log: o.Log}), sdktrace.WithResource(res))
	t := NewWithProvider(tp, o)
	t.shutdown = tp.Shutdown
	return t, nil
}

// EndpointURL is the URL spans are posted to for TOOLSVC_OTEL_ENDPOINT:
// /v1/traces added to a URL without a path.
func EndpointURL(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", errors.New("TOOLSVC_OTEL_ENDPOINT: must be an http:// or https:// URL, such as http://localhost:4318")
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	return u.String(), nil
}

// NewWithProvider returns a Tracer making its spans with tp, which the
// caller owns and shuts down (tests pass one with a synchronous exporter).
// o.Endpoint is not used.
func NewWithProvider(tp trace.TracerProvider, o Options) *Tracer {
	redact := o.Redact
	if redact == nil {
		redact = func(s string) string { return s }
	}
	return &Tracer{
		tracer:  tp.Tracer(ScopeName, trace.WithInstrumentationVersion(o.ServiceVersion)),
		prop:    propagation.TraceContext{},
		capture: o.CaptureContent,
		redact:  redact,
	}
}

// Shutdown sends the spans still queued and stops the exporter, within
// ctx's deadline. Nil and a Tracer of NewWithProvider have nothing to do.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil || t.shutdown == nil {
		return nil
	}
	return t.shutdown(ctx)
}

// CapturesContent reports whether arguments and results go on spans.
func (t *Tracer) CapturesContent() bool { return t != nil && t.capture }

// content is text captured for a span: redacted, then cut.
func (t *Tracer) content(s string) string {
	s = t.redact(s)
	if len(s) > MaxContentChars {
		cut := MaxContentChars
		for cut > 0 && s[cut]&0xC0 == 0x80 {
			cut-- // not inside a UTF-8 sequence
		}
		s = s[:cut] + "…[cut]"
	}
	return s
}

// loggingExporter logs the exporter's failures to the service's log, at
// most once a minute, instead of the SDK's global error handler (the
// standard library's log on stderr), which a library must not replace.
type loggingExporter struct {
	sdktrace.SpanExporter
	log    zerolog.Logger
	last   atomic.Int64 // unix nanoseconds of the last line
	missed atomic.Int64 // failures not logged since
}

func (e *loggingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.SpanExporter.ExportSpans(ctx, spans)
	if err == nil {
		return nil
	}
	now := time.Now().UnixNano()
	if last := e.last.Load(); now-last < int64(time.Minute) || !e.last.CompareAndSwap(last, now) {
		e.missed.Add(1)
		return nil
	}
	e.log.Warn().Err(err).Int("spans", len(spans)).Int64("failures_not_logged", e.missed.Swap(0)).
		Msg("traces: the OTLP endpoint did not take the spans; they are dropped")
	return nil
}
