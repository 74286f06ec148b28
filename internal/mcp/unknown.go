package mcp

import (
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/countbot/toolsvc/internal/registry"
)

// unknownTool is the answer to a tools/call of a name the key may call no
// tool by: the SDK's own (the protocol's invalid-params error, "unknown
// tool" and the name), with the closest names the key may call, as the
// REST door gives them. A tool the key may not call gets this answer too,
// and never learns of tools it may not call: the names come from the
// key's tools only.
func unknownTool(reg *registry.Registry, key, name string) *jsonrpc.Error {
	msg := fmt.Sprintf("unknown tool %q", name)
	if near := reg.ClosestNamesFor(key, name); len(near) > 0 {
		msg += fmt.Sprintf("; did you mean %s?", strings.Join(near, " or "))
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msg}
}
