// Package callinfo holds the facts of one tool call that come with it from
// its caller rather than from its arguments: the name of the caller's key,
// the session and chat the call belongs to, and the request and trace that
// carried it. The HTTP gate builds one Facts per call; the registry hands
// it to the tool (registry.Call) and the audit log records it
// (audit.Record), both holding it as it is, so that a new fact is declared
// here once instead of being copied field by field from type to type.
package callinfo

import "github.com/countbot/toolsvc/internal/jsonx"

// Facts are what a call carries besides its tool and arguments. Every
// field but Key, Workspace and SpanID is text the caller sent (a header), bounded
// and stripped of control characters by the gate and of secrets by the
// registry. The json
// tags are the audit record's field names, which readers of the audit log
// depend on.
type Facts struct {
	// SessionID names the agent session (X-Session-ID); may be empty.
	SessionID string `json:"session_id"`
	// Source is the channel the session belongs to (X-Source); may be
	// empty.
	Source string `json:"source,omitempty"`
	// Key is the name of the API key the call came with (never the key);
	// empty when the service has no keys. Work a tool starts for the call
	// (a sub-agent task, a conversation) belongs to this key.
	Key string `json:"key,omitempty"`
	// Workspace is the key's own folder, relative to the service's
	// workspace, when its policy gives it one (slash-separated, such as
	// "tenants/alice"): the call's tools see that folder as their root.
	// Empty: the whole workspace. Set by the registry from the policy,
	// never by the caller.
	Workspace string `json:"workspace,omitempty"`
	// Channel and ChatID name the chat the session belongs to when the
	// caller says so outright (X-Channel, X-Chat-ID); send_media reads
	// them, or else the session ID.
	Channel string `json:"channel,omitempty"`
	ChatID  string `json:"chat_id,omitempty"`
	// ReplyTo names the platform message the call answers (X-Reply-To):
	// channels that thread replies, or that only allow replies, use it.
	ReplyTo string `json:"reply_to,omitempty"`
	// RequestID is the ID of the HTTP request that carried the call
	// (X-Request-ID: the client's when it sent a sane one, else one the
	// service made), which the access log line and the answer's header
	// show too.
	RequestID string `json:"request_id,omitempty"`
	// TraceID is the trace ID of the request's W3C traceparent header (32
	// lower-case hex digits), when it had a valid one, so that a call can
	// be found from the caller's trace.
	TraceID string `json:"trace_id,omitempty"`
	// SpanID is the span ID (16 lower-case hex digits) of the call's
	// execute_tool span when the service sends traces
	// (TOOLSVC_OTEL_ENDPOINT); TraceID is then that span's trace, the
	// caller's when it sent a traceparent. Set by the registry, never by
	// the caller.
	SpanID string `json:"span_id,omitempty"`
	// Approval is the ID of the approval the caller presents for the
	// call (X-Approval, or an MCP client's answer to the question the
	// service asked), when it resends a call that was held. The audit
	// record names it in its own member (audit.Approval), not here.
	Approval string `json:"-"`
}

// Clean returns f with fn applied to every field the caller wrote, that
// is every field but Key and Workspace (names the operator configured)
// and SpanID (the service's own). The registry
// passes its redaction, since these fields reach the audit log and the
// tool. Empty fields are left as they are, without a call.
func (f Facts) Clean(fn func(string) string) Facts {
	for _, p := range [...]*string{&f.SessionID, &f.Source, &f.Channel, &f.ChatID, &f.ReplyTo, &f.RequestID, &f.TraceID, &f.Approval} {
		if *p != "" {
			*p = fn(*p)
		}
	}
	return f
}

// AppendJSON appends f's members to b, each after a comma, as json.Marshal
// writes them (session_id always, the others when not empty) without its
// HTML escaping: the audit log's encoder writes a record's facts with it,
// so that the record holds every fact declared here.
// TestAppendJSONMatchesMarshal holds the two together.
func (f *Facts) AppendJSON(b []byte) []byte {
	b = append(b, `,"session_id":`...)
	b = jsonx.AppendString(b, f.SessionID)
	b = appendOmitEmpty(b, `,"source":`, f.Source)
	b = appendOmitEmpty(b, `,"key":`, f.Key)
	b = appendOmitEmpty(b, `,"workspace":`, f.Workspace)
	b = appendOmitEmpty(b, `,"channel":`, f.Channel)
	b = appendOmitEmpty(b, `,"chat_id":`, f.ChatID)
	b = appendOmitEmpty(b, `,"reply_to":`, f.ReplyTo)
	b = appendOmitEmpty(b, `,"request_id":`, f.RequestID)
	b = appendOmitEmpty(b, `,"trace_id":`, f.TraceID)
	return appendOmitEmpty(b, `,"span_id":`, f.SpanID)
}

func appendOmitEmpty(b []byte, name, v string) []byte {
	if v == "" {
		return b
	}
	b = append(b, name...)
	return jsonx.AppendString(b, v)
}
