package tools

import (
	"fmt"
	"net"
	"strings"
	"sync"

	"github.com/countbot/toolsvc/internal/egress"
	"github.com/countbot/toolsvc/internal/sandbox"
)

// This file is the network allowlist of exec's run path: a command whose
// sandbox has Egress finds the service's proxy at sandbox.EgressAddr in
// its own network namespace, through the variables programs read for a
// proxy, and the proxy judges each connection by the allowlist and then
// by the network guard. What the proxy refused is told to the model.

// proxyURL is the proxy as the variables give it.
const proxyURL = "http://" + sandbox.EgressAddr

// proxyEnv are the variables that send a command's programs to the
// proxy (see egress.Env).
var proxyEnv = egress.Env(proxyURL)

// maxRefusals bounds the refusals one call remembers for its result.
const maxRefusals = 10

// callProxy serves one command's proxy listener with the allowlist of
// opts, and keeps what it refused.
type callProxy struct {
	p     *egress.Proxy
	done  chan struct{}
	mu    sync.Mutex
	seen  []string // refusals as the model is told them, the first maxRefusals
	total int
}

// serveEgress starts the proxy of one command on l (nil: the command has
// no allowlist, and nil is returned).
func serveEgress(l net.Listener, opts *egress.Options) *callProxy {
	if l == nil || opts == nil {
		return nil
	}
	cp := &callProxy{done: make(chan struct{})}
	o := *opts
	o.OnRefusal = cp.refused
	cp.p = egress.New(o)
	go func() {
		defer close(cp.done)
		_ = cp.p.Serve(l)
	}()
	return cp
}

func (cp *callProxy) refused(r egress.Refusal) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.total++
	if len(cp.seen) < maxRefusals {
		cp.seen = append(cp.seen, r.String())
	}
}

// stop ends the proxy and returns what it refused, for the result: ""
// when nothing was.
func (cp *callProxy) stop() string {
	if cp == nil {
		return ""
	}
	_ = cp.p.Close()
	<-cp.done
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.total == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n\nNETWORK: the allowlist refused %d connection(s):", cp.total)
	for _, s := range cp.seen {
		b.WriteString("\n- " + s)
	}
	if cp.total > len(cp.seen) {
		fmt.Fprintf(&b, "\n- ... and %d more", cp.total-len(cp.seen))
	}
	b.WriteString("\nNext: reach only the hosts the allowlist allows (the rule above says which matched); ask the user to have a host added if the task needs it.")
	return b.String()
}
