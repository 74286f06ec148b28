package app

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"

	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/config"
	"github.com/countbot/toolsvc/internal/customtools"
	"github.com/countbot/toolsvc/internal/egress"
	"github.com/countbot/toolsvc/internal/homedir"
	"github.com/countbot/toolsvc/internal/mcpmount"
	"github.com/countbot/toolsvc/internal/netguard"
	"github.com/countbot/toolsvc/internal/pkgcache"
	"github.com/countbot/toolsvc/internal/redact"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/sandbox"
	"github.com/countbot/toolsvc/internal/tools"
)

// execRunner is exec's run path with its sandbox and the options it was
// made from, shared by exec and the command tools.
type execRunner struct {
	exec    *tools.Exec
	sandbox *sandbox.Sandbox
	opts    sandbox.Options
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
// workspace is opened (newCustom checks where the file lies, before any
// of its tools is built): it refuses a file someone other than the
// service's user or root could change, or that names one of the
// service's own settings as a variable.
func loadToolsFile(path string, getenv func(string) (string, bool)) (*customtools.File, error) {
	return customtools.Load(path, customtools.Options{Getenv: customtools.HideServiceVars(getenv), Reserved: reservedNames()})
}

// modelWritable are the folders the model can write into: the workspace
// (write_file, edit_file, exec) and the folders exec's sandbox lets
// commands and MCP servers write besides it (TOOLSVC_EXEC_HOME, and each
// stdio server its package cache below the data folder; their temporary
// folders are fresh for each and gone after). The rest of the data
// folder is hidden from them.
func modelWritable(ws, dataDir string, c config.Exec) []customtools.Area {
	areas := []customtools.Area{{Dir: ws, What: "the workspace", Setting: "TOOLSVC_WORKSPACE"}}
	if c.ExecHome != "" {
		areas = append(areas, customtools.Area{Dir: c.ExecHome, What: "exec's HOME", Setting: "TOOLSVC_EXEC_HOME"})
	}
	if dataDir != "" {
		areas = append(areas, customtools.Area{Dir: mcpCacheRoot(dataDir), What: "the MCP servers' package caches", Setting: "TOOLSVC_DATA_DIR"})
	}
	return areas
}

// mcpCacheRoot is the folder below the data folder that holds the
// package cache of each stdio MCP server (see pkgcache).
func mcpCacheRoot(dataDir string) string { return filepath.Join(dataDir, "mcp-cache") }

// warnUnconfined says when the model can write beyond the folders
// modelWritable lists, which the tools file's checks cannot cover: then
// only the file's owner and mode keep the model from changing it.
func warnUnconfined(log zerolog.Logger, c config.Server, file string, runner *execRunner) {
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
	log.Warn().Str("file", file).Strs("reasons", why).
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

// newCustom wires the tools of TOOLSVC_TOOLS_FILE: their runners, the
// mount of the file's MCP servers and the reloader that loads both, at
// start-up and on Reload. It returns what releases what it built, to run
// last first; on an error it has released it.
func newCustom(d Deps, reg *registry.Registry, red *redact.Redactor, built *Tools, getenv func(string) (string, bool)) (*customtools.Reloader, []func(), error) {
	sw := d.Config.Switches
	getenv = customtools.HideServiceVars(getenv)
	ws := d.Workspace.Dir()
	areas := modelWritable(ws, d.DataDir, d.Config.Exec)
	// The file was read before the workspace was opened: where it lies is
	// checked now, before any of its tools is built.
	if err := customtools.CheckPlace(sw.ToolsFile, areas); err != nil {
		return nil, nil, err
	}
	var closers []func()
	deps, runner, err := customDeps(d, built.runner, &closers)
	if err != nil {
		closeLastFirst(closers)
		return nil, nil, err
	}
	warnUnconfined(d.Log, d.Config.Server, sw.ToolsFile, runner)
	mount, err := newMCPMount(d, reg, red, runner, deps.CommandOff, getenv)
	if err != nil {
		closeLastFirst(closers)
		return nil, nil, err
	}
	// Servers stop before the sandboxes they run in.
	closers = append(closers, mount.Close)
	// The servers start in the background: until one has listed its
	// tools, a call of a name of its ("memory__read_graph") says it is
	// starting, or why it is down, instead of that no such tool exists.
	reg.SetFallback(mount.Resolve)
	rl := customtools.NewReloader(customtools.ReloaderOptions{
		Path:      sw.ToolsFile,
		Load:      customtools.Options{Getenv: getenv, Reserved: reservedNames(), ModelWritable: areas},
		Workspace: ws,
		Switches: func(f *customtools.File) (customtools.Switches, error) {
			return newSelection(sw.ToolsEnabled, sw.ToolsDisabled, fileToolsets(f), serverNames(f))
		},
		Registry: reg,
		Servers:  mount,
		Deps:     deps,
		Log:      d.Log,
		Redactor: red,
	})
	return rl, closers, nil
}

// closeLastFirst runs closers, the last first.
func closeLastFirst(closers []func()) {
	for i := len(closers) - 1; i >= 0; i-- {
		closers[i]()
	}
}

// customDeps prepares the runners of the file's tools: the network guard
// for http tools, and for command tools exec's run path (exec's own when
// exec is on, else one built the same way), or the reason they are off.
// It returns the run path, and adds what it built to closers.
func customDeps(d Deps, execs *execRunner, closers *[]func()) (customtools.Deps, *execRunner, error) {
	var deps customtools.Deps
	gopts := guardOptions(d.Config.Web)
	guard, err := netguard.New(gopts)
	if err != nil {
		return deps, nil, err
	}
	deps.HTTP = customtools.HTTPDeps{
		Guard: guard,
		GuardAllowing: func(host string) (*netguard.Guard, error) {
			return netguard.New(customtools.AllowHost(gopts, host))
		},
		DefaultTimeout:   d.Config.Web.FetchTimeout,
		DefaultMaxOutput: d.Config.Exec.ExecMaxOutput,
	}
	runner, own := execs, false
	switch {
	case runner != nil:
	case !hasShell():
		deps.CommandOff = fmt.Sprintf("command tools run in exec's sandbox, which needs %s; this system (%s) does not have it", tools.Shell, runtime.GOOS)
	default:
		ex, sb, sbOpts, err := newExecTool(d.Config.Exec, d.Guard, d.Workspace, d.DataDir, d.Log, d.Tracer)
		switch {
		case errors.Is(err, sandbox.ErrNoSandbox):
			deps.CommandOff = "command tools run in exec's sandbox: " + err.Error()
		case err != nil:
			return deps, nil, err
		default:
			runner, own = &execRunner{exec: ex, sandbox: sb, opts: sbOpts}, true
		}
	}
	if runner == nil {
		return deps, nil, nil
	}
	sandboxes := customtools.NewExecSandboxes(runner.sandbox, runner.opts)
	*closers = append(*closers, sandboxes.Close)
	if own {
		// Closed before the sandbox it made: its commands stop first.
		// exec's own is closed with the built-in tools.
		*closers = append(*closers, runner.exec.Close)
	}
	deps.Command = &customtools.CommandDeps{
		Exec:           runner.exec,
		Sandbox:        sandboxes.For,
		AllowSandbox:   sandboxes.Allow,
		Egress:         egress.Options{Guard: d.Guard},
		Workspace:      d.Workspace.Dir(),
		DefaultTimeout: d.Config.Exec.ExecTimeout,
	}
	return deps, runner, nil
}

// newMCPMount prepares the MCP servers' shared parts: stdio servers run
// in sandboxes built with exec's options (the mode exec got, its paths,
// user and limits; the network as each entry says), with exec's
// environment allowlist, and every secret of theirs redacted. Without
// exec's sandbox (noSandbox says why) a stdio server cannot start, which
// stops start-up; Streamable HTTP servers need none.
func newMCPMount(d Deps, reg *registry.Registry, red *redact.Redactor, runner *execRunner, noSandbox string, getenv func(string) (string, bool)) (*mcpmount.Mount, error) {
	ex := d.Config.Exec
	o := mcpmount.MountOptions{
		Registry: reg,
		Log:      d.Log,
		Redactor: red,
		Deps: mcpmount.Deps{
			Workspace: d.Workspace,
			EnvAllow:  ex.ExecEnvAllow,
			LookupEnv: getenv,
			MaxOutput: ex.ExecMaxOutput,
			// A server whose network is an allowlist (its entry's, or its
			// package registry's) dials through the one guard.
			Egress: egress.Options{Guard: d.Guard},
			Tracer: d.Tracer,
		},
		NoSandbox:   noSandbox,
		CallTimeout: d.Config.Calls.CallTimeout,
	}
	var user *sandbox.User
	if runner != nil {
		sb := runner.opts
		sb.Mode = runner.sandbox.Mode()
		o.Sandbox = &sb
		user = sb.User
		o.Deps.Caches = mcpCaches(d, user)
	}
	if ex.ExecHome != "" {
		// Stdio servers keep TOOLSVC_EXEC_HOME between starts, as exec's
		// commands keep it between calls (their dotfiles; the package
		// managers' caches are each server's own, see mcpCaches);
		// otherwise each start gets a fresh HOME of its own. A per_key
		// server's instance for a key's folder keeps the folder's own HOME
		// below it, the one exec's commands for that folder get.
		home, err := execHome(ex.ExecHome, d.DataDir, user)
		if err != nil {
			return nil, err
		}
		o.Deps.Home = home
	}
	return mcpmount.NewMount(o), nil
}

// mcpCaches gives each stdio server a package cache of its own below the
// data folder, kept between its starts and the service's restarts, so
// that a restart runs what npx or uvx downloaded before, in every case,
// TOOLSVC_EXEC_HOME or not: a HOME is shared by every server and
// command, a cache must not be (one server could plant a package that
// another runs). The data folder is a private path of exec's sandbox:
// each server's sandbox shows its own cache and nothing else of it.
// Where the servers' account (TOOLSVC_EXEC_USER) cannot pass through the
// data folder to reach a cache, the servers run without one, as before
// (the package managers keep their caches in HOME), and the log says how
// to open the way.
func mcpCaches(d Deps, user *sandbox.User) *pkgcache.Caches {
	if d.DataDir == "" {
		return nil
	}
	var owner *homedir.User
	if user != nil {
		owner = &homedir.User{Uid: user.Uid, Gid: user.Gid}
	}
	caches, err := pkgcache.New(mcpCacheRoot(d.DataDir), owner)
	if err != nil {
		d.Log.Warn().Err(err).Msg("MCP servers: no package cache of their own; npx, uvx and the like download again at each start of a stdio server, unless TOOLSVC_EXEC_HOME keeps their caches")
		return nil
	}
	return caches
}

func hasShell() bool {
	_, err := os.Stat(tools.Shell)
	return err == nil
}
