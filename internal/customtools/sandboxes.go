package customtools

import (
	"fmt"
	"sync"

	"github.com/countbot/toolsvc/internal/sandbox"
)

// ExecSandboxes gives command tools exec's sandbox with the network off,
// on, or only through the service's proxy (an allowlist): exec's own for
// its setting, and for another one like it (the same mode, paths, user
// and limits), made when a tool first asks for it. CommandDeps.Sandbox
// takes its For, CommandDeps.AllowSandbox its Allow. It is safe for
// concurrent use.
type ExecSandboxes struct {
	own  *sandbox.Sandbox
	opts sandbox.Options // what own was made from

	mu    sync.Mutex
	other map[netKind]*sandbox.Sandbox
}

// netKind is a sandbox's network: off, on, or an allowlist.
type netKind int

const (
	netOff netKind = iota
	netOn
	netAllow
)

func (k netKind) String() string { return [...]string{"off", "on", "allowlist"}[k] }

// NewExecSandboxes returns the sandboxes of exec's own, made from opts.
func NewExecSandboxes(own *sandbox.Sandbox, opts sandbox.Options) *ExecSandboxes {
	return &ExecSandboxes{own: own, opts: opts, other: map[netKind]*sandbox.Sandbox{}}
}

// For returns the sandbox with the network on or off. A failure to make
// it is returned, and tried again at the next call.
func (x *ExecSandboxes) For(network bool) (*sandbox.Sandbox, error) {
	if network {
		return x.get(netOn)
	}
	return x.get(netOff)
}

// Allow returns the sandbox whose commands reach the network only
// through the service's proxy, each with the allowlist of its tool.
func (x *ExecSandboxes) Allow() (*sandbox.Sandbox, error) { return x.get(netAllow) }

func (x *ExecSandboxes) get(k netKind) (*sandbox.Sandbox, error) {
	if k == x.kindOf(x.own) {
		return x.own, nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if sb := x.other[k]; sb != nil {
		return sb, nil
	}
	o := x.opts
	o.Mode, o.Network, o.Egress = x.own.Mode(), k == netOn, k == netAllow
	sb, err := sandbox.New(o)
	if err != nil {
		return nil, fmt.Errorf("the sandbox with the network %s: %w", k, err)
	}
	x.other[k] = sb
	return sb, nil
}

func (x *ExecSandboxes) kindOf(sb *sandbox.Sandbox) netKind {
	switch {
	case sb.Network():
		return netOn
	case sb.Egress():
		return netAllow
	}
	return netOff
}

// Close releases the sandboxes made here, not exec's own (exec closes
// it).
func (x *ExecSandboxes) Close() {
	x.mu.Lock()
	defer x.mu.Unlock()
	for k, sb := range x.other {
		sb.Close()
		delete(x.other, k)
	}
}
