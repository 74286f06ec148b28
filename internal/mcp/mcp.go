// Package mcp offers the registry's tools over the Model Context Protocol
// (Streamable HTTP transport, stateless, JSON responses): tools/list gives
// every tool with its schema and tools/call runs one call through the same
// path as POST /tools/{name}/invoke, so that validation, the audit log,
// limits and redaction are the same whichever door a call comes through.
package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countbot/toolsvc/internal/approval"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/toolerr"
	"github.com/countbot/toolsvc/internal/tracing"
)

// Invoker runs one call of the tool t (looked up once, by the handler)
// through the service's gate. ctx carries what the gate read from the MCP
// request (the call's facts): the SDK hands its request's context values
// on to the tool handler. refused is non-empty when the call was not run
// (too many calls at once, shutting down): a message the model can act on.
type Invoker func(ctx context.Context, t registry.Target, args []byte) (res registry.Result, refused string)

// Options configure the handler.
type Options struct {
	Registry *registry.Registry
	Invoke   Invoker
	Version  string
	// MaxBodyBytes bounds a request's body (413 above it).
	MaxBodyBytes int64
	// Key returns the name of the caller's key from a request's context:
	// tools/list shows it, and tools/call runs, only the tools its policy
	// lets it call (the registry's FindFor and SnapshotFor). Nil: every
	// caller is the same.
	Key func(ctx context.Context) string
	// Denied, when set, is told of a tools/call of a tool the key may not
	// call, before it is answered as an unknown tool, so that the refusal
	// is recorded.
	Denied func(ctx context.Context, t registry.Target)
	// Approvals, when set, lets a client of protocol 2026-07-28 or later
	// put a held call to its user and decide it with the answer (see
	// approval.go). Nil: held calls are answered as over REST.
	Approvals *approval.Service
	// SealKey seals the requestState of such a question
	// (approval.SealKeyBytes bytes); empty: a random key of this process.
	SealKey []byte
	// Tracer, when set, gives every request its MCP server span (see
	// trace.go), the child of the trace context in its _meta. Nil: none.
	Tracer *tracing.Tracer

	holds *holds // built by NewHandler
}

const instructions = "These are toolsvc's tools. Arguments are checked against each tool's input schema; " +
	"a call that fails (bad arguments, a refused path, a timeout) comes back as an error result " +
	"whose text says what went wrong and what to do next. A command that ran is a success whatever " +
	"its exit status, which the text gives (exit_code in the result's metadata)."

// Handler is the MCP endpoint. A plain tools/call (the request nearly
// every call is) is answered by the handler itself: the body is decoded
// once and the result written straight out, with the same gate and the
// same result as the SDK gives. Everything else (initialize, tools/list,
// batches, notifications, newer protocol versions, anything unusual) goes
// to the SDK's stateless Streamable HTTP handler, which builds a session
// for each request and decodes the body several times: about 30 times the
// memory and twice the time of a call.
type Handler struct {
	opts Options
	sdk  http.Handler
	// noFastPath sends every request to the SDK (tests compare the two).
	noFastPath bool
	respBufs   sync.Pool // *[]byte: the fast path's response buffers

	mu  sync.Mutex
	gen uint64
	// servers are the MCP servers of generation gen, by view: "" for the
	// keys that see every tool, the key's name for one that sees some.
	servers map[string]*sdk.Server
}

// NewHandler returns the MCP endpoint's handler. It offers the tools
// registered when a request comes: the server describing them is built
// again when the registry's generation changes (tools from a file
// reloaded), and kept while it does not.
func NewHandler(opts Options) *Handler {
	opts.holds = newHolds(opts)
	h := &Handler{opts: opts}
	h.current("") // built now, so that the first request does not wait
	h.sdk = fixErrors(sdk.NewStreamableHTTPHandler(func(r *http.Request) *sdk.Server { return h.current(h.key(r.Context())) },
		&sdk.StreamableHTTPOptions{
			Stateless:           true,
			JSONResponse:        true,
			MaxRequestBodyBytes: opts.MaxBodyBytes,
			// A client that goes away cancels its call, as over REST.
			PropagateRequestCancellation: true,
			// The HTTP handler's guard checks Origin and Host on every route,
			// this one included, with the operator's allowed hosts; the SDK's
			// own check, which knows none, would refuse them.
			DisableLocalhostProtection: true,
		}))
	return h
}

// key is the name of the caller's key, "" without Options.Key.
func (h *Handler) key(ctx context.Context) string {
	if h.opts.Key == nil {
		return ""
	}
	return h.opts.Key(ctx)
}

