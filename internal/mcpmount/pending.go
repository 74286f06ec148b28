package mcpmount

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/toolerr"
)

// The servers start in the background, and a server's tools are known
// only once it has listed them. Until then a model (or a client that
// listed the tools before a restart of the service) may call one of them
// by name: "memory__read_graph" before server-memory is up. Answering it
// as an unknown tool would tell the model the tool does not exist, and
// it would not try again. So a name with the prefix of a mounted server
// that has not listed its tools yet is answered by a pending tool, which
// says the server is starting (or why it is down) and when to try again.
// The registry asks Resolve only for names no registered tool has
// (registry.Fallback), and the policy decides the pending tool by its
// name as it would the real one: a key that may not call the server's
// tools gets the unknown tool's answer for them, starting or not. Once
// the server has listed its tools, its names are known, and any other
// name of its prefix is an unknown tool again.

// Resolve is the registry's Fallback: for a name "<server>__<tool>" of a
// server of the last commit that has not listed its tools yet (starting,
// or down since it started), and that the switches leave on, a tool that
// says so; nil for any other name. It allocates nothing for a name it
// does not take.
func (m *Mount) Resolve(name string) registry.Tool {
	m.mu.Lock()
	var found *mounted
	for _, s := range m.servers {
		if s.live && strings.HasPrefix(name, s.prefix) && len(name) > len(s.prefix) {
			// The longest prefix wins: servers "a" and "a__b" both take
			// "a__b__c", which only the second can have.
			if found == nil || len(s.prefix) > len(found.prefix) {
				found = s
			}
		}
	}
	switches := m.switches
	m.mu.Unlock()
	if found == nil || found.srv.State().Listed {
		return nil
	}
	if _, off := switches(found.name, name); off {
		return nil
	}
	return &pendingTool{s: found, name: name}
}

// pendingTool answers a call of a tool of a server that has not listed
// its tools yet.
type pendingTool struct {
	s    *mounted
	name string
}

func (p *pendingTool) Name() string { return p.name }
func (p *pendingTool) Description() string {
	return fmt.Sprintf("A tool of the MCP server %s, which has not listed its tools yet.", p.s.name)
}
func (p *pendingTool) Parameters() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }

// Timeout implements registry.Timeouter: the entry's, as its tools have.
func (p *pendingTool) Timeout() time.Duration { return p.s.cfg.Timeout }

// Execute says where the server stands, runs nothing, and tells the
// model what to do.
func (p *pendingTool) Execute(context.Context, json.RawMessage) (string, error) {
	return "", notListedError(p.s.srv, p.name, time.Now())
}

// notListedError is the answer to a call of name, a tool of srv, which
// has not listed its tools, in srv's state at now.
func notListedError(srv *Server, name string, now time.Time) error {
	st := srv.State()
	switch st.Phase {
	case Starting:
		return toolerr.Errorf(toolerr.Unavailable, "MCP server %s is starting (since %s): its tools are not known yet. Next: try again in a few seconds.",
			srv.name, seconds(now.Sub(st.Since)))
	case Down:
		next := "It is being restarted now."
		if wait := st.RetryAt.Sub(now); wait > 0 {
			next = fmt.Sprintf("It is restarted in the background; the next attempt is in %s.", seconds(wait))
		}
		return toolerr.Errorf(toolerr.Unavailable, "MCP server %s is down: %s. %s Next: try again later, or use another tool.",
			srv.name, strings.TrimPrefix(srv.redact(st.Err.Error()), "MCP server "+srv.name+": "), next)
	case Broken:
		return toolerr.Errorf(toolerr.Unavailable, "the MCP server %s cannot start: %s. Next: use another tool; the operator must fix the server's entry.", srv.name, srv.redact(st.Err.Error()))
	case Stopped:
		return toolerr.Errorf(toolerr.Unavailable, "the MCP server %s was stopped (the service is shutting down or reloading its tools). Next: retry in a moment.", srv.name)
	}
	// Up: it listed its tools since the call was looked up.
	if slices.ContainsFunc(srv.Tools(), func(t registry.Tool) bool { return t.Name() == name }) {
		return toolerr.Errorf(toolerr.Unavailable, "MCP server %s has just started. Next: make the call again.", srv.name)
	}
	return toolerr.Errorf(toolerr.UnknownTool, "%s", registry.UnknownToolMessage(name))
}

// seconds renders d in whole seconds, at least 1.
func seconds(d time.Duration) string {
	return fmt.Sprintf("%d s", max(int64((d+time.Second-1)/time.Second), 1))
}

var _ registry.Tool = (*pendingTool)(nil)
var _ registry.Timeouter = (*pendingTool)(nil)
