package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/customtools"
	"github.com/countbot/toolsvc/internal/mcpmount"
	"github.com/countbot/toolsvc/internal/redact"
	"github.com/countbot/toolsvc/internal/registry"
)

// mcpSet is the registry set that holds the tools of the MCP server name,
// so that each server's list is replaced on its own when it changes.
func mcpSet(name string) string { return "mcp:" + name }

// mcpServer is one running server of the tools file's mcpServers.
type mcpServer struct {
	name string
	raw  []byte // the entry as written, compacted: a reload compares it
	cfg  mcpmount.Config
	srv  *mcpmount.Server
	// live is set once the server's tools may be in the registry (under
	// mcpMount.mu): a server started by a reload that is then given up
	// never publishes, nor one that was removed.
	live bool
}

// mcpMount runs the MCP servers of the tools file and keeps their tools in
// the registry: one set per server, replaced whenever its list changes.
type mcpMount struct {
	deps mcpmount.Deps // the parts every server shares
	reg  *registry.Registry
	log  zerolog.Logger
	red  *redact.Redactor
	ws   string // the workspace folder, for ${WORKSPACE}
	// getenv resolves ${NAME} in headers and env values.
	getenv func(string) (string, bool)
	// sandboxes are exec's, for stdio servers; nil when exec's sandbox
	// cannot run here.
	sandboxes *mcpmount.Sandboxes

	// Servers a reload replaced or removed are drained in the background:
	// their calls in flight finish, for at most a call's time, before they
	// are closed. close ends the drains at once and waits for them.
	callTimeout time.Duration
	drainCtx    context.Context
	drainStop   context.CancelFunc
	draining    sync.WaitGroup

	mu      sync.Mutex // the servers, the selection and publishing
	servers map[string]*mcpServer
	sel     Selection
	off     map[string]string // MCP tool: why the switches leave it out
}

// parseMCPServers checks each entry of the file's mcpServers and returns
// the servers that are not disabled, by name. An error names the file and
// the server.
func parseMCPServers(f *customtools.File, log zerolog.Logger) (map[string]mcpmount.Config, map[string][]byte, error) {
	cfgs := map[string]mcpmount.Config{}
	raws := map[string][]byte{}
	if f == nil {
		return cfgs, raws, nil
	}
	for _, name := range sortedNames(f.MCPServers) {
		raw := f.MCPServers[name]
		cfg, err := mcpmount.ParseConfig(raw)
		if err != nil {
			return nil, nil, fmt.Errorf("tools file %s: mcpServers %q: %w", f.Path, name, err)
		}
		if cfg.Disabled {
			log.Info().Str("mcp_server", name).Str("state", "off").Str("reason", `"disabled": true in the tools file`).Msg("mcp server")
			continue
		}
		var b bytes.Buffer
		if err := json.Compact(&b, raw); err != nil {
			b.Reset()
			b.Write(raw)
		}
		cfgs[name], raws[name] = cfg, b.Bytes()
	}
	return cfgs, raws, nil
}

// serverNames are the keys of the file's mcpServers, disabled or not: the
// switches may name any of them.
func serverNames(f *customtools.File) []string {
	if f == nil {
		return nil
	}
	return sortedNames(f.MCPServers)
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// newServer makes (does not start) the server of cfg. Its header and env
// secrets join the service's redaction before it starts.
func (m *mcpMount) newServer(name string, raw []byte, cfg mcpmount.Config) *mcpServer {
	m.red.Add(cfg.Secrets(m.ws, m.getenv)...)
	d := m.deps
	d.Log = m.log
	e := &mcpServer{name: name, raw: raw, cfg: cfg, srv: mcpmount.New(name, cfg, d)}
	m.red.Add(e.srv.Secrets()...)
	e.srv.OnToolsChanged(func() { m.changed(e) })
	return e
}

// startAll starts the servers at once, each bounded by the connect
// timeout. A server whose configuration can never work is an error (the
// servers are then closed); one that failed to start this time is
// logged and retried in the background.
func (m *mcpMount) startAll(servers []*mcpServer) error {
	errs := make([]error, len(servers))
	var wg sync.WaitGroup
	for i, e := range servers {
		wg.Go(func() { errs[i] = e.srv.Start(context.Background()) })
	}
	wg.Wait()
	var fatal []error
	for i, err := range errs {
		e := servers[i]
		switch {
		case err == nil:
		case mcpmount.IsConfigError(err):
			fatal = append(fatal, fmt.Errorf("mcpServers %q: %w", e.name, err))
		default:
			m.log.Warn().Str("mcp_server", e.name).Err(errors.New(m.red.String(err.Error()))).
				Msg("mcp server: not started; it is retried in the background, and its tools appear when it is up")
		}
	}
	if len(fatal) > 0 {
		closeServers(servers)
		return errors.Join(fatal...)
	}
	return nil
}

// closeServers closes the servers at once and waits for all of them.
func closeServers(servers []*mcpServer) {
	var wg sync.WaitGroup
	for _, e := range servers {
		wg.Go(func() { _ = e.srv.Close() })
	}
	wg.Wait()
}

// toolsOf returns the server's tools the selection leaves on, and notes
// in off why each other one is off.
func toolsOf(e *mcpServer, sel Selection, off map[string]string) []registry.Tool {
	var on []registry.Tool
	for _, t := range e.srv.Tools() {
		if why, no := sel.OffMCP(e.name, t.Name()); no {
			off[t.Name()] = why
			continue
		}
		on = append(on, t)
	}
	return on
}

// publishLocked puts the server's current tools into the registry.
func (m *mcpMount) publishLocked(e *mcpServer) error {
	for t := range m.off {
		if strings.HasPrefix(t, e.name+"__") {
			delete(m.off, t)
		}
	}
	if err := m.reg.ReplaceSet(mcpSet(e.name), toolsOf(e, m.sel, m.off)); err != nil {
		return fmt.Errorf("mcpServers %q: %w", e.name, err)
	}
	return nil
}

// changed takes a server's new tool list (it connected, restarted with
// another list, or said its list changed). A list that clashes with
// another tool is not taken: the previous one stays, and the log says
// why.
func (m *mcpMount) changed(e *mcpServer) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !e.live {
		return
	}
	if err := m.publishLocked(e); err != nil {
		m.log.Error().Str("mcp_server", e.name).Err(err).Msg("mcp server: its new tool list was not taken; the previous one is kept")
		return
	}
	m.log.Info().Str("mcp_server", e.name).Strs("tools", m.reg.Set(mcpSet(e.name))).Msg("mcp server: tools")
}

