package app

import (
	"errors"
	"fmt"
	"os"
	osuser "os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/agent"
	"github.com/countbot/toolsvc/internal/browser"
	"github.com/countbot/toolsvc/internal/channels"
	"github.com/countbot/toolsvc/internal/config"
	"github.com/countbot/toolsvc/internal/desktop"
	"github.com/countbot/toolsvc/internal/egress"
	"github.com/countbot/toolsvc/internal/extract"
	"github.com/countbot/toolsvc/internal/homedir"
	"github.com/countbot/toolsvc/internal/medialink"
	"github.com/countbot/toolsvc/internal/memory"
	"github.com/countbot/toolsvc/internal/netguard"
	"github.com/countbot/toolsvc/internal/pathx"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/sandbox"
	"github.com/countbot/toolsvc/internal/shellguard"
	"github.com/countbot/toolsvc/internal/skills"
	"github.com/countbot/toolsvc/internal/tools"
	"github.com/countbot/toolsvc/internal/tracing"
	"github.com/countbot/toolsvc/internal/workspace"
)

// Deps is what the tools are built from. Register hands each tool the parts
// it needs.
type Deps struct {
	Config    config.Config
	Workspace *workspace.Workspace
	DataDir   string // the service's private folder, never visible to tools
	Log       zerolog.Logger
	// Guard is the one network guard every outbound tool dials through.
	// Nil: Register builds it from Config (NET_ALLOW_CIDRS, NET_ALLOW_HOSTS).
	Guard *netguard.Guard
	// Skills gates read_file of skills/<name>/SKILL.md (a disabled skill
	// is refused); the same loader serves GET /skills. Nil: Register
	// builds it from Config (SKILLS_DISABLED).
	Skills *skills.Loader
	// Agents runs sub-agents for spawn and workflow_run; nil (no model
	// endpoint configured) leaves them out.
	Agents *agent.Manager
	// Conversations answers send_message (the voice-device conversation
	// mode); nil leaves it out.
	Conversations *agent.Conversations
	// MediaLinks makes workspace files reachable at TOOLSVC_PUBLIC_URL for
	// the chat platforms that fetch media by URL (QQ); nil without it.
	MediaLinks *medialink.Links
	// Version is the build's version, which the chat channels name in
	// their User-Agent.
	Version string
	// Tracer gives exec, web_fetch, screenshot and the mounted MCP
	// servers' calls their spans; nil without TOOLSVC_OTEL_ENDPOINT.
	Tracer *tracing.Tracer
}

// Tools is what Register built: the tools on, the tools off with the
// reason, and what they hold until Close.
type Tools struct {
	On  []string
	Off map[string]string // tool: why it is off
	// SandboxMode is exec's sandbox (bwrap, landlock, none), or "off"
	// when exec is not offered.
	SandboxMode string
	closers     []func()
	// runner is exec's run path, for command tools; nil when exec is not
	// on.
	runner *execRunner
}

// Close releases what the tools hold (browsers, sandboxes), last built
// first.
func (t *Tools) Close() {
	for i := len(t.closers) - 1; i >= 0; i-- {
		t.closers[i]()
	}
	t.closers = nil
}

// builder builds one tool at a time from the shared parts.
type builder struct {
	Deps
	closers     []func()
	sandboxMode string
	runner      *execRunner // exec's, when exec is on
}

