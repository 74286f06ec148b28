package tracing

import (
	"context"
	"net/url"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// StartExec starts the span of one command exec runs: "exec", kind
// internal, with the sandbox mode it runs in (toolsvc.sandbox.mode). End
// it with EndExec.
func (t *Tracer) StartExec(ctx context.Context, sandboxMode string) (context.Context, Span) {
	if t == nil {
		return ctx, Span{}
	}
	return t.start(ctx, "exec", trace.SpanKindInternal, attribute.String(AttrSandboxMode, sandboxMode))
}

// EndExec ends a command's span: the command's exit status
// (process.exit.code) when it ran, err when it could not run or was
// stopped.
func (s Span) EndExec(exitCode int, ran bool, err error) {
	if s.s == nil {
		return
	}
	if ran {
		s.s.SetAttributes(attribute.Int(AttrProcessExitCode, exitCode))
	}
	s.EndErr(err)
}

// StartFetch starts the span of one page web_fetch gets: "GET", kind
// client, the HTTP client conventions' attributes for rawURL (without
// its user name and password, and redacted). The redirects the page
// takes are followed within the span.
func (t *Tracer) StartFetch(ctx context.Context, rawURL string) (context.Context, Span) {
	if t == nil {
		return ctx, Span{}
	}
	attrs := []attribute.KeyValue{attribute.String(AttrHTTPMethod, "GET"), attribute.String(AttrURLFull, t.safeURL(rawURL))}
	attrs = appendURLHost(attrs, rawURL)
	return t.start(ctx, "GET", trace.SpanKindClient, attrs...)
}

// EndFetch ends a page's span: the network guard's decision on it
// (toolsvc.netguard.decision: allowed, or refused when the URL, an
// address it resolved to or a redirect was refused), the response's
// status when one came, and err.
func (s Span) EndFetch(decision string, status int, err error) {
	if s.s == nil {
		return
	}
	s.s.SetAttributes(attribute.String(AttrNetguard, decision))
	if status > 0 {
		s.s.SetAttributes(attribute.Int(AttrHTTPStatusCode, status))
	}
	if err == nil && status >= 400 {
		// The HTTP client conventions' rule: a 4xx or 5xx answer fails a
		// client span, its status code the error.type.
		code := strconv.Itoa(status)
		s.failed(code, code)
	}
	s.EndErr(err)
}

// StartScreenshot starts the span of one capture: "screenshot", kind
// internal, with its type (toolsvc.screenshot.type, web or desktop) and,
// for a web page, its URL (redacted).
func (t *Tracer) StartScreenshot(ctx context.Context, kind, rawURL string) (context.Context, Span) {
	if t == nil {
		return ctx, Span{}
	}
	attrs := []attribute.KeyValue{attribute.String(AttrScreenshotType, kind)}
	if rawURL != "" {
		attrs = append(attrs, attribute.String(AttrURLFull, t.safeURL(rawURL)))
	}
	return t.start(ctx, "screenshot", trace.SpanKindInternal, attrs...)
}

// Chat is a model call, for its span.
type Chat struct {
	// Provider is gen_ai.provider.name ("openai" for an OpenAI-compatible
	// endpoint), Model the model asked for, BaseURL the endpoint.
	Provider, Model, BaseURL string
	// ConversationID names the sub-agent task or conversation the call
	// belongs to, when there is one.
	ConversationID string
}

// StartChat starts the span of one model call a sub-agent makes: "chat
// {model}", kind client, the GenAI inference conventions' attributes.
// End it with EndChat.
func (t *Tracer) StartChat(ctx context.Context, c Chat) (context.Context, Span) {
	if t == nil {
		return ctx, Span{}
	}
	attrs := []attribute.KeyValue{
		attribute.String(AttrGenAIOperation, OpChat),
		attribute.String(AttrGenAIProvider, c.Provider),
		attribute.String(AttrGenAIRequestModel, c.Model),
	}
	if c.BaseURL != "" {
		attrs = appendURLHost(attrs, c.BaseURL)
	}
	if c.ConversationID != "" {
		attrs = append(attrs, attribute.String(AttrGenAIConversation, c.ConversationID))
	}
	return t.start(ctx, OpChat+" "+c.Model, trace.SpanKindClient, attrs...)
}

// ChatEnd is what a model's answer said of itself.
type ChatEnd struct {
	ResponseID, ResponseModel string
	FinishReasons             []string
	// InputTokens and OutputTokens are the answer's usage; negative when
	// the endpoint gave none.
	InputTokens, OutputTokens int64
	// ErrorType is error.type of a failed call when the caller knows
	// better than ErrorType (the HTTP status of the endpoint's refusal).
	ErrorType string
}

// EndChat ends a model call's span with its answer's usage
// (gen_ai.usage.*), or with err.
func (s Span) EndChat(e ChatEnd, err error) {
	if s.s == nil {
		return
	}
	if err != nil {
		t := e.ErrorType
		if t == "" {
			t = ErrorType(err)
		}
		s.failed(t, t)
		s.s.End()
		return
	}
	if s.s.IsRecording() {
		attrs := make([]attribute.KeyValue, 0, 5)
		if e.ResponseID != "" {
			attrs = append(attrs, attribute.String(AttrGenAIResponseID, e.ResponseID))
		}
		if e.ResponseModel != "" {
			attrs = append(attrs, attribute.String(AttrGenAIResponseModel, e.ResponseModel))
		}
		if len(e.FinishReasons) > 0 {
			attrs = append(attrs, attribute.StringSlice(AttrGenAIFinish, e.FinishReasons))
		}
		if e.InputTokens >= 0 {
			attrs = append(attrs, attribute.Int64(AttrGenAIInputTokens, e.InputTokens))
		}
		if e.OutputTokens >= 0 {
			attrs = append(attrs, attribute.Int64(AttrGenAIOutputTokens, e.OutputTokens))
		}
		s.s.SetAttributes(attrs...)
	}
	s.s.End()
}

// safeURL is rawURL as a span may hold it: without user name and password
// (the HTTP conventions' rule for url.full), and redacted.
func (t *Tracer) safeURL(rawURL string) string {
	if u, err := url.Parse(rawURL); err == nil && u.User != nil {
		u.User = nil
		rawURL = u.String()
	}
	return t.redact(rawURL)
}

// appendURLHost appends server.address and server.port of rawURL (the
// scheme's port when it names none).
func appendURLHost(attrs []attribute.KeyValue, rawURL string) []attribute.KeyValue {
	u, err := url.Parse(rawURL)
	if err != nil || u.Hostname() == "" {
		return attrs
	}
	attrs = append(attrs, attribute.String(AttrServerAddress, u.Hostname()))
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		switch u.Scheme {
		case "http":
			port = 80
		case "https":
			port = 443
		default:
			return attrs
		}
	}
	return append(attrs, attribute.Int(AttrServerPort, port))
}
