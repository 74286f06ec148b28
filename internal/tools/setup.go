// Package tools holds one file per tool and Register, which adds the tools
// whose dependencies are configured to a registry.
package tools

import (
	"errors"
	"fmt"
	"os"
	osuser "os/user"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/agent"
	"github.com/countbot/toolsvc/internal/browser"
	"github.com/countbot/toolsvc/internal/config"
	"github.com/countbot/toolsvc/internal/desktop"
	"github.com/countbot/toolsvc/internal/extract"
	"github.com/countbot/toolsvc/internal/memory"
	"github.com/countbot/toolsvc/internal/netguard"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/sandbox"
	"github.com/countbot/toolsvc/internal/shellguard"
	"github.com/countbot/toolsvc/internal/skills"
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
	// is refused); the same loader serves GET /skills. Nil: Register builds it from Config
	// (SKILLS_DISABLED).
	Skills *skills.Loader
	// Unavailable, when set, is told of each tool left out because what
	// it needs is missing here, and why.
	Unavailable func(tool, reason string)
	// Agents, when set, runs sub-agents for spawn and workflow_run; nil
	// (no model endpoint configured) leaves them out.
	Agents *agent.Manager
	// Conversations, when set, answers send_message (the voice-device
	// conversation mode); nil leaves it out.
	Conversations *agent.Conversations
}

// Register builds every tool whose dependencies are configured and adds it
// to reg. The returned function releases what the tools hold (browsers,
// locks); call it on shutdown.
func Register(reg *registry.Registry, d Deps) (cleanup func(), err error) {
	var closers []func()
	cleanup = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	c := d.Config
	// The network guard is built once, before any tool that reaches the
	// network, and shared by all of them (web_fetch, screenshot's proxy...),
	// so that one policy decides every outbound connection.
	if d.Guard == nil {
		g, err := netguard.New(netguard.Options{AllowCIDRs: c.NetAllowCIDRs, AllowHosts: c.NetAllowHosts})
		if err != nil {
			return nil, err
		}
		d.Guard = g
	}
	// read_file of a SKILL.md goes through the skills loader.
	if d.Skills == nil {
		d.Skills = skills.New(d.Workspace.Root(), c.SkillsDisabled)
	}
	list := []registry.Tool{
		NewReadFile(d.Workspace, c.ReadMaxChars, d.Skills),
		NewWriteFile(d.Workspace),
		NewEditFile(d.Workspace),
		NewListDir(d.Workspace, c.ListMaxEntries),
	}
	list = append(list, NewFileSearch(d.Workspace, c.SearchWorkers, c.SearchTimeout))
	// memory: long-term memory in workspace/memory/MEMORY.md, offered
	// unless TOOLSVC_MEMORY_ENABLED is false.
	if c.MemoryEnabled {
		list = append(list, NewMemory(memory.New(d.Workspace.Root(), memory.Options{Root: d.Workspace.Current})))
	}
	// web_fetch dials through the shared guard.
	list = append(list, NewWebFetch(d.Guard, extract.New(extract.Options{}), WebFetchOptions{
		MaxBytes:      c.FetchMaxBytes,
		Timeout:       c.FetchTimeout,
		MaxRedirects:  c.FetchMaxRedirects,
		MaxConcurrent: c.FetchMaxConcurrent,
		MaxURLs:       c.FetchMaxURLs,
	}))
	// screenshot: one headless Chromium shared by every call,
	// started on first use, whose every connection goes through the guard
	// (via a proxy inside the service); stopped on shutdown.
	shots := browser.New(browser.Options{
		ExecPath: c.ChromePath,
		MaxPages: c.ScreenshotMaxPages,
		Guard:    d.Guard,
		Log:      d.Log.With().Str("component", "browser").Logger(),
	})
	closers = append(closers, func() { _ = shots.Close() })
	list = append(list, NewScreenshot(d.Workspace, shots, desktop.New(), ScreenshotOptions{Timeout: c.ScreenshotTimeout}))
	// spawn, workflow_run, send_message: only with a model endpoint behind them.
	if d.Agents != nil {
		list = append(list, NewSpawn(d.Agents, c.AgentTimeout, c.AgentMaxConcurrent))
		list = append(list, NewWorkflowRun(d.Agents, c.AgentTimeout))
	}
	if d.Conversations != nil {
		list = append(list, NewSendMessage(d.Conversations, c.AgentMaxConcurrent))
	}
	// exec: the command guard judges every script, the sandbox confines
	// what passes. A bad pattern or an unavailable sandbox mode that was
	// asked for by name stops start-up.
	ex, err := newExecTool(d)
	if errors.Is(err, sandbox.ErrNoSandbox) {
		// Never a silent downgrade: without a sandbox that works here,
		// exec is left out unless TOOLSVC_EXEC_SANDBOX=none asks for it.
		d.Log.Error().Str("tool", "exec").Str("reason", err.Error()).Msg("exec: off")
		if d.Unavailable != nil {
			d.Unavailable("exec", err.Error())
		}
		return cleanup, registerAll(reg, list, cleanup)
	}
	if err != nil {
		cleanup()
		return nil, err
	}
	closers = append(closers, ex.Close)
	list = append(list, ex)
	return cleanup, registerAll(reg, list, cleanup)
}

