// Package mcp offers the registry's tools over the Model Context Protocol
// (Streamable HTTP transport, stateless, JSON responses): tools/list gives
// every tool with its schema and tools/call runs one call through the same
// path as POST /tools/{name}/invoke, so that validation, the audit log,
// limits and redaction are the same whichever door a call comes through.
package mcp

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countbot/toolsvc/internal/registry"
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
}

const instructions = "These are toolsvc's tools. Arguments are checked against each tool's input schema; " +
	"a call that fails (bad arguments, a refused path, a failed command) comes back as an error result " +
	"whose text says what went wrong and what to do next."

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

	mu    sync.Mutex
	gen   uint64
	srv   *sdk.Server
	names map[string]bool // the tools srv offers
}

// NewHandler returns the MCP endpoint's handler. It offers the tools
// registered when a request comes: the server describing them is built
// again when the registry's generation changes (tools from a file
// reloaded), and kept while it does not.
func NewHandler(opts Options) *Handler {
	h := &Handler{opts: opts}
	h.current() // built now, so that the first request does not wait
	h.sdk = fixErrors(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { s, _ := h.current(); return s },
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

// current is the server for the registry's generation, and the names of
// the tools it offers.
func (h *Handler) current() (*sdk.Server, map[string]bool) {
	g := h.opts.Registry.Generation()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.srv == nil || g != h.gen {
		var defs []registry.Definition
		h.gen, defs = h.opts.Registry.Snapshot()
		h.srv = newServer(h.opts, defs)
		h.names = make(map[string]bool, len(defs))
		for _, d := range defs {
			h.names[d.Function.Name] = true
		}
	}
	return h.srv, h.names
}

// ServeBody answers an MCP request whose body has already been read (and
// bounded) by the caller.
func (h *Handler) ServeBody(w http.ResponseWriter, r *http.Request, body []byte) {
	if !h.noFastPath {
		// A tool that is not registered is left to the SDK, whose answer
		// (a JSON-RPC error) is the protocol's.
		if c, ok := plainCall(r, body); ok {
			if t := h.opts.Registry.Find(c.name); t.Found() {
				h.call(w, r, t, c)
				return
			}
		}
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	h.sdk.ServeHTTP(w, r)
}

// call runs a plain tools/call of t and writes its JSON-RPC response as
// the SDK's handler would.
func (h *Handler) call(w http.ResponseWriter, r *http.Request, t registry.Target, c toolCall) {
	res := result(h.opts.Invoke(r.Context(), t, c.args))
	hd := w.Header()
	hd.Set("Cache-Control", "no-cache, no-transform")
	hd.Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	writeResponse(w, &h.respBufs, c.id, res)
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
		}, handler(opts.Registry, opts.Invoke))
	}
	return srv
}

// handler is the SDK's tool handler: the same result as the fast path
// (see result). The SDK has found the tool in its own list; the registry
// is asked once, for the Target the call runs on.
func handler(reg *registry.Registry, invoke Invoker) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return result(invoke(ctx, reg.Find(req.Params.Name), req.Params.Arguments)).sdk(), nil
	}
}
