package customtools

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/ready"
	"github.com/countbot/toolsvc/internal/redact"
	"github.com/countbot/toolsvc/internal/registry"
)

// Set is the registry set the file's tools are kept in, so that a reload
// replaces them all at once.
const Set = "the tools file"

// Switches are the operator's tool switches over the built-in tools, the
// file's tools and toolsets and its MCP servers.
type Switches interface {
	// Off reports whether the tool (of the file) is left out, and why.
	Off(tool string) (reason string, off bool)
	// OffMCP reports whether the tool of the MCP server is left out.
	OffMCP(server, tool string) (reason string, off bool)
}

// Servers mounts the MCP servers of the file's mcpServers
// (*mcpmount.Mount is one). Prepare starts the servers the entries add
// or change, in the background (it does not wait for them to come up),
// and checks the names of the tools known now against the built-in ones
// and taken (name: what holds it); then commit puts the change in use,
// or abandon closes what Prepare started.
type Servers interface {
	Prepare(entries map[string]json.RawMessage, switches func(server, tool string) (string, bool), taken map[string]string) (commit func() error, abandon func(), err error)
	// Ready adds the servers' state to /readyz's checks.
	Ready(checks map[string]string)
	// SubagentTools lists the servers' tools sub-agents may call.
	SubagentTools() []string
}

// Registry keeps the file's tools (*registry.Registry is one).
type Registry interface {
	ReplaceSet(set string, tools []registry.Tool) error
}

// ReloaderOptions are what a Reloader takes from the service.
type ReloaderOptions struct {
	// Path is the tools file, as configured.
	Path string
	// Load is how the file is read again on Reload: the variables it may
	// read, the names it may not take, the folders it may not lie in
	// (ModelWritable, which also marks the tools the model could change).
	Load Options
	// Workspace is the workspace folder, where a relative program lies.
	Workspace string
	// Switches gives the operator's switches over the built-in tools and
	// those of a file; an error (a name in them that neither knows) stops
	// the load.
	Switches func(f *File) (Switches, error)
	Registry Registry
	Servers  Servers
	Deps     Deps
	Log      zerolog.Logger
	// Redactor is the service's redaction: the secrets the file's tools
	// read join it before any tool can use them, and /readyz's quote of a
	// failed reload passes it.
	Redactor *redact.Redactor
}

// Reloader holds the tools of the tools file: it builds them and puts
// them, and the tools of the file's MCP servers, into the registry, at
// start-up and on Reload. It is safe for concurrent use; one load runs
// at a time.
type Reloader struct {
	o ReloaderOptions

	mu        sync.Mutex // one load at a time
	state     loaded
	lastError string // why the last reload failed; "" after a good one
}

// loaded is what the last good load made.
type loaded struct {
	on        []string
	off       map[string]string
	subagents []string
	file      *File
}

// NewReloader returns a Reloader that has loaded nothing yet.
func NewReloader(o ReloaderOptions) *Reloader {
	if o.Redactor == nil {
		o.Redactor = redact.New()
	}
	return &Reloader{o: o}
}

// Start loads f, read at start-up, as sw switches it: the MCP servers
// start in the background, and every tool goes into the registry (each
// server's once it has listed them). It does not wait for a server.
func (r *Reloader) Start(f *File, sw Switches) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.load(f, sw)
}

// Reload reads the file again and replaces its tools at once: calls
// already running finish on the old definitions, new calls and every
// listing see the new ones. On any error the tools of the last good load
// stay, and the error is logged, kept for Ready and returned.
func (r *Reloader) Reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	err := r.reloadLocked()
	if err != nil {
		r.lastError = err.Error()
		r.o.Log.Error().Err(err).Strs("kept", r.state.on).Msg("tools file reload failed; the tools of the last good load are kept")
		return err
	}
	r.lastError = ""
	r.o.Log.Info().Str("file", r.o.Path).Strs("tools", r.state.on).Msg("tools file reloaded")
	return nil
}

