package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/tracing"
)

// traceMeta reads a tools/call's _meta that carries a trace context and
// nothing else (traceparent and tracestate, strings, as the MCP semantic
// conventions put them there): such a call is still plain. Any other
// _meta (a progressToken, say) is the SDK's to act on.
func traceMeta(raw []byte) (traceparent, tracestate string, ok bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return "", "", false
	}
	for k, v := range m {
		var s string
		if json.Unmarshal(v, &s) != nil {
			return "", "", false
		}
		switch k {
		case tracing.MetaTraceparent:
			traceparent = s
		case tracing.MetaTracestate:
			tracestate = s
		default:
			return "", "", false
		}
	}
	return traceparent, tracestate, true
}

// tracedCall is call in the MCP server span of the request, the child of
// the trace context in its _meta (or else in its traceparent header).
func (h *Handler) tracedCall(w http.ResponseWriter, r *http.Request, t registry.Target, c toolCall) {
	ctx, span := h.opts.Tracer.StartMCPServer(r.Context(), r, tracing.MCPRequest{
		Method: "tools/call", Tool: c.name, RequestID: idText(c.id),
		ProtocolVersion: r.Header.Get("Mcp-Protocol-Version"),
		Traceparent:     c.traceparent, Tracestate: c.tracestate,
	})
	res, refused := h.opts.Invoke(ctx, t, c.args)
	h.answer(w, c, res, refused)
	span.EndMCP(callOutcome(res, refused))
}

// callOutcome is what the span of a call says of how it ended: a
// JSON-RPC error's code (a rate_limited call), or an error result.
func callOutcome(res registry.Result, refused string) (isError bool, rpcCode int64, message string) {
	if e := rateLimited(res, refused); e != nil {
		return false, e.Code, e.Message
	}
	if refused != "" {
		return true, 0, "refused by the gate"
	}
	if res.Error != nil && res.Status != registry.StatusApprovalRequired {
		return true, 0, res.Error.Code
	}
	return false, 0, ""
}

// idText is a JSON-RPC ID as jsonrpc.request.id holds it: a string's
// text, a number's digits.
func idText(raw json.RawMessage) string {
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	}
	return string(raw)
}

// sdkRequest is what the SDK's path keeps of the HTTP request for the
// spans its receiving middleware makes: the request (its headers and
// peer) and the JSON-RPC ID of a single message.
type sdkRequest struct {
	r  *http.Request
	id string
}

type sdkRequestKey struct{}

// withSDKRequest returns r carrying what traced needs of it, when the
// handler traces.
func (h *Handler) withSDKRequest(r *http.Request, body []byte) *http.Request {
	if h.opts.Tracer == nil {
		return r
	}
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	in := &sdkRequest{r: r}
	if json.Unmarshal(body, &m) == nil && m.ID != nil {
		in.id = idText(m.ID)
	}
	return r.WithContext(context.WithValue(r.Context(), sdkRequestKey{}, in))
}

// traced gives every request the SDK answers (initialize, tools/list,
// tools/call, notifications) its MCP server span, as the fast path gives
// a plain call. Without a Tracer it adds nothing.
func traced(opts Options) sdk.Middleware {
	return func(next sdk.MethodHandler) sdk.MethodHandler {
		if opts.Tracer == nil {
			return next
		}
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			in, _ := ctx.Value(sdkRequestKey{}).(*sdkRequest)
			if in == nil {
				return next(ctx, method, req)
			}
			m := tracing.MCPRequest{Method: method, RequestID: in.id, ProtocolVersion: in.r.Header.Get("Mcp-Protocol-Version")}
			if call, ok := req.(*sdk.CallToolRequest); ok && call.Params != nil {
				m.Tool = call.Params.Name
				carrier := tracing.MetaCarrier(call.Params.Meta)
				m.Traceparent, m.Tracestate = carrier.Get(tracing.MetaTraceparent), carrier.Get(tracing.MetaTracestate)
			}
			ctx, span := opts.Tracer.StartMCPServer(ctx, in.r, m)
			res, err := next(ctx, method, req)
			var rpcErr *jsonrpc.Error
			switch {
			case errors.As(err, &rpcErr):
				span.EndMCP(false, rpcErr.Code, rpcErr.Message)
			case err != nil:
				span.EndMCP(false, jsonrpc.CodeInternalError, "internal error")
			default:
				ctr, _ := res.(*sdk.CallToolResult)
				span.EndMCP(ctr != nil && ctr.IsError, 0, "")
			}
			return res, err
		}
	}
}
