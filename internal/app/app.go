// Package app builds the service from its configuration: the workspace,
// the audit log, the registry, the tools (grouped in toolsets that the
// operator switches on and off), the sub-agents and the HTTP handler. It
// is the one place that knows how the parts fit; cmd/toolsvc only loads
// the configuration, listens and shuts down, and tests build the service
// from a config.Config value the same way.
//
// It only wires. Each part is built from its own section of the
// configuration (cfg.Exec, cfg.Web...), never from a setting read through
// the whole; and machinery with a lifecycle of its own lives in its own
// package, which this one builds and closes: the MCP servers
// (mcpmount.Mount), the tools file's reload (customtools.Reloader), the
// audit log's retention. wiring_test.go holds the package to both.
package app

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/agent"
	"github.com/countbot/toolsvc/internal/approval"
	"github.com/countbot/toolsvc/internal/audit"
	"github.com/countbot/toolsvc/internal/config"
	"github.com/countbot/toolsvc/internal/customtools"
	toolhttp "github.com/countbot/toolsvc/internal/http"
	"github.com/countbot/toolsvc/internal/logbuf"
	"github.com/countbot/toolsvc/internal/mcpmount"
	"github.com/countbot/toolsvc/internal/medialink"
	"github.com/countbot/toolsvc/internal/metrics"
	"github.com/countbot/toolsvc/internal/pgstore"
	"github.com/countbot/toolsvc/internal/policy"
	"github.com/countbot/toolsvc/internal/ready"
	"github.com/countbot/toolsvc/internal/redact"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/sandbox"
	"github.com/countbot/toolsvc/internal/skills"
	"github.com/countbot/toolsvc/internal/tracing"
	"github.com/countbot/toolsvc/internal/workspace"
)

// Options are what the service takes besides its configuration.
type Options struct {
	// Out receives the log, one JSON object per line, with every secret
	// of the configuration cut out. Nil: no log.
	Out io.Writer
	// Version is the build's version, reported by GET /healthz.
	Version string
}

// App is the built service. Its handler serves until Stop; Close releases
// everything.
type App struct {
	cfg     config.Config
	log     zerolog.Logger
	ws      *workspace.Workspace
	dataDir string
	reg     *registry.Registry
	metrics *metrics.Metrics
	tools   *Tools
	replica string                // TOOLSVC_REPLICA_ID, or the host name and a random suffix
	shared  *pgstore.Store        // TOOLSVC_DATABASE_URL's store; nil without one
	out     *logbuf.Writer        // the log's output, which audit records may share
	custom  *customtools.Reloader // the tools file's tools; nil without one
	policy  *policy.Reloader      // the key policy's file; nil without one
	// approvals holds the calls the approval rules name for a person.
	approvals *approval.Service
	handler   http.Handler
	links     *medialink.Links // signed media links; nil without TOOLSVC_PUBLIC_URL
	// tracer makes the spans of every door, call and tool; nil without
	// TOOLSVC_OTEL_ENDPOINT.
	tracer   *tracing.Tracer
	stopping context.Context
	stop     context.CancelFunc
	closers  []func() // run last first by Close
	once     sync.Once
}