// Register builds the tools sel switches on whose dependencies are here
// and adds them to reg; the others are left out with the reason. It logs
// one line per tool: tool=<name> state=on|off reason=... A setting that
// cannot work (a bad exec pattern, a sandbox mode asked for by name that
// this machine lacks) is an error.
func Register(reg *registry.Registry, d Deps, sel Selection) (*Tools, error) {
	// The network guard is built once, before any tool that reaches the
	// network, and shared by all of them (web_fetch, screenshot's proxy...),
	// so that one policy decides every outbound connection.
	if d.Guard == nil {
		g, err := newGuard(d.Config.Web)
		if err != nil {
			return nil, err
		}
		d.Guard = g
	}
	// read_file of a SKILL.md goes through the skills loader.
	if d.Skills == nil {
		d.Skills = skills.New(d.Workspace.Root(), d.Config.Memory.SkillsDisabled)
	}
	b := &builder{Deps: d, sandboxMode: "off"}
	out := &Tools{Off: map[string]string{}}
	fail := func(err error) (*Tools, error) {
		out.closers = b.closers
		out.Close()
		return nil, err
	}
	for _, set := range toolsets() {
		for _, def := range set.tools {
			if why, off := sel.Off(def.name); off {
				out.Off[def.name] = why
				d.Log.Info().Str("tool", def.name).Str("state", "off").Str("reason", why).Msg("tool")
				continue
			}
			t, note, err := def.build(b)
			if err != nil {
				return fail(err)
			}
			if t == nil {
				out.Off[def.name] = note
				// A tool left out for want of its dependency (no model, no
				// chat channel, no browser) is the normal case at a plain
				// start: info. One the operator asked for by name or
				// toolset in TOOLSVC_TOOLS_ENABLED is a warning.
				ev := d.Log.Info()
				if sel.enabled != nil && slices.Contains(sel.enabled, def.name) {
					ev = d.Log.Warn()
				}
				ev.Str("tool", def.name).Str("state", "off").Str("reason", note).Msg("tool")
				continue
			}
			if err := registerRow(reg, def, t); err != nil {
				return fail(err)
			}
			out.On = append(out.On, def.name)
			ev := d.Log.Info().Str("tool", def.name).Str("state", "on")
			if note != "" {
				ev = ev.Str("reason", note)
			}
			ev.Msg("tool")
		}
	}
	out.closers = b.closers
	out.SandboxMode = b.sandboxMode
	out.runner = b.runner
	return out, nil
}

// newGuard is the network guard of the settings' exceptions
// (NET_ALLOW_CIDRS, NET_ALLOW_HOSTS).
func newGuard(c config.Web) (*netguard.Guard, error) {
	return netguard.New(guardOptions(c))
}

func guardOptions(c config.Web) netguard.Options {
	return netguard.Options{AllowCIDRs: c.NetAllowCIDRs, AllowHosts: c.NetAllowHosts}
}

// registerRow adds the tool t built by the row def to reg. The row's name
// is what switches and agent lists go by, so a tool named otherwise stops
// start-up.
func registerRow(reg *registry.Registry, def toolDef, t registry.Tool) error {
	if t.Name() != def.name {
		return fmt.Errorf("the toolsets row %q built a tool named %q", def.name, t.Name())
	}
	return reg.Register(t)
}

func (b *builder) readFile() (registry.Tool, string, error) {
	return tools.NewReadFile(b.Workspace, b.Config.Files.ReadMaxChars, b.Skills), "", nil
}

func (b *builder) writeFile() (registry.Tool, string, error) {
	return tools.NewWriteFile(b.Workspace), "", nil
}

func (b *builder) editFile() (registry.Tool, string, error) {
	return tools.NewEditFile(b.Workspace), "", nil
}

func (b *builder) listDir() (registry.Tool, string, error) {
	return tools.NewListDir(b.Workspace, b.Config.Files.ListMaxEntries), "", nil
}

func (b *builder) fileSearch() (registry.Tool, string, error) {
	c := b.Config.Files
	return tools.NewFileSearch(b.Workspace, c.SearchWorkers, c.SearchTimeout), "", nil
}

// memory: long-term memory in workspace/memory/MEMORY.md, offered unless
// TOOLSVC_MEMORY_ENABLED is false.
func (b *builder) memory() (registry.Tool, string, error) {
	if !b.Config.Memory.MemoryEnabled {
		return nil, config.Prefix + "_MEMORY_ENABLED is false", nil
	}
	return tools.NewMemory(b.Workspace, func(ws *workspace.Workspace) *memory.Store {
		return memory.New(ws.Root(), memory.Options{Root: ws.Current})
	}), "", nil
}

// webFetch dials through the shared guard.
func (b *builder) webFetch() (registry.Tool, string, error) {
	c := b.Config.Web
	return tools.NewWebFetch(b.Guard, extract.New(extract.Options{}), tools.WebFetchOptions{
		MaxBytes:      c.FetchMaxBytes,
		Timeout:       c.FetchTimeout,
		MaxRedirects:  c.FetchMaxRedirects,
		MaxConcurrent: c.FetchMaxConcurrent,
		MaxURLs:       c.FetchMaxURLs,
		Tracer:        b.Tracer,
	}), "", nil
}

