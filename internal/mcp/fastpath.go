package mcp

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countbot/toolsvc/internal/jsonx"
	"github.com/countbot/toolsvc/internal/registry"
)

// toolCall is a plain tools/call request: one JSON-RPC call with an ID,
// a tool name and arguments, nothing else.
type toolCall struct {
	id   json.RawMessage // as it goes back: an integer, or a string re-encoded
	name string
	args json.RawMessage // nil when the request had none, as the SDK passes it
	// traceparent and tracestate are the trace context the request's
	// _meta carried, the one _meta a plain call may have.
	traceparent, tracestate string
}

// legacyVersions are the protocol versions (the Mcp-Protocol-Version
// header; none means 2025-03-26) for which the SDK's stateless handler
// answers a tools/call with nothing but the call's result. Later versions
// add per-request metadata and header checks, which the SDK keeps.
var legacyVersions = map[string]bool{"": true, "2024-11-05": true, "2025-03-26": true, "2025-06-18": true, "2025-11-25": true}

// maxDepth is the SDK's bound on the nesting of a message; a deeper one is
// left to the SDK to refuse.
const maxDepth = 1000

// plainCall reports whether r is a plain tools/call that the SDK would run
// and answer with its result alone, and decodes it. Anything else
// (another method, a batch, a notification, other parameters, a _meta
// with more than a trace context, headers the SDK checks or refuses) is
// not: the SDK answers it.
func plainCall(r *http.Request, body []byte) (toolCall, bool) {
	h := r.Header
	if !legacyVersions[h.Get("Mcp-Protocol-Version")] || len(h.Values("Last-Event-ID")) > 0 {
		return toolCall{}, false
	}
	if ct := h.Get("Content-Type"); ct != "application/json" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return toolCall{}, false
		}
	}
	if !acceptsBoth(h.Values("Accept")) {
		return toolCall{}, false
	}
	msg, params, ok := readEnvelope(body)
	if !ok || string(msg[0]) != `"2.0"` || string(msg[2]) != `"tools/call"` || msg[1] == nil || params[0] == nil {
		return toolCall{}, false
	}
	// A name with an escape or that is not UTF-8 is read otherwise by
	// encoding/json (and names no tool): the SDK answers it.
	if len(params[0]) < 2 || params[0][0] != '"' || bytes.IndexByte(params[0], '\\') >= 0 || !utf8.Valid(params[0]) {
		return toolCall{}, false
	}
	id, ok := callID(msg[1])
	if !ok {
		return toolCall{}, false
	}
	c := toolCall{id: id, name: string(params[0][1 : len(params[0])-1]), args: params[1]}
	if params[2] != nil {
		if c.traceparent, c.tracestate, ok = traceMeta(params[2]); !ok {
			return toolCall{}, false
		}
	}
	return c, true
}

// callID is a request's ID as the response repeats it: an integer as
// sent, a string encoded again as the SDK encodes it. Other IDs (null,
// fractions, exponents, huge numbers) are left to the SDK.
func callID(raw json.RawMessage) (json.RawMessage, bool) {
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil, false
		}
		b, err := marshal(s)
		return b, err == nil
	}
	if _, err := strconv.ParseInt(string(raw), 10, 64); err != nil {
		return nil, false
	}
	return raw, true
}