// New builds the service from cfg, which Load or LoadFrom has validated.
// On an error, what was built so far is released.
func New(cfg config.Config, opts Options) (a *App, err error) {
	// Every secret the service holds is cut from log lines, results,
	// progress events and audit records.
	red := redact.New(cfg.SecretValues()...)
	a = newApp(cfg, opts.Out, red)
	// Stopping is canceled when shutdown starts: running calls end then.
	a.stopping, a.stop = context.WithCancel(context.Background())
	defer func() {
		if err != nil {
			a.Close()
			a = nil
		}
	}()

	// The tools file and the tool switches are checked first: a mistake
	// in the file or a misspelt name stops start-up before anything is
	// built.
	toolsFile, sel, err := readSwitches(cfg.Switches)
	if err != nil {
		return a, err
	}
	if err := a.newTracer(cfg.Traces, red, opts.Version); err != nil {
		return a, err
	}
	if err := a.openFolders(cfg.Server, cfg.Channels.PublicURL, cfg.Exec.ExecUser); err != nil {
		return a, err
	}
	if err := a.openShared(cfg.Replicas); err != nil {
		return a, err
	}
	// The policy decides every call, so the registry holds its enforcer
	// from the start; the file is read once every tool is known.
	var enf *policy.Enforcer
	if cfg.Access.PolicyFile != "" {
		enf = a.newEnforcer(keyNames(cfg.Access))
	}
	if err := a.newRegistry(cfg.Calls, cfg.Audit, red, enf); err != nil {
		return a, err
	}
	sk := skills.New(a.ws.Root(), cfg.Memory.SkillsDisabled) // read_file's gate and GET /skills
	// Before the sub-agents, which wait on it for the calls it holds.
	if a.approvals, err = a.newApprovals(cfg.Access, enf, red); err != nil {
		return a, err
	}

	agents, conv, closeAgents, err := a.newAgents(cfg.Agents, cfg.Server.ShutdownTimeout, sel, red, enf)
	if err != nil {
		return a, err
	}
	deps := Deps{Config: cfg, Workspace: a.ws, DataDir: a.dataDir, Log: a.log, Skills: sk,
		Agents: agents, Conversations: conv, MediaLinks: a.links, Version: opts.Version, Tracer: a.tracer}
	if err := a.registerTools(deps, sel, toolsFile, red); err != nil {
		closeAgents()
		return a, err
	}
	a.closers = append(a.closers, closeAgents) // before the tools they use are released
	if enf != nil {
		a.policy = policy.NewReloader(enf, cfg.Access.PolicyFile, a.policyNames(cfg.Access), a.log)
		if err := a.policy.Load(); err != nil {
			return a, err
		}
	}
	if err := a.checkApprovers(cfg.Access, enf); err != nil {
		return a, err
	}
	a.metrics.SetSandboxMode(a.tools.SandboxMode)
	a.handler = a.newHandler(cfg.Access, cfg.Calls, sk, a.folderRoot(enf), agents, opts.Version)
	return a, nil
}

// registerTools registers the built-in tools and the tools file's, all
// with one network guard for every way out: the outbound tools and the
// proxies of the commands' allowlists, the built-in ones' and the tools
// file's.
func (a *App) registerTools(deps Deps, sel Selection, toolsFile *customtools.File, red *redact.Redactor) (err error) {
	if deps.Guard, err = newGuard(deps.Config.Web); err != nil {
		return err
	}
	if a.tools, err = Register(a.reg, deps, sel); err != nil {
		return err
	}
	a.closers = append(a.closers, a.tools.Close)
	if toolsFile == nil {
		return nil
	}
	custom, closers, err := newCustom(deps, a.reg, red, a.tools, os.LookupEnv)
	if err != nil {
		return err
	}
	a.custom = custom
	a.closers = append(a.closers, closers...)
	// The MCP servers start in the background: start-up does not wait for
	// them (only an entry that can never work stops it), and each one's
	// tools appear when it has listed them.
	return custom.Start(toolsFile, sel)
}

// readSwitches reads the tools file, when one is set, and the switches
// over the built-in tools and the file's tools, toolsets and MCP servers.
func readSwitches(c config.Switches) (*customtools.File, Selection, error) {
	var f *customtools.File
	if c.ToolsFile != "" {
		var err error
		if f, err = loadToolsFile(c.ToolsFile, os.LookupEnv); err != nil {
			return nil, Selection{}, err
		}
		if err := mcpmount.CheckEntries(f.MCPServers); err != nil {
			return nil, Selection{}, fmt.Errorf("tools file %s: %w", f.Path, err)
		}
	}
	sel, err := newSelection(c.ToolsEnabled, c.ToolsDisabled, fileToolsets(f), serverNames(f))
	return f, sel, err
}

// newApp is the App before anything is built: its configuration, its
// replica's name and its log, written to out. Log lines and audit records
// (TOOLSVC_AUDIT_STDOUT) share out a line at a time; info lines wait up to
// TOOLSVC_LOG_FLUSH_INTERVAL to be written together.
func newApp(cfg config.Config, out io.Writer, red *redact.Redactor) *App {
	if out == nil {
		out = io.Discard
	}
	buf := logbuf.New(out, cfg.Server.LogFlushInterval)
	level, _ := zerolog.ParseLevel(cfg.Server.LogLevel)
	return &App{cfg: cfg, out: buf, replica: replicaID(cfg.Replicas.ReplicaID), log: zerolog.New(red.Writer(buf)).Level(level).With().Timestamp().Logger()}
}