// screenshot: one headless Chromium shared by every call, started on first
// use, whose every connection goes through the guard (via a proxy inside
// the service); stopped on shutdown. With neither Chromium nor an X display
// the tool could only fail, so it is left out; with one of them it is on,
// and a call of the missing kind says what the operator must install.
func (b *builder) screenshot() (registry.Tool, string, error) {
	c := b.Config.Screenshot
	web := "web: "
	chrome, chromeErr := browser.FindChrome(c.ChromePath)
	switch {
	case chromeErr == nil:
		web += chrome
	case c.ChromePath != "":
		web += fmt.Sprintf("%s_CHROME_PATH=%q cannot be run", config.Prefix, c.ChromePath)
	default:
		web += "no Chromium on PATH (chromium, chromium-browser, google-chrome...); install one or set " + config.Prefix + "_CHROME_PATH"
	}
	shots := desktop.New()
	desk := "desktop: "
	_, deskErr := shots.Displays()
	switch {
	case deskErr == nil:
		desk += "DISPLAY=" + os.Getenv("DISPLAY")
	case os.Getenv("DISPLAY") == "":
		desk += "no X display (DISPLAY is not set)"
	default:
		desk += "cannot connect to the X display DISPLAY=" + os.Getenv("DISPLAY")
	}
	note := web + "; " + desk
	if chromeErr != nil && deskErr != nil {
		return nil, note, nil
	}
	br := browser.New(browser.Options{
		ExecPath: c.ChromePath,
		MaxPages: c.ScreenshotMaxPages,
		Guard:    b.Guard,
		Log:      b.Log.With().Str("component", "browser").Logger(),
	})
	b.closers = append(b.closers, func() { _ = br.Close() })
	return tools.NewScreenshot(b.Workspace, br, shots, tools.ScreenshotOptions{Timeout: c.ScreenshotTimeout, Tracer: b.Tracer}), note, nil
}

// spawn: only with a model endpoint behind it.
func (b *builder) spawn() (registry.Tool, string, error) {
	if b.Agents == nil {
		return nil, noModel, nil
	}
	c := b.Config.Agents
	return tools.NewSpawn(b.Agents, c.AgentTimeout, c.AgentMaxConcurrent), "model " + c.LLMModel, nil
}

// sendMedia: only with at least one chat channel configured. Channel
// endpoints are the operator's, so they are not dialed through the
// model-facing network guard; the channel clients refuse redirects so
// that tokens never reach another host.
func (b *builder) sendMedia() (registry.Tool, string, error) {
	o := channels.Options{Version: b.Version}
	if b.MediaLinks != nil {
		o.Links = b.MediaLinks
	}
	c := b.Config.Channels
	m := channels.FromConfig(channelsConfig(c), o)
	if m.Empty() {
		return nil, "no chat channel configured (see docs/channels.md)", nil
	}
	log := b.Log.With().Str("component", "channels").Logger()
	if len(c.QQAppID) > 0 {
		if b.MediaLinks == nil {
			log.Warn().Str("channel", "qq").Msg("TOOLSVC_PUBLIC_URL is not set: files go to QQ as base64 file_data, which QQ's rich-media API documents as not yet supported and may refuse; set TOOLSVC_PUBLIC_URL to the address at which QQ reaches this service, so that QQ fetches each file from a signed link")
		} else {
			log.Info().Str("channel", "qq").Str("public_url", c.PublicURL).Dur("link_ttl", b.MediaLinks.TTL()).Msg("QQ fetches files from signed links at TOOLSVC_PUBLIC_URL/media/")
		}
	}
	return tools.NewSendMedia(b.Workspace, m, log), "", nil
}

// workflowRun: several sub-agents in a pipeline, graph or council; only
// with a model endpoint behind them.
func (b *builder) workflowRun() (registry.Tool, string, error) {
	if b.Agents == nil {
		return nil, noModel, nil
	}
	c := b.Config.Agents
	return tools.NewWorkflowRun(b.Agents, c.AgentTimeout), "model " + c.LLMModel, nil
}

// sendMessage: the voice-device conversation mode, on when asked for and a
// model is configured.
func (b *builder) sendMessage() (registry.Tool, string, error) {
	c := b.Config.Agents
	switch {
	case !c.XiaozhiConversation:
		return nil, config.Prefix + "_XIAOZHI_CONVERSATION is false", nil
	case b.Conversations == nil:
		return nil, noModel, nil
	}
	return tools.NewSendMessage(b.Conversations, c.AgentMaxConcurrent), "model " + c.LLMModel, nil
}

// noModel is why the agent tools are off without a model endpoint.
const noModel = "no model: set " + config.Prefix + "_LLM_BASE_URL and " + config.Prefix + "_LLM_MODEL"