// current is the server for the registry's generation that offers the
// tools the key named key may call. Keys that see every tool share one.
func (h *Handler) current(key string) *sdk.Server {
	reg := h.opts.Registry
	view := key
	if reg.SeesAll(key) {
		view = ""
	}
	g := reg.Generation()
	h.mu.Lock()
	defer h.mu.Unlock()
	if g != h.gen || h.servers == nil {
		h.gen, h.servers = g, map[string]*sdk.Server{}
	}
	srv := h.servers[view]
	if srv == nil {
		gen, defs := reg.SnapshotFor(view)
		srv = newServer(h.opts, defs)
		if gen == h.gen {
			h.servers[view] = srv
		}
	}
	return srv
}

// ServeBody answers an MCP request whose body has already been read (and
// bounded) by the caller.
func (h *Handler) ServeBody(w http.ResponseWriter, r *http.Request, body []byte) {
	if !h.noFastPath {
		// A tool that is not registered is left to the SDK, whose answer
		// (a JSON-RPC error) is the protocol's.
		if c, ok := plainCall(r, body); ok {
			t := h.opts.Registry.FindFor(h.key(r.Context()), c.name)
			if t.Found() {
				h.call(w, r, t, c)
				return
			}
			h.denied(r, t)
		} else {
			h.deniedCall(r, body)
		}
	} else {
		h.deniedCall(r, body)
	}
	r = h.withSDKRequest(r, body)
	r = r.WithContext(context.WithValue(r.Context(), requestKey{}, r.Context()))
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	h.sdk.ServeHTTP(w, r)
}

