package mcpmount

import (
	"sync"

	"github.com/countbot/toolsvc/internal/sandbox"
)

// Sandboxes makes the sandboxes stdio servers run in from exec's options:
// one with the network off, one with it on and one whose commands reach
// only a proxy (an allowlist), each made on first use and shared by every
// server with that setting. It is safe for concurrent use.
type Sandboxes struct {
	opts sandbox.Options
	mu   sync.Mutex
	sb   [3]*sandbox.Sandbox
	err  [3]error
	done [3]bool
}

// NewSandboxes returns Sandboxes built from opts; opts.Network is ignored.
func NewSandboxes(opts sandbox.Options) *Sandboxes { return &Sandboxes{opts: opts} }

// For returns the sandbox with the network n. An error (no working
// sandbox in auto mode, an unavailable mode, no network namespace for an
// allowlist) is kept and returned again: the sandbox is tried once.
func (x *Sandboxes) For(n Net) (*sandbox.Sandbox, error) {
	i := int(n)
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.done[i] {
		o := x.opts
		o.Network, o.Egress = n == NetOn, n == NetAllow
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