// exec: the command guard judges every script, the sandbox confines what
// passes. A bad pattern or an unavailable sandbox mode that was asked for
// by name stops start-up. Never a silent downgrade: without a sandbox
// that works here, exec is left out unless TOOLSVC_EXEC_SANDBOX=none asks
// for it.
func (b *builder) exec() (registry.Tool, string, error) {
	// Commands run as /bin/sh -c, as models write them. A system without
	// it (Windows) leaves exec out rather than failing every call.
	if _, err := os.Stat(tools.Shell); err != nil {
		return nil, fmt.Sprintf("exec runs commands with %s, which this system (%s) does not have", tools.Shell, runtime.GOOS), nil
	}
	ex, sb, sbOpts, err := newExecTool(b.Config.Exec, b.Guard, b.Workspace, b.DataDir, b.Log, b.Tracer)
	if errors.Is(err, sandbox.ErrNoSandbox) {
		return nil, err.Error(), nil
	}
	if err != nil {
		return nil, "", err
	}
	b.closers = append(b.closers, ex.Close)
	b.sandboxMode = string(sb.Mode())
	b.runner = &execRunner{exec: ex, sandbox: sb, opts: sbOpts}
	return ex, "sandbox " + string(sb.Mode()), nil
}

// newExecTool builds exec with its command guard and sandbox over ws,
// with dataDir hidden from its commands, and returns the options the
// sandbox was built with. With a network allowlist, the proxy that is
// its commands' one way out dials through netGuard. tracer, when set,
// traces each command.
func newExecTool(c config.Exec, netGuard *netguard.Guard, ws *workspace.Workspace, dataDir string, log zerolog.Logger, tracer *tracing.Tracer) (*tools.Exec, *sandbox.Sandbox, sandbox.Options, error) {
	guard, err := shellguard.New(shellguard.Options{Deny: []string(c.ExecDenyPatterns), Allow: []string(c.ExecAllowPatterns)})
	if err != nil {
		return nil, nil, sandbox.Options{}, fmt.Errorf("TOOLSVC_EXEC_DENY_PATTERNS / TOOLSVC_EXEC_ALLOW_PATTERNS: %w", err)
	}
	user, err := execUser(c.ExecUser)
	if err != nil {
		return nil, nil, sandbox.Options{}, err
	}
	home, err := execHome(c.ExecHome, dataDir, user)
	if err != nil {
		return nil, nil, sandbox.Options{}, err
	}
	var writable []string
	if home != "" {
		writable = append(writable, home)
	}
	eg, err := execEgress(c, netGuard, log)
	if err != nil {
		return nil, nil, sandbox.Options{}, err
	}
	sbOpts := sandbox.Options{
		Mode:      sandbox.Mode(c.ExecSandbox),
		Network:   c.ExecNetwork,
		Egress:    eg != nil,
		Workspace: ws.Dir(),
		Private:   append([]string{dataDir}, c.ExecPrivatePaths...),
		Writable:  writable,
		MaxProcs:  c.ExecMaxProcs,
		MaxMemory: int64(c.ExecMaxMemory),
		User:      user,
	}
	sb, err := sandbox.New(sbOpts)
	if errors.Is(err, sandbox.ErrEgressUnavailable) {
		return nil, nil, sandbox.Options{}, fmt.Errorf("TOOLSVC_EXEC_NET_ALLOW: %w", err)
	}
	if err != nil {
		return nil, nil, sandbox.Options{}, err
	}
	ev := log.Info()
	if sb.Mode() == sandbox.None || !sb.NetworkEnforced() || !sb.SignalsContained() || !sb.Contains() {
		ev = log.Warn()
	}
	ev.Str("requested", c.ExecSandbox).Str("mode", string(sb.Mode())).Bool("network", c.ExecNetwork).
		Bool("network_enforced", sb.NetworkEnforced()).Bool("contained", sb.Contains()).
		Bool("signals_contained", sb.SignalsContained()).Str("limits", sb.Limits()).
		Msg(sandboxSummary(sb, c.ExecNetwork))
	// Every mount, namespace and control group path: for whoever needs to
	// know exactly, at debug level, not in every start's log.
	log.Debug().Str("mode", string(sb.Mode())).Str("detail", sb.Describe()).Msg("exec sandbox in detail")
	return tools.NewExec(ws, tools.ExecOptions{
		DefaultTimeout: c.ExecTimeout,
		MaxTimeout:     c.ExecMaxTimeout,
		MaxConcurrent:  c.ExecMaxConcurrent,
		MaxOutput:      c.ExecMaxOutput,
		EnvAllow:       c.ExecEnvAllow,
		Guard:          guard,
		Sandbox:        sb,
		Egress:         eg,
		Home:           home,
		Owner:          user,
		Tracer:         tracer,
	}), sb, sbOpts, nil
}

