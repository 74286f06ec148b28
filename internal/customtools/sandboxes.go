package customtools

import (
	"fmt"
	"sync"

	"github.com/countbot/toolsvc/internal/sandbox"
)

// ExecSandboxes gives command tools exec's sandbox with the network on or
// off: exec's own for its setting, and for the other one like it (the
// same mode, paths, user and limits), made when a tool first asks for
// it. CommandDeps.Sandbox takes its For. It is safe for concurrent use.
type ExecSandboxes struct {
	own  *sandbox.Sandbox
	opts sandbox.Options // what own was made from

	mu    sync.Mutex
	other *sandbox.Sandbox
}

// NewExecSandboxes returns the sandboxes of exec's own, made from opts.
func NewExecSandboxes(own *sandbox.Sandbox, opts sandbox.Options) *ExecSandboxes {
	return &ExecSandboxes{own: own, opts: opts}
}

// For returns the sandbox with the network on or off. A failure to make
// the other one is returned, and tried again at the next call.
func (x *ExecSandboxes) For(network bool) (*sandbox.Sandbox, error) {
	if network == x.own.Network() {
		return x.own, nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.other == nil {
		o := x.opts
		o.Mode, o.Network = x.own.Mode(), network
		sb, err := sandbox.New(o)
		if err != nil {
			return nil, fmt.Errorf("the sandbox with the network %s: %w", onOff(network), err)
		}
		x.other = sb
	}
	return x.other, nil
}

// Close releases the sandbox For made, not exec's own (exec closes it).
func (x *ExecSandboxes) Close() {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.other != nil {
		x.other.Close()
		x.other = nil
	}
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
