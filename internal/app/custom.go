package app

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sort"
	"sync"

	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/config"
	"github.com/countbot/toolsvc/internal/customtools"
	"github.com/countbot/toolsvc/internal/mcpmount"
	"github.com/countbot/toolsvc/internal/netguard"
	"github.com/countbot/toolsvc/internal/redact"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/sandbox"
	"github.com/countbot/toolsvc/internal/tools"
)

// customSet is the registry set the tools file's tools are kept in, so
// that a reload replaces them all at once.
const customSet = "the tools file"

// execRunner is exec's run path with its sandbox, shared by exec and the
// command tools, and the sandbox with the other network setting, built
// when a tool asks for it.
type execRunner struct {
	exec    *tools.Exec
	sandbox *sandbox.Sandbox
	opts    sandbox.Options

	mu    sync.Mutex
	other *sandbox.Sandbox
}

// sandboxFor returns exec's sandbox with the network on or off: the same
// mode, paths, user and limits.
func (r *execRunner) sandboxFor(network bool) (*sandbox.Sandbox, error) {
	if network == r.sandbox.Network() {
		return r.sandbox, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.other == nil {
		o := r.opts
		o.Mode, o.Network = r.sandbox.Mode(), network
		sb, err := sandbox.New(o)
		if err != nil {
			return nil, fmt.Errorf("the sandbox with the network %s: %w", onOff(network), err)
		}
		r.other = sb
	}
	return r.other, nil
}

func (r *execRunner) close() {
	r.exec.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.other != nil {
		r.other.Close()
	}
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// custom holds the tools of TOOLSVC_TOOLS_FILE: it loads the file, builds
// its tools and puts them in the registry, at start-up and on Reload.
type custom struct {
	cfg    config.Config
	reg    *registry.Registry
	log    zerolog.Logger
	red    *redact.Redactor
	deps   customtools.Deps
	getenv func(string) (string, bool)
	ws     string             // the workspace, resolved
	areas  []customtools.Area // the folders the model can write into

	mcp *mcpmount.Mount // the file's MCP servers

	mu        sync.Mutex // one load at a time
	state     customState
	lastError string // why the last reload failed; "" after a good one
	closers   []func()
}

// customState is what the last good load made.
type customState struct {
	file      *customtools.File
	on        []string
	off       map[string]string
	subagents []string
}

// reservedNames are the names custom tools and their toolsets may not
// take: every built-in tool and toolset, whether on here or not, so that
// a file that loads on one machine loads on every one.
func reservedNames() map[string]string {
	out := map[string]string{}
	for _, s := range Toolsets() {
		out[s.Name] = "the built-in toolset"
		for _, t := range s.Tools {
			out[t] = "the built-in tool"
		}
	}
	return out
}

// loadToolsFile reads and checks the tools file at start-up, before the
// workspace is opened: newCustom checks where the file lies, before any
// of its tools is built. Reloads use loadToolsFileIn.
func loadToolsFile(path string, getenv func(string) (string, bool)) (*customtools.File, error) {
	return loadToolsFileIn(path, getenv, nil)
}

// loadToolsFileIn reads and checks the tools file, refusing it when it
// lies in one of areas (see modelWritable), when someone other than the
// service's user or root could change it, or when it names one of the
// service's own settings as a variable.
func loadToolsFileIn(path string, getenv func(string) (string, bool), areas []customtools.Area) (*customtools.File, error) {
	return customtools.Load(path, customtools.Options{Getenv: customtools.HideServiceVars(getenv),
		Reserved: reservedNames(), ModelWritable: areas})
}

// modelWritable are the folders the model can write into: the workspace
// (write_file, edit_file, exec) and the folders exec's sandbox lets
// commands and MCP servers write besides it (TOOLSVC_EXEC_HOME; their
// temporary folders are fresh for each and gone after). The data folder
// is hidden from them.
func modelWritable(c config.Config, ws string) []customtools.Area {
	areas := []customtools.Area{{Dir: ws, What: "the workspace", Setting: "TOOLSVC_WORKSPACE"}}
	if c.ExecHome != "" {
		areas = append(areas, customtools.Area{Dir: c.ExecHome, What: "exec's HOME", Setting: "TOOLSVC_EXEC_HOME"})
	}
	return areas
}

// warnUnconfined says when the model can write beyond the folders
// modelWritable lists, which the tools file's checks cannot cover: then
// only the file's owner and mode keep the model from changing it.
func warnUnconfined(log zerolog.Logger, c config.Config, runner *execRunner) {
	var why []string
	if !c.RestrictWorkspace {
		why = append(why, "TOOLSVC_RESTRICT_TO_WORKSPACE=false lets the file tools write wherever the service can")
	}
	if runner != nil && runner.sandbox.Mode() == sandbox.None {
		why = append(why, "TOOLSVC_EXEC_SANDBOX=none lets commands write wherever their user can")
	}
	if len(why) == 0 {
		return
	}
	log.Warn().Str("file", c.ToolsFile).Strs("reasons", why).
		Msg("the model can change the tools file if the service's user (or exec's) can write it: make it root's and writable only by root, with the service running as another user, or confine the tools")
}

// fileToolsets are the toolsets of f, for the switches.
func fileToolsets(f *customtools.File) []Toolset {
	if f == nil {
		return nil
	}
	sets := f.Toolsets()
	names := make([]string, 0, len(sets))
	for n := range sets {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]Toolset, 0, len(names))
	for _, n := range names {
		out = append(out, Toolset{Name: n, Tools: sets[n]})
	}
	return out
}

// newCustom prepares the runners of the file's tools: exec's run path
// (exec's own when exec is on, else one built the same way) and the
// network guard.
func newCustom(d Deps, reg *registry.Registry, red *redact.Redactor, built *Tools, getenv func(string) (string, bool)) (*custom, error) {
	c := d.Config
	cu := &custom{cfg: c, reg: reg, log: d.Log, red: red, getenv: customtools.HideServiceVars(getenv),
		ws: d.Workspace.Dir(), areas: modelWritable(c, d.Workspace.Dir())}
	// The file was read before the workspace was opened: where it lies is
	// checked now, before any of its tools is built.
	if err := customtools.CheckPlace(c.ToolsFile, cu.areas); err != nil {
		return nil, err
	}
	getenv = cu.getenv
	gopts := netguard.Options{AllowCIDRs: c.NetAllowCIDRs, AllowHosts: c.NetAllowHosts}
	guard, err := netguard.New(gopts)
	if err != nil {
		return nil, err
	}
	cu.deps.HTTP = customtools.HTTPDeps{
		Guard: guard,
		GuardAllowing: func(host string) (*netguard.Guard, error) {
			return netguard.New(customtools.AllowHost(gopts, host))
		},
		DefaultTimeout:   c.FetchTimeout,
		DefaultMaxOutput: c.ExecMaxOutput,
	}
	runner := built.runner
	switch {
	case runner != nil:
	case !hasShell():
		cu.deps.CommandOff = fmt.Sprintf("command tools run in exec's sandbox, which needs %s; this system (%s) does not have it", tools.Shell, runtime.GOOS)
	default:
		ex, sb, sbOpts, err := newExecTool(d)
		switch {
		case errors.Is(err, sandbox.ErrNoSandbox):
			cu.deps.CommandOff = "command tools run in exec's sandbox: " + err.Error()
		case err != nil:
			return nil, err
		default:
			runner = &execRunner{exec: ex, sandbox: sb, opts: sbOpts}
			cu.closers = append(cu.closers, runner.close)
		}
	}
	warnUnconfined(d.Log, c, runner)
	if runner != nil {
		if built.runner != nil {
			// exec's own closer stops its commands; the other sandbox is ours.
			cu.closers = append(cu.closers, func() {
				runner.mu.Lock()
				defer runner.mu.Unlock()
				if runner.other != nil {
					runner.other.Close()
				}
			})
		}
		cu.deps.Command = &customtools.CommandDeps{
			Exec:           runner.exec,
			Sandbox:        runner.sandboxFor,
			Workspace:      d.Workspace.Dir(),
			DefaultTimeout: c.ExecTimeout,
		}
	}
	mcp, err := newMCPMount(d, reg, red, runner, cu.deps.CommandOff, getenv)
	if err != nil {
		cu.close()
		return nil, err
	}
	cu.mcp = mcp
	// Servers stop before the sandboxes they run in (closers run last
	// first).
	cu.closers = append(cu.closers, cu.mcp.Close)
	return cu, nil
}

// newMCPMount prepares the MCP servers' shared parts: stdio servers run
// in sandboxes built with exec's options (the mode exec got, its paths,
// user and limits; the network as each entry says), with exec's
// environment allowlist, and every secret of theirs redacted. Without
// exec's sandbox (noSandbox says why) a stdio server cannot start, which
// stops start-up; Streamable HTTP servers need none.
func newMCPMount(d Deps, reg *registry.Registry, red *redact.Redactor, runner *execRunner, noSandbox string, getenv func(string) (string, bool)) (*mcpmount.Mount, error) {
	c := d.Config
	o := mcpmount.MountOptions{
		Registry: reg,
		Log:      d.Log,
		Redactor: red,
		Deps: mcpmount.Deps{
			Workspace: d.Workspace,
			EnvAllow:  c.ExecEnvAllow,
			LookupEnv: getenv,
			MaxOutput: c.ExecMaxOutput,
		},
		NoSandbox:   noSandbox,
		CallTimeout: c.CallTimeout,
	}
	var user *sandbox.User
	if runner != nil {
		sb := runner.opts
		sb.Mode = runner.sandbox.Mode()
		o.Sandbox = &sb
		user = sb.User
	}
	if c.ExecHome != "" {
		// Stdio servers keep TOOLSVC_EXEC_HOME between starts, as exec's
		// commands keep it between calls (npx's cache lives there);
		// otherwise each start gets a fresh HOME of its own.
		home, err := execHome(c.ExecHome, d.DataDir, user)
		if err != nil {
			return nil, err
		}
		o.Deps.Home = home
	}
	return mcpmount.NewMount(o), nil
}

func hasShell() bool {
	_, err := os.Stat(tools.Shell)
	return err == nil
}

// apply builds the tools of f as sel switches them and puts them in the
// registry in place of the previous ones. On an error nothing changes.
func (cu *custom) apply(f *customtools.File, sel Selection) error {
	built, err := customtools.Build(f, cu.deps, sel.Off)
	if err != nil {
		return err
	}
	// The header secrets are redacted before any tool can use them.
	cu.red.Add(built.Secrets...)
	if err := cu.reg.ReplaceSet(customSet, built.Tools); err != nil {
		return fmt.Errorf("tools file %s: %w", f.Path, err)
	}
	cu.state = customState{file: f, on: built.On, off: built.Off, subagents: built.Subagents}
	for _, s := range f.Tools {
		if why, off := built.Off[s.Name]; off {
			cu.log.Warn().Str("tool", s.Name).Str("state", "off").Str("source", "file").Str("reason", why).Msg("tool")
			continue
		}
		cu.log.Info().Str("tool", s.Name).Str("state", "on").Str("source", "file").Str("toolset", s.Toolset).
			Bool("subagents", s.Subagents).Str("reason", built.Notes[s.Name]).Msg("tool")
		if paths := customtools.WritablePaths(s, cu.ws, cu.areas); len(paths) > 0 {
			cu.log.Warn().Str("tool", s.Name).Strs("paths", paths).
				Msg("the model can change what this tool runs: it lies where write_file, edit_file and exec write; where that matters, install it outside the workspace (e.g. /opt/tools) and name it by its absolute path")
		}
	}
	return nil
}

// reload reads the file again and replaces the tools; on any error the
// tools of the last good load stay, and the error is logged and returned.
func (cu *custom) reload() error {
	cu.mu.Lock()
	defer cu.mu.Unlock()
	err := cu.reloadLocked()
	if err != nil {
		cu.lastError = err.Error()
		cu.log.Error().Err(err).Strs("kept", cu.state.on).Msg("tools file reload failed; the tools of the last good load are kept")
		return err
	}
	cu.lastError = ""
	cu.log.Info().Str("file", cu.cfg.ToolsFile).Strs("tools", cu.state.on).Msg("tools file reloaded")
	return nil
}

// reloadLocked reads the file; starts the MCP servers it adds or changes
// (unchanged ones keep running) and checks every name; then replaces the
// file's tools, publishes the servers' tools and closes the servers it
// removed or changed. Any error before that last step changes nothing.
func (cu *custom) reloadLocked() error {
	f, err := loadToolsFileIn(cu.cfg.ToolsFile, cu.getenv, cu.areas)
	if err != nil {
		return err
	}
	if err := mcpmount.CheckEntries(f.MCPServers); err != nil {
		return fmt.Errorf("tools file %s: %w", f.Path, err)
	}
	sel, err := newSelection(cu.cfg.ToolsEnabled, cu.cfg.ToolsDisabled, fileToolsets(f), serverNames(f))
	if err != nil {
		return fmt.Errorf("tools file %s: with its toolsets and MCP servers, %w", f.Path, err)
	}
	return cu.load(f, sel)
}

// load starts the MCP servers f adds or changes (unchanged ones keep
// running) and checks every name; then replaces the file's tools,
// publishes the servers' tools and closes the servers it removed or
// changed. Any error before that last step changes nothing.
func (cu *custom) load(f *customtools.File, sel Selection) error {
	commit, abandon, err := cu.mcp.Prepare(f.MCPServers, sel.OffMCP, fileToolNames(f))
	if err != nil {
		return fmt.Errorf("tools file %s: %w", f.Path, err)
	}
	if err := cu.apply(f, sel); err != nil {
		abandon()
		return err
	}
	if err := commit(); err != nil {
		return fmt.Errorf("tools file %s: %w", f.Path, err)
	}
	return nil
}

// fileToolNames are the names of the file's tools, and what holds them,
// for the MCP servers' names to be checked against.
func fileToolNames(f *customtools.File) map[string]string {
	out := map[string]string{}
	for _, s := range f.Tools {
		out[s.Name] = "the tool of " + customSet
	}
	return out
}

// serverNames are the keys of the file's mcpServers, disabled or not: the
// switches may name any of them.
func serverNames(f *customtools.File) []string {
	if f == nil {
		return nil
	}
	names := make([]string, 0, len(f.MCPServers))
	for n := range f.MCPServers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// subagentTools lists the file's tools sub-agents may call.
func (cu *custom) subagentTools() []string {
	if cu == nil {
		return nil
	}
	cu.mu.Lock()
	out := slices.Clone(cu.state.subagents)
	cu.mu.Unlock()
	return append(out, cu.mcp.SubagentTools()...)
}

// ready adds the file's state to /readyz: its tools that are off, and a
// failed reload (which does not make the service unready: the tools of
// the last good load are served). The reload's error passes the
// redaction, as everything /readyz quotes does: it can quote the file's
// values, and it is redacted when read, so that a secret the service
// learned since the reload is cut too.
func (cu *custom) ready(checks map[string]string) {
	if cu == nil {
		return
	}
	cu.mu.Lock()
	defer cu.mu.Unlock()
	for t, why := range cu.state.off {
		checks["tool:"+t] = "off: " + why
	}
	v := "ok"
	if cu.lastError != "" {
		v = "reload failed, the tools of the last good load are served: " + cu.red.String(cu.lastError)
	}
	checks["tools_file"] = v
	cu.mcp.Ready(checks)
}

func (cu *custom) close() {
	for i := len(cu.closers) - 1; i >= 0; i-- {
		cu.closers[i]()
	}
	cu.closers = nil
}