// clashes checks that the servers' tools (with the switches of sel) take
// no name held by a built-in tool, a tool of the file (fileTools) or
// another server's tool, and names both of a clash.
func (m *mcpMount) clashes(servers map[string]*mcpServer, sel Selection, fileTools []string) error {
	held := map[string]string{}
	for _, n := range m.reg.Set("") {
		held[n] = "the built-in tool"
	}
	for _, n := range fileTools {
		held[n] = "the tool of " + customSet
	}
	var errs []error
	for _, name := range sortedNames(servers) {
		for _, t := range toolsOf(servers[name], sel, map[string]string{}) {
			if other, ok := held[t.Name()]; ok {
				errs = append(errs, fmt.Errorf("tool %q of the MCP server %q clashes with %s of that name", t.Name(), name, other))
				continue
			}
			held[t.Name()] = fmt.Sprintf("the tool of the MCP server %q", name)
		}
	}
	return errors.Join(errs...)
}

// start starts the file's servers at start-up and puts their tools into
// the registry. A configuration that can never work, or a clash of names,
// is an error: start-up stops.
func (m *mcpMount) start(cfgs map[string]mcpmount.Config, raws map[string][]byte, sel Selection, fileTools []string) error {
	var list []*mcpServer
	all := map[string]*mcpServer{}
	for _, name := range sortedNames(cfgs) {
		e := m.newServer(name, raws[name], cfgs[name])
		list = append(list, e)
		all[name] = e
	}
	if err := m.startAll(list); err != nil {
		return err
	}
	if err := m.clashes(all, sel, fileTools); err != nil {
		closeServers(list)
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.servers, m.sel, m.off = all, sel, map[string]string{}
	for _, e := range list {
		e.live = true
		if err := m.publishLocked(e); err != nil {
			return err
		}
		m.logServer(e)
	}
	return nil
}

// logServer writes the start-up lines of a server: its state, and one
// line per tool as the built-in tools have.
func (m *mcpMount) logServer(e *mcpServer) {
	where := e.cfg.URL
	if e.cfg.Type == mcpmount.TypeStdio {
		where = e.cfg.Command
	}
	ev := m.log.Info()
	state := "up"
	if err := e.srv.Status(); err != nil {
		ev = m.log.Warn().Str("reason", m.red.String(err.Error()))
		state = "down"
	}
	ev.Str("mcp_server", e.name).Str("state", state).Str("type", e.cfg.Type).Str("at", where).
		Bool("network", e.cfg.Network).Bool("subagents", e.cfg.Subagents).Msg("mcp server")
	for _, t := range e.srv.Tools() {
		if why, off := m.off[t.Name()]; off {
			m.log.Info().Str("tool", t.Name()).Str("state", "off").Str("source", "mcp").Str("server", e.name).Str("reason", why).Msg("tool")
			continue
		}
		m.log.Info().Str("tool", t.Name()).Str("state", "on").Str("source", "mcp").Str("server", e.name).Bool("subagents", e.cfg.Subagents).Msg("tool")
	}
}

// mcpPlan is a reload's change to the servers, made but not yet in use.
type mcpPlan struct {
	next    map[string]*mcpServer // every server after the reload
	started []*mcpServer          // new or changed, started
	stopped []*mcpServer          // removed or changed, to close
	sel     Selection
}

// prepare starts the servers a reload adds or changes, and checks the
// names of every tool after it. Unchanged servers keep running. On an
// error the servers it started are closed and nothing changed.
func (m *mcpMount) prepare(cfgs map[string]mcpmount.Config, raws map[string][]byte, sel Selection, fileTools []string) (*mcpPlan, error) {
	m.mu.Lock()
	cur := m.servers
	m.mu.Unlock()
	p := &mcpPlan{next: map[string]*mcpServer{}, sel: sel}
	for _, name := range sortedNames(cfgs) {
		if old, ok := cur[name]; ok && bytes.Equal(old.raw, raws[name]) {
			p.next[name] = old
			continue
		}
		e := m.newServer(name, raws[name], cfgs[name])
		p.next[name] = e
		p.started = append(p.started, e)
	}
	for name, old := range cur {
		if p.next[name] != old {
			p.stopped = append(p.stopped, old)
		}
	}
	if err := m.startAll(p.started); err != nil {
		return nil, err
	}
	if err := m.clashes(p.next, sel, fileTools); err != nil {
		closeServers(p.started)
		return nil, err
	}
	return p, nil
}

// abandon gives up a plan whose reload failed after prepare.
func (p *mcpPlan) abandon() { closeServers(p.started) }

// commit puts the plan in use: the tools of removed servers go, every
// server's tools are published with the new switches, and the servers
// removed or replaced are closed (a call still running on one ends with
// an error result saying to retry).
func (m *mcpMount) commit(p *mcpPlan) error {
	m.mu.Lock()
	for _, e := range p.stopped {
		e.live = false
		if _, kept := p.next[e.name]; !kept {
			_ = m.reg.ReplaceSet(mcpSet(e.name), nil)
		}
	}
	m.servers, m.sel, m.off = p.next, p.sel, map[string]string{}
	var errs []error
	for _, name := range sortedNames(p.next) {
		e := p.next[name]
		e.live = true
		if err := m.publishLocked(e); err != nil {
			errs = append(errs, err)
		}
	}
	m.mu.Unlock()
	for _, e := range p.stopped {
		m.log.Info().Str("mcp_server", e.name).Str("state", "stopped").Msg("mcp server: stopped by the reload")
	}
	for _, e := range p.started {
		m.logServer(e)
	}
	m.drainAndClose(p.stopped)
	return errors.Join(errs...)
}

// drainAndClose closes servers a reload took out of the registry once the
// calls they are running have finished, for at most the longest a call
// may take, in the background: the reload does not wait for them.
func (m *mcpMount) drainAndClose(servers []*mcpServer) {
	if len(servers) == 0 {
		return
	}
	m.draining.Go(func() {
		var wg sync.WaitGroup
		for _, e := range servers {
			wg.Go(func() {
				bound := max(m.callTimeout, e.cfg.Timeout)
				ctx, cancel := context.WithTimeout(m.drainCtx, bound)
				defer cancel()
				e.srv.Drain(ctx)
			})
		}
		wg.Wait()
		closeServers(servers)
	})
}

// subagentTools lists the tools of the servers whose entry says
// "subagents": true, as they are now.
func (m *mcpMount) subagentTools() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, name := range sortedNames(m.servers) {
		if m.servers[name].cfg.Subagents {
			out = append(out, m.reg.Set(mcpSet(name))...)
		}
	}
	return out
}

