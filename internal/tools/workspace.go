package tools

import (
	"context"

	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/workspace"
)

// callWorkspace returns the workspace the call works in: ws, or the key's
// own folder inside it when the key's policy gives it one, which is then
// the root of every path the call names.
func callWorkspace(ctx context.Context, ws *workspace.Workspace) (*workspace.Workspace, error) {
	call, _ := registry.CallFrom(ctx)
	return ws.Folder(call.Workspace)
}