// execEgress is the proxy's settings for TOOLSVC_EXEC_NET_ALLOW and
// _DENY, or nil without an allowlist. Its connections dial through
// netGuard, which refuses loopback, private and metadata addresses unless
// the operator opened them; nil: a guard with no exceptions.
func execEgress(c config.Exec, netGuard *netguard.Guard, log zerolog.Logger) (*egress.Options, error) {
	if len(c.ExecNetAllow) == 0 {
		return nil, nil
	}
	rules, err := egress.ParseRules(c.ExecNetAllow, c.ExecNetDeny)
	if err != nil {
		return nil, fmt.Errorf("TOOLSVC_EXEC_NET_ALLOW / TOOLSVC_EXEC_NET_DENY: %w", err)
	}
	return &egress.Options{Rules: rules, Guard: netGuard, Log: log.With().Str("component", "egress").Logger()}, nil
}

// sandboxSummary is the start-up log's one short sentence about exec's
// sandbox; the fields beside it and the debug line hold the details.
func sandboxSummary(sb *sandbox.Sandbox, network bool) string {
	parts := []string{"exec sandbox: " + string(sb.Mode())}
	switch {
	case sb.Egress():
		parts = append(parts, "network only through the service's proxy, to the hosts TOOLSVC_EXEC_NET_ALLOW names")
	case network:
		parts = append(parts, "network on")
	case sb.NetworkEnforced():
		parts = append(parts, "network off")
	default:
		parts = append(parts, "network off but NOT enforced")
	}
	if sb.SignalsContained() {
		parts = append(parts, "a command's signals reach only its own processes")
	} else {
		parts = append(parts, "a command can signal every process of its account, the service included (needs Linux 6.12, or CAP_SYS_ADMIN or user namespaces for a PID namespace)")
	}
	if sb.Contains() {
		parts = append(parts, "every process ends with its command")
	} else {
		parts = append(parts, "a detached process can outlive its command")
	}
	return strings.Join(append(parts, "limits: "+sb.Limits()), ", ")
}

// execUser resolves TOOLSVC_EXEC_USER: a user name, or uid[:gid].
func execUser(spec string) (*sandbox.User, error) {
	if spec == "" {
		return nil, nil
	}
	name, group, _ := strings.Cut(spec, ":")
	if uid, err := strconv.ParseUint(name, 10, 32); err == nil {
		gid := uid
		if group != "" {
			g, err := strconv.ParseUint(group, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("TOOLSVC_EXEC_USER: %q is not uid[:gid]", spec)
			}
			gid = g
		}
		if uid == 0 {
			return nil, errors.New("TOOLSVC_EXEC_USER: uid 0 is root; name an unprivileged account")
		}
		return &sandbox.User{Name: spec, Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	u, err := osuser.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("TOOLSVC_EXEC_USER: %w", err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	if uid == 0 {
		return nil, errors.New("TOOLSVC_EXEC_USER: that account is root; name an unprivileged one")
	}
	return &sandbox.User{Name: name, Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// execHome prepares TOOLSVC_EXEC_HOME, the HOME kept between calls: the
// service creates the folder itself and refuses one someone else could
// have planted files in (see homedir). Empty: "", each call gets its own
// HOME. The folder may not overlap the data folder, which commands must
// never reach.
func execHome(dir, dataDir string, user *sandbox.User) (string, error) {
	if dir == "" {
		return "", nil
	}
	var hu *homedir.User
	if user != nil {
		hu = &homedir.User{Uid: user.Uid, Gid: user.Gid}
	}
	home, err := homedir.Prepare(dir, hu)
	if err != nil {
		return "", fmt.Errorf("TOOLSVC_EXEC_HOME: %w", err)
	}
	if data, err := filepath.EvalSymlinks(dataDir); err == nil && (pathx.Contains(data, home) || pathx.Contains(home, data)) {
		return "", fmt.Errorf("TOOLSVC_EXEC_HOME: %s overlaps the data folder %s, which commands must not reach; name a folder outside it", home, data)
	}
	return home, nil
}
