//go:build !linux

package sandbox

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"runtime"

	"github.com/countbot/toolsvc/internal/procgroup"
)

// Sandbox starts commands unconfined: Landlock, bubblewrap, seccomp,
// namespaces and control groups are Linux-only, so only mode None exists
// here. It is safe for concurrent use.
type Sandbox struct {
	network bool
	limits  bool // process or memory limits were asked for
}

// New returns a Sandbox of mode None, the only one this system has. Auto
// fails with ErrNoSandbox, so that exec is left out rather than run
// unconfined by surprise; Landlock and Bwrap fail naming the platform.
func New(opts Options) (*Sandbox, error) {
	if opts.Mode == "" {
		opts.Mode = Auto
	}
	if opts.Workspace == "" || !filepath.IsAbs(opts.Workspace) {
		return nil, fmt.Errorf("sandbox: workspace must be an absolute path, got %q", opts.Workspace)
	}
	switch opts.Mode {
	case None:
	case Auto:
		return nil, fmt.Errorf("%w: Landlock, bubblewrap and seccomp are Linux-only, and this is %s; exec is off. Set TOOLSVC_EXEC_SANDBOX=none to run commands without a sandbox", ErrNoSandbox, runtime.GOOS)
	case Bwrap, Landlock:
		return nil, fmt.Errorf("TOOLSVC_EXEC_SANDBOX=%s is not available: it is Linux-only, and this is %s. Choose none, or auto to leave exec out", opts.Mode, runtime.GOOS)
	default:
		return nil, fmt.Errorf("sandbox: unknown mode %q (want auto, landlock, bwrap or none)", opts.Mode)
	}
	if opts.User != nil {
		return nil, fmt.Errorf("TOOLSVC_EXEC_USER=%s is Linux-only, and this is %s", opts.User.Name, runtime.GOOS)
	}
	if opts.Egress {
		// Refused rather than ignored: commands here would reach the
		// whole network, which is more than an allowlist lets them.
		return nil, fmt.Errorf("%w: a network allowlist needs a network namespace per command, which is Linux-only, and this is %s", ErrEgressUnavailable, runtime.GOOS)
	}
	return &Sandbox{network: opts.Network, limits: opts.MaxProcs > 0 || opts.MaxMemory > 0}, nil
}

// Close does nothing: there is nothing to release.
func (s *Sandbox) Close() {}

// For returns ErrFolderUnconfined: a key's own folder needs a sandbox that
// keeps commands out of its neighbours, and here commands run without a
// file-system sandbox (mode None), so they are not run at all.
func (s *Sandbox) For(workspace string, writable ...string) (*Sandbox, error) {
	return nil, ErrFolderUnconfined
}

// With returns s: here nothing is confined (mode None), so every folder
// the service's user may write is writable already.
func (s *Sandbox) With(writable ...string) (*Sandbox, error) { return s, nil }

// Mode returns None.
func (s *Sandbox) Mode() Mode { return None }

// Describe says what the sandbox does, for the start-up log.
func (s *Sandbox) Describe() string {
	d := "no sandbox: commands can read and write everything the service's user can, the audit log included; " +
		"network NOT enforced; no seccomp filter, namespaces or control groups (Linux-only, this is " + runtime.GOOS + ")"
	if runtime.GOOS == "windows" {
		d += "; only the command's own process is killed when it ends"
	} else {
		d += "; only the command's process group is killed when it ends (a process that starts a session of its own may outlive it)"
	}
	if s.limits {
		d += "; process and memory limits NOT enforced"
	}
	return d
}

// Network reports whether commands may use the network.
func (s *Sandbox) Network() bool { return s.network }

// Egress reports false: New refuses Options.Egress here.
func (s *Sandbox) Egress() bool { return false }

// NetworkEnforced reports whether the network setting is enforced: only
// when the network is on, since nothing here can take it away.
func (s *Sandbox) NetworkEnforced() bool { return s.network }

// Contains reports false: only the command's process group (on Windows,
// the process) is killed.
func (s *Sandbox) Contains() bool { return false }

// SignalsContained reports whether a command's signals are kept from the
// processes its call did not start: never here.
func (s *Sandbox) SignalsContained() bool { return false }

// Limits reports "none": no process or memory limit is enforced.
func (s *Sandbox) Limits() string { return "none" }

// FreshTemp reports false: the caller makes each command's temporary
// folder.
func (s *Sandbox) FreshTemp() (dir string, ok bool) { return "", false }

// Command returns argv unchanged, with tmpDir as the child's temporary
// folder.
func (s *Sandbox) Command(tmpDir string, argv []string) (path string, args []string, childTmp string) {
	return argv[0], argv[1:], tmpDir
}

// Child is a command started by Start.
type Child struct {
	cmd *exec.Cmd
}

// Start starts cmd, made with exec.CommandContext, in a process group of
// its own where the system has them (Windows: as a plain process). When the
// context is done the group (the process) is killed.
func (s *Sandbox) Start(cmd *exec.Cmd, tmpDir string) (*Child, error) {
	procgroup.Prepare(cmd, cmd.WaitDelay)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &Child{cmd: cmd}, nil
}

// StartContext is Start: there is no sandbox built ahead here, and the
// command's own context ends it.
func (s *Sandbox) StartContext(_ context.Context, cmd *exec.Cmd, tmpDir string) (*Child, error) {
	return s.Start(cmd, tmpDir)
}

// Egress returns nil: New refuses Options.Egress here, so no command has
// a listener of its own. It exists so that callers compile everywhere.
func (c *Child) Egress() net.Listener { return nil }

// Pid returns the command's process ID.
func (c *Child) Pid() int { return c.cmd.Process.Pid }

// Kill kills the command (and its process group where there is one).
func (c *Child) Kill() { _ = procgroup.Kill(c.cmd.Process.Pid) }

// Wait waits for the command to end and kills what is left of its group.
// contained is always false: nothing here knows every process it started.
func (c *Child) Wait() (err error, contained bool) {
	return procgroup.Wait(c.cmd), false
}