// deniedCall tells Denied of a tools/call the SDK is about to answer, when
// it names a tool the key may not call. The envelope reader takes a
// plain call only; one it does not take (with _meta, say) is decoded
// whole, as the SDK is about to do anyway.
func (h *Handler) deniedCall(r *http.Request, body []byte) {
	key := h.key(r.Context())
	if h.opts.Denied == nil || h.opts.Registry.SeesAll(key) {
		return // nothing is denied to the key
	}
	var name string
	if msg, params, ok := readEnvelope(body); ok {
		if string(msg[2]) != `"tools/call"` || len(params[0]) < 2 || params[0][0] != '"' {
			return
		}
		name = string(params[0][1 : len(params[0])-1])
	} else {
		var m struct {
			Method string `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &m) != nil || m.Method != "tools/call" || m.Params.Name == "" {
			return
		}
		name = m.Params.Name
	}
	h.denied(r, h.opts.Registry.FindFor(key, name))
}

func (h *Handler) denied(r *http.Request, t registry.Target) {
	if t.Denied() && h.opts.Denied != nil {
		h.opts.Denied(r.Context(), t)
	}
}

// call runs a plain tools/call of t and writes its JSON-RPC response as
// the SDK's handler would.
func (h *Handler) call(w http.ResponseWriter, r *http.Request, t registry.Target, c toolCall) {
	if h.opts.Tracer != nil {
		h.tracedCall(w, r, t, c)
		return
	}
	res, refused := h.opts.Invoke(r.Context(), t, c.args)
	h.answer(w, c, res, refused)
}

// answer writes the JSON-RPC response to the plain call c.
func (h *Handler) answer(w http.ResponseWriter, c toolCall, res registry.Result, refused string) {
	hd := w.Header()
	hd.Set("Cache-Control", "no-cache, no-transform")
	hd.Set("Content-Type", "application/json")
	if e := rateLimited(res, refused); e != nil {
		b, _ := marshal(errorResponse{JSONRPC: "2.0", ID: c.id, Error: e}) // plain values: cannot fail
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(b)
		return
	}
	if res.Status == registry.StatusApprovalRequired && refused == "" {
		// Rare: encoded as the SDK encodes it, not by hand.
		b, _ := marshal(heldResponse{JSONRPC: "2.0", ID: c.id, Result: heldResult(res, "")}) // plain values: cannot fail
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(b)
		return
	}
	w.WriteHeader(http.StatusOK)
	writeResponse(w, &h.respBufs, c.id, result(res, refused))
}

// newServer is an MCP server offering defs.
func newServer(opts Options, defs []registry.Definition) *sdk.Server {
	// Tools, without listChanged: a stateless server holds no stream to
	// send that notification on, so it must not promise it.
	srv := sdk.NewServer(&sdk.Implementation{Name: "toolsvc", Version: opts.Version},
		&sdk.ServerOptions{Instructions: instructions, Capabilities: &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{}}})
	for _, def := range defs {
		a := def.Annotations
		srv.AddTool(&sdk.Tool{
			Name:        def.Function.Name,
			Title:       a.Title,
			Description: def.Function.Description,
			InputSchema: def.Function.Parameters,
			Annotations: &sdk.ToolAnnotations{
				Title:           a.Title,
				ReadOnlyHint:    a.ReadOnly,
				DestructiveHint: &a.Destructive,
				IdempotentHint:  a.Idempotent,
				OpenWorldHint:   &a.OpenWorld,
			},
		}, handler(opts.Registry, opts.holds))
	}
	srv.AddReceivingMiddleware(toolsOnly, tiedToRequest, traced(opts), pendingCalls(opts))
	return srv
}

// requestKey carries, into the SDK's handlers, the context of the HTTP
// request that brought the message.
type requestKey struct{}

// tiedToRequest ends a tools/call when the HTTP request that brought it
// ends (its client went away, or the service stops): the SDK ties the
// calls of protocol versions before 2026-07-28 to no request, so that one
// it answers (a call with a progress token in its _meta) would otherwise
// run to its deadline while a plain one, on the fast path, is stopped.
func tiedToRequest(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		rc, ok := ctx.Value(requestKey{}).(context.Context)
		if !ok || method != "tools/call" {
			return next(ctx, method, req)
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(rc, cancel)
		defer stop()
		return next(ctx, method, req)
	}
}

// undeclared reports whether method belongs to a capability the server
// does not declare (it offers tools only). The SDK answers their lists
// with empty ones all the same; the protocol asks for "method not found",
// which tells a client there is nothing to look for.
func undeclared(method string) bool {
	switch method {
	case "prompts/list", "prompts/get", "resources/list", "resources/read", "resources/templates/list",
		"resources/subscribe", "resources/unsubscribe", "completion/complete":
		return true
	}
	return false
}

// toolsOnly answers the methods of undeclared capabilities with the
// JSON-RPC error -32601.
func toolsOnly(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		if undeclared(method) {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found: " + method + " (this server offers tools only)"}
		}
		return next(ctx, method, req)
	}
}

// pendingCalls sends a tools/call of a tool the registry's Fallback
// answers for (an MCP server of the tools file still starting, or down)
// to the registry, as the fast path does: such a tool is in no listing,
// so the SDK, which answers from the list it was given, would call it
// unknown, and the model would not learn to wait for it.
func pendingCalls(opts Options) sdk.Middleware {
	return func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			call, ok := req.(*sdk.CallToolRequest)
			if !ok || method != "tools/call" || call.Params == nil {
				return next(ctx, method, req)
			}
			key := ""
			if opts.Key != nil {
				key = opts.Key(ctx)
			}
			t := opts.Registry.FindFor(key, call.Params.Name)
			if !t.Found() {
				return nil, unknownTool(opts.Registry, key, call.Params.Name)
			}
			if !t.Pending() {
				// The tool handler runs on this look-up: one per call.
				return next(context.WithValue(ctx, targetKey{}, t), method, req)
			}
			res, refused := opts.Invoke(ctx, t, call.Params.Arguments)
			if e := rateLimited(res, refused); e != nil {
				return nil, e
			}
			if res.Status == registry.StatusApprovalRequired && refused == "" {
				return heldResult(res, ""), nil
			}
			return result(res, refused).sdk(), nil
		}
	}
}

// targetKey carries, in a tools/call's context, the Target pendingCalls
// looked up, so that the tool handler does not look it up again.
type targetKey struct{}

// handler is the SDK's tool handler: the same result as the fast path
// (see result), and for a held call the question or the wait (see
// holds.call). The SDK has found the tool in its own list; the registry
// was asked once, by pendingCalls, for the Target the call runs on.
func handler(reg *registry.Registry, ho *holds) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		t, ok := ctx.Value(targetKey{}).(registry.Target)
		if !ok || t.Name() != req.Params.Name {
			t = reg.Find(req.Params.Name)
		}
		return ho.call(ctx, req, t)
	}
}

// CodeRateLimited is the JSON-RPC error code of a tools/call the key
// policy held back (over the key's rate or its calls at once): one of the
// codes JSON-RPC leaves to servers. Its data says why ("rate" or
// "concurrency" is not told apart: "rate_limited") and retry_after, the
// seconds to wait.
const CodeRateLimited = -32029

// rateLimited is the JSON-RPC error of a call the key policy held back,
// or nil.
func rateLimited(res registry.Result, refused string) *jsonrpc.Error {
	if refused != "" || res.Error == nil || res.Error.Code != toolerr.RateLimited {
		return nil
	}
	data, _ := json.Marshal(rateLimitedData{Code: toolerr.RateLimited, RetryAfter: registry.RetrySeconds(res.RetryAfter)}) // plain values: cannot fail
	return &jsonrpc.Error{Code: CodeRateLimited, Message: res.Error.Message, Data: data}
}

// rateLimitedData is the data of a rate_limited JSON-RPC error.
type rateLimitedData struct {
	Code       string `json:"code"`
	RetryAfter int64  `json:"retry_after"`
}

// errorResponse is a JSON-RPC error response as the SDK writes it.
type errorResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   *jsonrpc.Error  `json:"error"`
}
