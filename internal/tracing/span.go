package tracing

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/countbot/toolsvc/internal/toolerr"
)

// Span is one span the service made, or nothing: the zero Span (tracing
// off) ignores every call, so that code around it needs no check.
type Span struct {
	s trace.Span
	t *Tracer
	// ids: the span's IDs are worth recording (IDs): it is sampled, so
	// that a trace store will hold it.
	ids bool
}

// start starts a span named name as a child of ctx's span (a root span
// when ctx has none), and returns ctx carrying it.
func (t *Tracer) start(ctx context.Context, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) (context.Context, Span) {
	if leftOut(ctx) {
		return ctx, Span{}
	}
	ctx, s := t.tracer.Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
	return ctx, Span{s: s, t: t, ids: true}
}

// startBare starts a span as start does, without attributes, for a
// caller that sets them only when the span is recorded: building a door's
// attributes (its addresses split, the user agent redacted) costs more
// than the span the sampler leaves out. The conventions ask for some of
// them at the start, for samplers that read them; none of the samplers
// OTEL_TRACES_SAMPLER can name does (each decides by the parent and the
// trace ID), so what a trace store receives is the same.
func (t *Tracer) startBare(ctx context.Context, name string, kind trace.SpanKind) (context.Context, Span) {
	if leftOut(ctx) {
		return ctx, Span{}
	}
	ctx, s := t.tracer.Start(ctx, name, trace.WithSpanKind(kind))
	return ctx, Span{s: s, t: t, ids: true}
}

// leftOut reports whether ctx's span is one of this service's that the
// sampler left out. Its children would be left out too by every sampler
// OTEL_TRACES_SAMPLER names (the parent-based ones follow the parent; the
// ratio ones decide by the trace ID, which the children share), so they
// are not made at all: the zero Span, and ctx as it is, whose span
// context still travels on (a mounted server gets the unsampled flag).
// A caller's unsampled trace (remote) still gets the service's root-most
// span, which the caller's sampler does not decide for the service.
func leftOut(ctx context.Context) bool {
	sc := trace.SpanContextFromContext(ctx)
	return sc.IsValid() && !sc.IsSampled() && !sc.IsRemote()
}

// Recording reports whether the span is recorded (tracing on, and the
// sampler kept it): what is only worth building for a recorded span
// (captured content) waits for this.
func (s Span) Recording() bool { return s.s != nil && s.s.IsRecording() }

// IDs returns the span's trace and span IDs in lower-case hex, for the
// audit record, or empty strings for the zero Span and for a span the
// sampler left out (no trace store holds it, so its IDs would lead
// nowhere; the record keeps the caller's traceparent's trace ID).
func (s Span) IDs() (traceID, spanID string) {
	if s.s == nil || !s.ids {
		return "", ""
	}
	sc := s.s.SpanContext()
	if !sc.IsValid() {
		return "", ""
	}
	return sc.TraceID().String(), sc.SpanID().String()
}

// failed marks the span as failed with errType (error.type) and a short
// description for its status.
func (s Span) failed(errType, desc string) {
	s.s.SetAttributes(attribute.String(AttrErrorType, errType))
	s.s.SetStatus(codes.Error, desc)
}

// EndErr ends the span, failed when err is not nil (error.type from
// ErrorType).
func (s Span) EndErr(err error) {
	if s.s == nil {
		return
	}
	if err != nil {
		s.failed(ErrorType(err), ErrorType(err))
	}
	s.s.End()
}

// ErrorType is the low-cardinality error.type of err: the code of a
// *toolerr.Error in its chain (the codes a result's error carries, such
// as timeout or unavailable), timeout and canceled for the context's
// errors, and _OTHER (the conventions' fallback) for anything else, whose
// text could be anything.
func ErrorType(err error) string {
	var te *toolerr.Error
	switch {
	case errors.As(err, &te):
		return te.Code
	case errors.Is(err, context.DeadlineExceeded):
		return toolerr.Timeout
	case errors.Is(err, context.Canceled):
		return toolerr.Canceled
	}
	return ErrorTypeOther
}

// Follow returns ctx carrying the span context of from's span, when from
// has one: work that outlives a call (a sub-agent's task, run on a
// context of its own) makes its spans in the call's trace, as children of
// the call's span. ctx keeps its own deadline and cancellation.
func Follow(ctx, from context.Context) context.Context {
	sc := trace.SpanContextFromContext(from)
	if !sc.IsValid() {
		return ctx
	}
	return trace.ContextWithSpanContext(ctx, sc)
}