// ready names each server in /readyz: "ok", or why it is down. A server
// that is down does not make the service unready: the other tools work,
// the server is restarted in the background, and a call of its tools
// says it is not running; an orchestrator restarting the service would
// not mend a remote server or a crashing program.
//
// Why it is down can quote the end of the server's stderr, which mcpmount
// redacts (the server's secrets and the service's), and the start of
// what it wrote to stdout instead of protocol messages, which mcpmount
// quotes as it is: the whole reason passes the service's redaction here,
// which holds the secrets of the service, of every server and of the
// tools file.
func (m *mcpMount) ready(checks map[string]string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, e := range m.servers {
		v := "ok"
		if err := e.srv.Status(); err != nil {
			v = "down, restarting in the background: " + m.red.String(err.Error())
		}
		checks["mcp:"+name] = v
	}
	for t, why := range m.off {
		checks["tool:"+t] = "off: " + why
	}
}

// close stops every server at once, then their sandboxes.
func (m *mcpMount) close() {
	m.mu.Lock()
	var list []*mcpServer
	for _, e := range m.servers {
		e.live = false
		list = append(list, e)
	}
	m.servers = nil
	m.mu.Unlock()
	if m.drainStop != nil {
		m.drainStop()
	}
	m.draining.Wait()
	closeServers(list)
	if m.sandboxes != nil {
		m.sandboxes.Close()
	}
}
