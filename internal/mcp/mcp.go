// Package mcp offers the registry's tools over the Model Context Protocol
// (Streamable HTTP transport, stateless, JSON responses): tools/list gives
// every tool with its schema and tools/call runs one call through the same
// path as POST /tools/{name}/invoke, so that validation, the audit log,
// limits and redaction are the same whichever door a call comes through.
package mcp

import (
	"context"
	"net/http"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countbot/toolsvc/internal/registry"
)

// Invoker runs one call through the service's gate. header is the MCP
// request's HTTP header (X-Session-ID names the session for the audit log).
// refused is non-empty when the call was not run (too many calls at once,
// shutting down): a message the model can act on.
type Invoker func(ctx context.Context, name string, args []byte, header http.Header) (res registry.Result, refused string)

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

// NewHandler returns the MCP endpoint's handler. The tools are those
// registered when it is called.
func NewHandler(opts Options) http.Handler {
	srv := sdk.NewServer(&sdk.Implementation{Name: "toolsvc", Version: opts.Version},
		&sdk.ServerOptions{Instructions: instructions, Capabilities: &sdk.ServerCapabilities{}})
	for _, def := range opts.Registry.Definitions() {
		srv.AddTool(&sdk.Tool{
			Name:        def.Function.Name,
			Description: def.Function.Description,
			InputSchema: def.Function.Parameters,
		}, handler(opts.Invoke))
	}
	return sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{
		Stateless:           true,
		JSONResponse:        true,
		MaxRequestBodyBytes: opts.MaxBodyBytes,
		// A client that goes away cancels its call, as over REST.
		PropagateRequestCancellation: true,
		// The HTTP handler's guard checks Origin and Host on every route,
		// this one included, with the operator's allowed hosts; the SDK's
		// own check, which knows none, would refuse them.
		DisableLocalhostProtection: true,
	})
}

// handler turns a registry Result into an MCP result: the text a model
// reads, isError for every failed call, and the call's ID, status and
// error code in _meta for the client.
func handler(invoke Invoker) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		var h http.Header
		if req.Extra != nil {
			h = req.Extra.Header
		}
		res, refused := invoke(ctx, req.Params.Name, req.Params.Arguments, h)
		if refused != "" {
			return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "Error: " + refused}}}, nil
		}
		meta := sdk.Meta{"call_id": res.CallID, "status": res.Status, "duration_ms": res.DurationMS}
		if res.Error != nil {
			meta["error_code"] = res.Error.Code
		}
		return &sdk.CallToolResult{
			Meta:    meta,
			IsError: res.Status != registry.StatusSuccess,
			Content: []sdk.Content{&sdk.TextContent{Text: res.Result}},
		}, nil
	}
}