// openFolders opens the workspace and creates the data folder; with a
// public URL, the workspace's media links come with the workspace. The
// keys' own folders the service makes belong to the account exec's
// commands run as (execUser), which must write there.
func (a *App) openFolders(cfg config.Server, publicURL, execUserSpec string) (err error) {
	log := a.log
	var owner *workspace.Owner
	if u, err := execUser(execUserSpec); err != nil {
		return err
	} else if u != nil {
		owner = &workspace.Owner{Uid: int(u.Uid), Gid: int(u.Gid)}
	}
	a.ws, err = workspace.OpenWith(cfg.Workspace, workspace.Options{
		Restrict:    cfg.RestrictWorkspace,
		Warn:        func(msg string) { log.Warn().Msg(msg) },
		FolderOwner: owner,
	})
	if err != nil {
		return err
	}
	a.closers = append(a.closers, func() { a.ws.Close() })
	if publicURL != "" {
		// One secret per process: links die with it.
		if a.links, err = medialink.New(a.ws, medialink.Options{PublicURL: publicURL}); err != nil {
			return err
		}
	}
	a.dataDir, err = filepath.Abs(cfg.DataDir)
	if err != nil {
		return fmt.Errorf("TOOLSVC_DATA_DIR: %w", err)
	}
	if err := os.MkdirAll(a.dataDir, 0o750); err != nil {
		return fmt.Errorf("TOOLSVC_DATA_DIR: %w", err)
	}
	return nil
}

// newRegistry builds the registry every call goes through, with the
// metrics and, when on, the audit log watching it.
func (a *App) newRegistry(calls config.Calls, cfg config.Audit, red *redact.Redactor, enf *policy.Enforcer) error {
	// Metrics watch every call, whichever door it came through.
	a.metrics = metrics.New()
	regOpts := registry.Options{Log: a.log, DefaultTimeout: calls.CallTimeout, Redact: red.String, RedactProgress: red.Progress, Observer: a.metrics, Tracer: a.tracer}
	if enf != nil { // a nil *Enforcer in the interface would not be nil
		regOpts.Policy = enf
	}
	if cfg.AuditEnabled {
		opts := audit.Options{
			Dir:               filepath.Join(a.dataDir, "audit_logs"),
			MaxResultChars:    cfg.AuditMaxResultChars,
			RetentionDays:     cfg.AuditRetentionDays,
			RetentionInterval: time.Hour,
			SigningKeyFile:    cfg.AuditSigningKeyFile,
			Replica:           a.replica,
			Log:               a.log,
		}
		if cfg.AuditStdout {
			opts.Stdout = a.out
		}
		al, err := audit.New(opts)
		if err != nil {
			return err
		}
		a.closers = append(a.closers, func() { al.Close() })
		regOpts.Audit = al
		regOpts.AuditFailOpen = !cfg.AuditRequired
	}
	a.reg = registry.New(regOpts)
	return nil
}

// newAgents builds the sub-agents (spawn, workflow_run, send_message,
// /agents): only with a model endpoint configured and one of those tools
// switched on. closeAgents waits for them to record their end. enf, when
// a policy file is set, bounds each key's sub-agents (its subagents).
func (a *App) newAgents(cfg config.Agents, shutdownTimeout time.Duration, sel Selection, red *redact.Redactor, enf *policy.Enforcer) (agents *agent.Manager, conv *agent.Conversations, closeAgents func(), err error) {
	agentsCfg := cfg
	_, spawnOff := sel.Off("spawn")
	_, workflowOff := sel.Off("workflow_run")
	_, messageOff := sel.Off("send_message")
	if spawnOff && workflowOff && (messageOff || !cfg.XiaozhiConversation) {
		agentsCfg.LLMBaseURL, agentsCfg.LLMModel = "", ""
	}
	var keyLimits func(string) (int, int)
	if enf != nil {
		keyLimits = enf.Subagents
	}
	agents, closeAgents, err = newAgents(a.stopping, agentsCfg, a.agentStores(red.String), shutdownTimeout, a.reg, a.dataDir, a.log, red.String, func() []string { return a.custom.SubagentTools() }, keyLimits, a.approvals, a.tracer)
	if err != nil {
		return nil, nil, nil, err
	}
	if !messageOff {
		if conv, err = newConversations(cfg, a.agentStores(red.String), agents, a.reg, a.dataDir, a.log, red.String); err != nil {
			closeAgents()
			return nil, nil, nil, err
		}
	}
	return agents, conv, closeAgents, nil
}

