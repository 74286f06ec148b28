package tracing

// The attributes the service puts on spans. Those in OpenTelemetry's
// namespaces are the semantic conventions' (the YAML in
// testdata/semconv, against which TestSpansFollowConventions checks every
// span); those under toolsvc. are the service's own, for what the
// conventions have no attribute for.
const (
	AttrErrorType = "error.type"

	// Generative AI: a tool's execution and a model call.
	AttrGenAIOperation     = "gen_ai.operation.name"
	AttrGenAIToolName      = "gen_ai.tool.name"
	AttrGenAIToolCallID    = "gen_ai.tool.call.id"
	AttrGenAIToolType      = "gen_ai.tool.type"
	AttrGenAIToolArgs      = "gen_ai.tool.call.arguments"
	AttrGenAIToolResult    = "gen_ai.tool.call.result"
	AttrGenAIProvider      = "gen_ai.provider.name"
	AttrGenAIRequestModel  = "gen_ai.request.model"
	AttrGenAIResponseModel = "gen_ai.response.model"
	AttrGenAIResponseID    = "gen_ai.response.id"
	AttrGenAIFinish        = "gen_ai.response.finish_reasons"
	AttrGenAIInputTokens   = "gen_ai.usage.input_tokens"
	AttrGenAIOutputTokens  = "gen_ai.usage.output_tokens"
	AttrGenAIConversation  = "gen_ai.conversation.id"

	// MCP and JSON-RPC.
	AttrMCPMethod          = "mcp.method.name"
	AttrMCPProtocolVersion = "mcp.protocol.version"
	AttrJSONRPCRequestID   = "jsonrpc.request.id"
	AttrRPCStatusCode      = "rpc.response.status_code"

	// HTTP, URLs and the network.
	AttrHTTPMethod        = "http.request.method"
	AttrHTTPRoute         = "http.route"
	AttrHTTPStatusCode    = "http.response.status_code"
	AttrURLPath           = "url.path"
	AttrURLScheme         = "url.scheme"
	AttrURLFull           = "url.full"
	AttrServerAddress     = "server.address"
	AttrServerPort        = "server.port"
	AttrClientAddress     = "client.address"
	AttrClientPort        = "client.port"
	AttrNetworkTransport  = "network.transport"
	AttrNetworkProtocol   = "network.protocol.name"
	AttrNetworkProtoVer   = "network.protocol.version"
	AttrProcessExitCode   = "process.exit.code"
	AttrUserAgentOriginal = "user_agent.original"

	// The service's own.
	AttrSandboxMode    = "toolsvc.sandbox.mode"      // exec: bwrap, landlock, none
	AttrNetguard       = "toolsvc.netguard.decision" // web_fetch: allowed or refused
	AttrScreenshotType = "toolsvc.screenshot.type"   // web or desktop
	AttrMCPServer      = "toolsvc.mcp.server"        // the mounted server's name in the tools file
	AttrErrorCode      = "toolsvc.error.code"        // a failed call's code (invalid_arguments, timeout, ...)
)

// Values of the attributes above.
const (
	OpExecuteTool = "execute_tool"
	OpChat        = "chat"
	// ErrorTypeTool is error.type of a call that ended in an error result
	// (the MCP conventions' value for a CallToolResult with isError), which
	// the doors still answer with HTTP 200.
	ErrorTypeTool  = "tool_error"
	ErrorTypeOther = "_OTHER"
	// NetguardAllowed and NetguardRefused are web_fetch's
	// toolsvc.netguard.decision.
	NetguardAllowed = "allowed"
	NetguardRefused = "refused"
)
