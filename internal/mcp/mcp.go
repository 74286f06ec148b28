// Package mcp offers the registry's tools over the Model Context Protocol
// (Streamable HTTP transport, stateless, JSON responses): tools/list gives
// every tool with its schema and tools/call runs one call through the same
// path as POST /tools/{name}/invoke, so that validation, the audit log,
// limits and redaction are the same whichever door a call comes through.
package mcp

import (
	"context"
	"net/http"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countbot/toolsvc/internal/registry"
)

// Invoker runs one call through the service's gate. ctx carries what the
// gate read from the MCP request (its metadata headers, the caller's key):
// the SDK hands its request's context values on to the tool handler.
// refused is non-empty when the call was not run (too many calls at once,
// shutting down): a message the model can act on.
type Invoker func(ctx context.Context, name string, args []byte) (res registry.Result, refused string)

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

// NewHandler returns the MCP endpoint's handler. It offers the tools
// registered when a request comes: the server describing them is built
// again when the registry's generation changes (tools from a file
// reloaded), and kept while it does not.
func NewHandler(opts Options) http.Handler {
	var (
		mu  sync.Mutex
		gen uint64
		srv *sdk.Server
	)
	current := func(*http.Request) *sdk.Server {
		g := opts.Registry.Generation()
		mu.Lock()
		defer mu.Unlock()
		if srv == nil || g != gen {
			var defs []registry.Definition
			gen, defs = opts.Registry.Snapshot()
			srv = newServer(opts, defs)
		}
		return srv
	}
	current(nil) // built now, so that the first request does not wait
	return fixErrors(sdk.NewStreamableHTTPHandler(current, &sdk.StreamableHTTPOptions{
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
		}, handler(opts.Invoke))
	}
	return srv
}

// handler turns a registry Result into an MCP result: the text a model
// reads, and isError for every call the tool could not carry out (a
// command that ran and exited non-zero is no error: its exit_code says
// how it ended). The call's bookkeeping (ID, status, error code,
// duration, exit code) is the _meta of the text block, not of the
// result: clients hand a result's own _meta and structuredContent to
// their model beside the text (LangChain's MCP adapter makes them one
// JSON object), while a content block's _meta stays with the client.
func handler(invoke Invoker) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		res, refused := invoke(ctx, req.Params.Name, req.Params.Arguments)
		if refused != "" {
			return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "Error: " + refused}}}, nil
		}
		meta := sdk.Meta{"call_id": res.CallID, "status": res.Status, "duration_ms": res.DurationMS}
		if res.Error != nil {
			meta["error_code"] = res.Error.Code
		}
		if res.ExitCode != nil {
			meta["exit_code"] = *res.ExitCode
		}
		return &sdk.CallToolResult{
			IsError: res.Status != registry.StatusSuccess,
			Content: []sdk.Content{&sdk.TextContent{Text: res.Result, Meta: meta}},
		}, nil
	}
}