// newHandler builds the HTTP handler: every door and its gate.
// folderRoot gives the folder a key works in, as the policy in force
// says: its own, or the workspace. nil without a policy.
func (a *App) folderRoot(enf *policy.Enforcer) func(key string) (*os.Root, error) {
	if enf == nil {
		return nil
	}
	return func(key string) (*os.Root, error) {
		ws, err := a.ws.Folder(enf.Folder(key))
		if err != nil {
			return nil, err
		}
		return ws.Current()
	}
}

func (a *App) newHandler(cfg config.Access, calls config.Calls, sk *skills.Loader, skillsRoot func(string) (*os.Root, error), agents *agent.Manager, version string) http.Handler {
	return toolhttp.NewHandler(toolhttp.Options{
		Registry:      a.reg,
		Keys:          httpKeys(cfg),
		MaxBodyBytes:  calls.MaxBodyBytes,
		MaxConcurrent: calls.MaxConcurrentCalls,
		Log:           a.log,
		Stopping:      a.stopping,
		Ready:         a.Ready,
		Routes:        toolhttp.JoinRoutes(toolhttp.SkillsRoutes(sk, skillsRoot, a.log), toolhttp.AgentsRoutes(agents)),
		Version:       version,
		Metrics:       a.metrics.Handler(),
		CORSOrigins:   cfg.CORSOrigins,
		AllowedHosts:  cfg.AllowedHosts,
		Media:         a.links,
		Approvals:     a.approvals,
		// Checked by the configuration: 32 bytes in base64, or empty.
		ApprovalSealKey: func() []byte { k, _ := base64.StdEncoding.DecodeString(string(cfg.ApprovalSealKey)); return k }(),

		BodyTimeout:        calls.BodyTimeout,
		StreamWriteTimeout: calls.StreamWriteTimeout,
		Tracer:             a.tracer,
	})
}

// newTracer builds the tracer when TOOLSVC_OTEL_ENDPOINT is set. It is
// shut down last (Close runs its closers last first), so that the spans
// of the calls, tasks and servers stopped before it are sent.
func (a *App) newTracer(cfg config.Traces, red *redact.Redactor, version string) (err error) {
	a.tracer, err = tracing.New(context.Background(), tracing.Options{
		Endpoint: cfg.OTelEndpoint, CaptureContent: cfg.OTelCaptureContent, Redact: red.String,
		ServiceVersion: version, Log: a.log, Getenv: os.Getenv,
	})
	if err != nil || a.tracer == nil {
		return err
	}
	a.closers = append(a.closers, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := a.tracer.Shutdown(ctx); err != nil {
			a.log.Warn().Err(err).Msg("traces: the spans still queued could not all be sent at shutdown")
		}
	})
	return nil
}

// Handler serves the HTTP API.
func (a *App) Handler() http.Handler { return a.handler }

// Log is the service's logger; what it writes passes the redactor.
func (a *App) Log() zerolog.Logger { return a.log }

// Registry holds the tools that are on.
func (a *App) Registry() *registry.Registry { return a.reg }

// Describe adds what the "listening" log line tells about the service.
func (a *App) Describe(ev *zerolog.Event) {
	au, access := a.cfg.Audit, a.cfg.Access
	ev.Str("workspace", a.ws.Dir()).Bool("restricted", a.ws.Restricted()).
		Bool("audit", au.AuditEnabled).Bool("audit_required", au.AuditRequired).
		Bool("auth", access.KeysConfigured()).Strs("keys", append(access.APIKeys.Names(), access.AdminKeys.Names()...)).
		Strs("admin_keys", access.AdminKeys.Names()).Strs("tools", a.reg.Names())
}

// httpKeys are the API keys and the admin keys as the HTTP gate takes them.
func httpKeys(cfg config.Access) []toolhttp.Key {
	var out []toolhttp.Key
	for _, k := range cfg.APIKeys {
		out = append(out, toolhttp.Key{Name: k.Name, Secret: k.Key})
	}
	for _, k := range cfg.AdminKeys {
		out = append(out, toolhttp.Key{Name: k.Name, Secret: k.Key, Admin: true})
	}
	return out
}

