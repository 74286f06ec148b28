package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// StartTool starts the span of one tool call, execute_tool {tool} (kind
// internal), as a child of the door's span in ctx. The registry starts it
// for every call, whichever door it came through, so that the tool's own
// spans hang below it and the audit record names it (IDs).
//
// A tool's span name and start options are made once and kept (up to
// maxToolSpans tools; names past that, which only unknown tools' can be,
// are made per call): a call then pays only for the SDK's span.
func (t *Tracer) StartTool(ctx context.Context, tool string) (context.Context, Span) {
	if t == nil || leftOut(ctx) {
		return ctx, Span{}
	}
	ts := t.toolSpan(tool)
	ctx, s := t.tracer.Start(ctx, ts.name, ts.opts...)
	return ctx, Span{s: s, t: t, ids: s.SpanContext().IsSampled()}
}

// maxToolSpans bounds the tools whose span options are kept.
const maxToolSpans = 1024

// toolSpan is a tool's span name and start options.
type toolSpan struct {
	name string
	opts []trace.SpanStartOption
}

func (t *Tracer) toolSpan(tool string) *toolSpan {
	if ts, ok := t.tools.Load(tool); ok {
		return ts.(*toolSpan)
	}
	ts := &toolSpan{name: OpExecuteTool + " " + tool, opts: []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(
			attribute.String(AttrGenAIOperation, OpExecuteTool),
			attribute.String(AttrGenAIToolName, tool),
			attribute.String(AttrGenAIToolType, "function")),
	}}
	if t.toolCount.Load() < maxToolSpans {
		if _, loaded := t.tools.LoadOrStore(tool, ts); !loaded {
			t.toolCount.Add(1)
		}
	}
	return ts
}

// ToolEnd is how a call ended, for its span.
type ToolEnd struct {
	CallID string
	// ErrorCode is the result's error code; empty on success.
	ErrorCode string
	// Arguments returns the call's arguments, redacted as in the audit
	// record; asked only when content is captured. Result is the result's
	// text, redacted already.
	Arguments func() string
	Result    string
}

// EndTool ends a call's span: a call that ended in an error result has
// error.type tool_error and its code (toolsvc.error.code), though every
// door answers it with HTTP 200.
func (s Span) EndTool(e ToolEnd) {
	if s.s == nil {
		return
	}
	if s.s.IsRecording() {
		s.s.SetAttributes(attribute.String(AttrGenAIToolCallID, e.CallID))
		if e.ErrorCode != "" {
			s.s.SetAttributes(attribute.String(AttrErrorType, ErrorTypeTool), attribute.String(AttrErrorCode, e.ErrorCode))
			s.s.SetStatus(codes.Error, e.ErrorCode)
		}
		if s.t.capture {
			if e.Arguments != nil {
				s.s.SetAttributes(attribute.String(AttrGenAIToolArgs, s.t.content(e.Arguments())))
			}
			s.s.SetAttributes(attribute.String(AttrGenAIToolResult, s.t.content(e.Result)))
		}
	}
	s.s.End()
}