func registerAll(reg *registry.Registry, list []registry.Tool, cleanup func()) error {
	for _, t := range list {
		if err := reg.Register(t); err != nil {
			cleanup()
			return err
		}
	}
	return nil
}

// newExecTool builds exec with its command guard and sandbox.
func newExecTool(d Deps) (*Exec, error) {
	c := d.Config
	guard, err := shellguard.New(shellguard.Options{Deny: []string(c.ExecDenyPatterns), Allow: []string(c.ExecAllowPatterns)})
	if err != nil {
		return nil, fmt.Errorf("TOOLSVC_EXEC_DENY_PATTERNS / TOOLSVC_EXEC_ALLOW_PATTERNS: %w", err)
	}
	user, err := execUser(c.ExecUser)
	if err != nil {
		return nil, err
	}
	home, err := execHome(c.ExecHome, user)
	if err != nil {
		return nil, err
	}
	sb, err := sandbox.New(sandbox.Options{
		Mode:      sandbox.Mode(c.ExecSandbox),
		Network:   c.ExecNetwork,
		Workspace: d.Workspace.Dir(),
		Private:   append([]string{d.DataDir}, c.ExecPrivatePaths...),
		Writable:  []string{home},
		MaxProcs:  c.ExecMaxProcs,
		MaxMemory: int64(c.ExecMaxMemory),
		User:      user,
	})
	if err != nil {
		return nil, err
	}
	ev := d.Log.Info()
	if sb.Mode() == sandbox.None || !sb.NetworkEnforced() {
		ev = d.Log.Warn()
	}
	ev.Str("requested", c.ExecSandbox).Str("mode", string(sb.Mode())).Bool("network", c.ExecNetwork).
		Bool("network_enforced", sb.NetworkEnforced()).Bool("contained", sb.Contains()).Str("limits", sb.Limits()).
		Msg("exec sandbox: " + sb.Describe())
	return NewExec(d.Workspace, ExecOptions{
		DefaultTimeout: c.ExecTimeout,
		MaxTimeout:     c.ExecMaxTimeout,
		MaxConcurrent:  c.ExecMaxConcurrent,
		MaxOutput:      c.ExecMaxOutput,
		EnvAllow:       c.ExecEnvAllow,
		Guard:          guard,
		Sandbox:        sb,
		Home:           home,
		Owner:          user,
	}), nil
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

// execHome makes the commands' HOME: the configured folder, or a private
// one in the system temp folder, so that dotfiles and caches that programs
// write do not land in the root of the model's workspace.
func execHome(dir string, user *sandbox.User) (string, error) {
	uid := os.Geteuid()
	if user != nil {
		uid = int(user.Uid)
	}
	if dir == "" {
		dir = filepath.Join(os.TempDir(), fmt.Sprintf("toolsvc-home-%d", uid))
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("TOOLSVC_EXEC_HOME: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() {
		return "", fmt.Errorf("TOOLSVC_EXEC_HOME: %s is not a folder", dir)
	}
	if user != nil {
		if err := os.Chown(dir, int(user.Uid), int(user.Gid)); err != nil {
			return "", fmt.Errorf("TOOLSVC_EXEC_HOME: %w", err)
		}
	} else if owner, other := ownerOther(fi, uid); other {
		// Someone else made the folder first in a shared temp folder.
		return "", fmt.Errorf("TOOLSVC_EXEC_HOME: %s belongs to uid %d, not to the service (uid %d); set TOOLSVC_EXEC_HOME", dir, owner, uid)
	}
	return filepath.Abs(dir)
}