// acceptsBoth is the SDK's check of Accept: it must take both JSON and an
// event stream.
func acceptsBoth(values []string) bool {
	var jsonOK, streamOK bool
	for _, value := range values {
		for _, raw := range strings.Split(value, ",") {
			base, _, _ := strings.Cut(strings.TrimSpace(raw), ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return jsonOK && streamOK
}

// callResult is a call's result over MCP: the text a model reads, and
// isError for every call the tool could not carry out (a command that ran
// and exited non-zero is no error: its exit_code says how it ended). The
// call's bookkeeping (ID, status, error code, duration, exit code) is the
// _meta of the text block, not of the result: clients hand a result's own
// _meta and structuredContent to their model beside the text (LangChain's
// MCP adapter makes them one JSON object), while a content block's _meta
// stays with the client. A call the gate refused has no _meta.
type callResult struct {
	Content []textContent `json:"content"`
	IsError bool          `json:"isError,omitempty"`
}

// callMeta is the text block's _meta, its keys in the order the SDK writes
// a map's.
type callMeta struct {
	CallID     string  `json:"call_id"`
	DurationMS int64   `json:"duration_ms"`
	ErrorCode  *string `json:"error_code,omitempty"`
	ExitCode   *int    `json:"exit_code,omitempty"`
	Status     string  `json:"status"`
}

// textContent is a text block as the SDK's TextContent writes it.
type textContent struct {
	Type string    `json:"type"`
	Text string    `json:"text"`
	Meta *callMeta `json:"_meta,omitempty"`
}

// MarshalJSON escapes <, > and & in the text, as the SDK's TextContent
// does (it uses json.Marshal, unlike the rest of its messages), so that a
// result reads the same over both paths.
func (c textContent) MarshalJSON() ([]byte, error) {
	type plain textContent
	return json.Marshal(plain(c))
}

// result is the MCP result of a call the gate ran, or refused.
func result(res registry.Result, refused string) callResult {
	if refused != "" {
		return callResult{IsError: true, Content: []textContent{{Type: "text", Text: "Error: " + refused}}}
	}
	m := &callMeta{CallID: res.CallID, Status: res.Status, DurationMS: res.DurationMS, ExitCode: res.ExitCode}
	if res.Error != nil {
		m.ErrorCode = &res.Error.Code
	}
	return callResult{IsError: res.Status != registry.StatusSuccess, Content: []textContent{{Type: "text", Text: res.Result, Meta: m}}}
}

// sdk is the result as the SDK's tool handler returns it.
func (c callResult) sdk() *sdk.CallToolResult {
	text := &sdk.TextContent{Text: c.Content[0].Text}
	if m := c.Content[0].Meta; m != nil {
		text.Meta = sdk.Meta{"call_id": m.CallID, "status": m.Status, "duration_ms": m.DurationMS}
		if m.ErrorCode != nil {
			text.Meta["error_code"] = *m.ErrorCode
		}
		if m.ExitCode != nil {
			text.Meta["exit_code"] = *m.ExitCode
		}
	}
	return &sdk.CallToolResult{IsError: c.IsError, Content: []sdk.Content{text}}
}

// response is a JSON-RPC response carrying a call's result.
type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  callResult      `json:"result"`
}

// writeResponse encodes the response, by hand into a pooled buffer (a
// call's result is most of what the server does for it besides the
// tool; reflection and the text block's MarshalJSON, whose output
// encoding/json scans again, took about a tenth of a small call), and
// writes it to w. The bytes are those of marshal(response{...}), which
// TestAppendResponseMatchesMarshal checks.
func writeResponse(w io.Writer, bufs *sync.Pool, id json.RawMessage, res callResult) {
	var b []byte
	bp, _ := bufs.Get().(*[]byte)
	if bp != nil {
		b = (*bp)[:0]
	}
	b = appendResponse(b, id, res)
	_, _ = w.Write(b)
	if cap(b) > maxPooledResponse {
		return
	}
	if bp == nil {
		bp = new([]byte)
	}
	*bp = b
	bufs.Put(bp)
}

// maxPooledResponse is the largest response buffer kept for another
// call; a larger one is left to the collector.
const maxPooledResponse = 64 << 10

// appendResponse appends the JSON-RPC response carrying res: the SDK's
// field order, the text and the _meta strings escaped as json.Marshal
// escapes them (see textContent.MarshalJSON), the rest unescaped.
func appendResponse(b []byte, id json.RawMessage, res callResult) []byte {
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"result":{"content":[`...)
	for i, c := range res.Content {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"type":`...)
		b = jsonx.AppendStringHTML(b, c.Type)
		b = append(b, `,"text":`...)
		b = jsonx.AppendStringHTML(b, c.Text)
		if m := c.Meta; m != nil {
			b = append(b, `,"_meta":{"call_id":`...)
			b = jsonx.AppendStringHTML(b, m.CallID)
			b = append(b, `,"duration_ms":`...)
			b = strconv.AppendInt(b, m.DurationMS, 10)
			if m.ErrorCode != nil {
				b = append(b, `,"error_code":`...)
				b = jsonx.AppendStringHTML(b, *m.ErrorCode)
			}
			if m.ExitCode != nil {
				b = append(b, `,"exit_code":`...)
				b = strconv.AppendInt(b, int64(*m.ExitCode), 10)
			}
			b = append(b, `,"status":`...)
			b = jsonx.AppendStringHTML(b, m.Status)
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	b = append(b, ']')
	if res.IsError {
		b = append(b, `,"isError":true`...)
	}
	return append(b, "}}"...)
}

// marshal encodes v as the SDK's messages are encoded.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'}), nil
}