// Ready checks that the workspace and the data folder exist and are
// writable, and that their file systems have MIN_FREE_BYTES free. The
// tools left out are listed beside the checks ("tool:exec": "off: ...")
// without making the service unready, and so are the tools file's MCP
// servers ("mcp:memory": "ok", "starting (since 2 s)" or "down, ...";
// see mcpmount.Mount.Ready): a server starting or down leaves the other
// tools working, so it never makes the service unready.
func (a *App) Ready() (bool, map[string]string) {
	checks := []ready.Check{
		{Name: "workspace", Run: a.ws.Probe},
		{Name: "data_dir", Run: func() error { return ready.Writable(a.dataDir) }},
	}
	if a.shared != nil {
		checks = append(checks, ready.Check{Name: "database", Run: func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if err := a.shared.Ping(ctx); err != nil {
				return errors.New("the database (TOOLSVC_DATABASE_URL) cannot be reached")
			}
			return nil
		}})
	}
	if minFree := a.cfg.Server.MinFreeBytes; minFree > 0 {
		checks = append(checks, ready.Check{Name: "free_space", Run: func() error {
			return ready.FreeSpace(minFree, map[string]string{"workspace": a.ws.Dir(), "data_dir": a.dataDir})
		}})
	}
	r := ready.Run(checks...)
	for tool, why := range a.tools.Off {
		r.Checks["tool:"+tool] = ready.Off + ": " + why
	}
	a.custom.Ready(r.Checks)
	return r.Ready, r.Checks
}

// Reload reads TOOLSVC_TOOLS_FILE again and replaces its tools at once:
// calls already running finish on the old definitions, new calls and
// every listing see the new ones. Then it reads TOOLSVC_POLICY_FILE
// again, checked against the tools now in force. A file with a mistake
// changes nothing of its own; the error is logged and returned. Without
// either file it does nothing.
func (a *App) Reload() error {
	if a.custom == nil && a.policy == nil {
		a.log.Info().Msg("reload: no tools file (TOOLSVC_TOOLS_FILE) nor policy file (TOOLSVC_POLICY_FILE) to reload")
		return nil
	}
	var errs []error
	if a.custom != nil {
		errs = append(errs, a.custom.Reload())
	}
	if a.policy != nil {
		errs = append(errs, a.policy.Reload())
	}
	return errors.Join(errs...)
}

// keyNames are the names of the API keys and the admin keys.
func keyNames(cfg config.Access) []string {
	return append(cfg.APIKeys.Names(), cfg.AdminKeys.Names()...)
}

// policyNames gives what the policy file may name, as the service has it
// at each load: the keys, every tool (the built-in ones, on or off, those
// registered and those of the tools file), the toolsets and the MCP
// servers of the tools file's last good load.
func (a *App) policyNames(cfg config.Access) func() policy.Names {
	return func() policy.Names {
		f := a.custom.Loaded()
		n := policy.Names{Keys: keyNames(cfg), Tools: a.reg.Names(), Toolsets: map[string][]string{}, Servers: serverNames(f),
			NoFolders: a.noFolders()}
		for _, s := range append(Toolsets(), fileToolsets(f)...) {
			n.Toolsets[s.Name] = s.Tools
			n.Tools = append(n.Tools, s.Tools...)
		}
		if f != nil {
			for _, s := range f.Tools {
				n.Tools = append(n.Tools, s.Name)
			}
		}
		return n
	}
}

// noFolders says why keys cannot have folders of their own here, or "":
// exec and the command tools would run unconfined (sandbox none), and a
// command could then reach every folder whatever its key's own.
func (a *App) noFolders() string {
	if a.tools.SandboxMode == string(sandbox.None) {
		return "exec's sandbox is none (TOOLSVC_EXEC_SANDBOX), so a command could reach every key's folder; " +
			"use a sandbox that confines files (auto, landlock or bwrap), or turn exec and the command tools off (TOOLSVC_DISABLED_TOOLS)"
	}
	return ""
}

// Stop begins the shutdown: new calls are refused and running ones
// canceled. The handler still answers, so that the HTTP server can finish
// its exchanges.
func (a *App) Stop() { a.stop() }

// Close stops the service (as Stop) and releases everything it holds:
// it waits for the sub-agents to record their end, then stops the tools'
// browsers and sandboxes, and closes the audit log and the workspace.
func (a *App) Close() {
	a.once.Do(func() {
		a.stop()
		for i := len(a.closers) - 1; i >= 0; i-- {
			a.closers[i]()
		}
		// Last, so the lines of the closing reach the log; later lines
		// are written at once.
		_ = a.out.Close()
	})
}

// FlushLog writes the log lines that wait (the start-up lines, say, so
// that the listening line is seen at once).
func (a *App) FlushLog() { _ = a.out.Flush() }
