package mcpmount

import (
	"sync"

	"github.com/countbot/toolsvc/internal/sandbox"
)

// Sandboxes makes the sandboxes stdio servers run in from exec's options:
// one with the network off and one with it on, each made on first use and
// shared by every server with that setting. It is safe for concurrent use.
type Sandboxes struct {
	opts sandbox.Options
	mu   sync.Mutex
	sb   [2]*sandbox.Sandbox
	err  [2]error
	done [2]bool
}

// NewSandboxes returns Sandboxes built from opts; opts.Network is ignored.
func NewSandboxes(opts sandbox.Options) *Sandboxes { return &Sandboxes{opts: opts} }

// For returns the sandbox with the network on or off. An error (no
// working sandbox in auto mode, an unavailable mode) is kept and returned
// again: the sandbox is tried once.
func (x *Sandboxes) For(network bool) (*sandbox.Sandbox, error) {
	i := 0
	if network {
		i = 1
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.done[i] {
		o := x.opts
		o.Network = network
		x.sb[i], x.err[i] = sandbox.New(o)
		x.done[i] = true
	}
	return x.sb[i], x.err[i]
}

// Close releases the sandboxes (their control group folders). Call it
// after every server is closed.
func (x *Sandboxes) Close() {
	x.mu.Lock()
	defer x.mu.Unlock()
	for i, sb := range x.sb {
		if sb != nil {
			sb.Close()
			x.sb[i] = nil
		}
	}
}