// reloadLocked reads the file and loads it with the switches it makes.
func (r *Reloader) reloadLocked() error {
	f, err := Load(r.o.Path, r.o.Load)
	if err != nil {
		return err
	}
	sw, err := r.o.Switches(f)
	if err != nil {
		return fmt.Errorf("tools file %s: with its toolsets and MCP servers, %w", f.Path, err)
	}
	return r.load(f, sw)
}

// load starts the MCP servers f adds or changes (unchanged ones keep
// running; new ones come up in the background) and checks every name
// known now; then replaces the file's tools, publishes the servers'
// tools and closes the servers it removed or changed. Any error before
// that last step changes nothing. A reload, like start-up, does not wait
// for a server: the lock it holds is held for moments only, and /readyz
// and the next reload are not kept waiting.
func (r *Reloader) load(f *File, sw Switches) error {
	taken := map[string]string{}
	for _, s := range f.Tools {
		taken[s.Name] = "the tool of " + Set
	}
	commit, abandon, err := r.o.Servers.Prepare(f.MCPServers, sw.OffMCP, taken)
	if err != nil {
		return fmt.Errorf("tools file %s: %w", f.Path, err)
	}
	if err := r.apply(f, sw); err != nil {
		abandon()
		return err
	}
	if err := commit(); err != nil {
		return fmt.Errorf("tools file %s: %w", f.Path, err)
	}
	return nil
}

// apply builds the tools of f as sw switches them and puts them in the
// registry in place of the previous ones. On an error nothing changes.
func (r *Reloader) apply(f *File, sw Switches) error {
	built, err := Build(f, r.o.Deps, sw.Off)
	if err != nil {
		return err
	}
	// The header secrets are redacted before any tool can use them.
	r.o.Redactor.Add(built.Secrets...)
	if err := r.o.Registry.ReplaceSet(Set, built.Tools); err != nil {
		return fmt.Errorf("tools file %s: %w", f.Path, err)
	}
	r.state = loaded{on: built.On, off: built.Off, subagents: built.Subagents, file: f}
	log := r.o.Log
	for _, s := range f.Tools {
		if why, off := built.Off[s.Name]; off {
			log.Warn().Str("tool", s.Name).Str("state", "off").Str("source", "file").Str("reason", why).Msg("tool")
			continue
		}
		log.Info().Str("tool", s.Name).Str("state", "on").Str("source", "file").Str("toolset", s.Toolset).
			Bool("subagents", s.Subagents).Str("reason", built.Notes[s.Name]).Msg("tool")
		if paths := WritablePaths(s, r.o.Workspace, r.o.Load.ModelWritable); len(paths) > 0 {
			log.Warn().Str("tool", s.Name).Strs("paths", paths).
				Msg("the model can change what this tool runs: it lies where write_file, edit_file and exec write; where that matters, install it outside the workspace (e.g. /opt/tools) and name it by its absolute path")
		}
	}
	return nil
}

// Loaded returns the file of the last good load (nil before one, and for
// a nil Reloader): what else names its tools, toolsets and MCP servers
// (the key policy) checks its names against it.
func (r *Reloader) Loaded() *File {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state.file
}

// SubagentTools lists the tools of the file and of its MCP servers that
// sub-agents may call. A nil Reloader (no tools file) has none.
func (r *Reloader) SubagentTools() []string {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	out := slices.Clone(r.state.subagents)
	r.mu.Unlock()
	return append(out, r.o.Servers.SubagentTools()...)
}

// Ready adds the file's state to /readyz: its tools that are off, and a
// failed reload (which does not make the service unready: the tools of
// the last good load are served), then the servers'. The reload's error
// passes the redaction, as everything /readyz quotes does: it can quote
// the file's values, and it is redacted when read, so that a secret the
// service learned since the reload is cut too. A nil Reloader adds
// nothing.
func (r *Reloader) Ready(checks map[string]string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for t, why := range r.state.off {
		checks["tool:"+t] = ready.Off + ": " + why
	}
	v := "ok"
	if r.lastError != "" {
		v = "reload failed, the tools of the last good load are served: " + r.o.Redactor.String(r.lastError)
	}
	checks["tools_file"] = v
	r.o.Servers.Ready(checks)
}
