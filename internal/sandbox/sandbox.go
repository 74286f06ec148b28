// Package sandbox wraps the shell that exec runs in a kernel sandbox: the
// child sees the system read-only, the workspace read-write and a private
// temporary folder, never the service's data folder or other private paths,
// and no network unless configured.
//
// Two mechanisms are supported. Landlock (an unprivileged Linux security
// module) must be in force before the shell starts: the child is started
// from an OS thread that restricted itself, and inherits the restriction
// (see startLandlocked). Bubblewrap (Debian's bubblewrap) builds a private
// mount, PID and network namespace around the shell.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// Mode names a sandbox mechanism.
type Mode string

// The modes TOOLSVC_EXEC_SANDBOX accepts.
const (
	Auto     Mode = "auto"
	Landlock Mode = "landlock"
	Bwrap    Mode = "bwrap"
	None     Mode = "none"
)

// Options configure a Sandbox.
type Options struct {
	Mode      Mode   // "" means Auto
	Network   bool   // let the child use the network
	Workspace string // absolute, symbolic links resolved; read-write
	// Private lists folders or files the child must neither read nor
	// write (the data folder, TOOLSVC_EXEC_PRIVATE_PATHS). Paths that do
	// not exist are ignored.
	Private []string
	// Bwrap is the bubblewrap binary; default "bwrap" from PATH.
	Bwrap string
}

// Sandbox turns a command line into one that runs inside the chosen
// mechanism. It is safe for concurrent use.
type Sandbox struct {
	mode    Mode
	detail  string
	network bool
	ws      string
	bwrap   string // bubblewrap binary
	policy  policy // landlock rules without the per-call temp folder
	private []string
}

// New detects what the kernel and the system offer and returns a Sandbox of
// the requested mode. Auto picks the strongest available: bubblewrap when a
// trial run works, else Landlock, else none. An explicitly requested mode
// that is unavailable is an error naming why, so start-up stops.
func New(opts Options) (*Sandbox, error) {
	if opts.Mode == "" {
		opts.Mode = Auto
	}
	if opts.Workspace == "" || !filepath.IsAbs(opts.Workspace) {
		return nil, fmt.Errorf("sandbox: workspace must be an absolute path, got %q", opts.Workspace)
	}
	s := &Sandbox{network: opts.Network, ws: opts.Workspace}
	for _, p := range opts.Private {
		if real, err := realPath(p); err == nil {
			s.private = append(s.private, real)
		}
	}
	s.private = append(s.private, systemSecrets()...)

	switch opts.Mode {
	case None:
		s.mode, s.detail = None, "no sandbox: commands see everything the service can see"
		return s, nil
	case Bwrap:
		if err := s.setupBwrap(opts.Bwrap); err != nil {
			return nil, fmt.Errorf("TOOLSVC_EXEC_SANDBOX=bwrap is not available: %w. Install Debian's bubblewrap package and allow user namespaces, or choose landlock, auto or none", err)
		}
		return s, nil
	case Landlock:
		if err := s.setupLandlock(); err != nil {
			return nil, fmt.Errorf("TOOLSVC_EXEC_SANDBOX=landlock is not available: %w. Choose bwrap, auto or none", err)
		}
		return s, nil
	case Auto:
		errB := s.setupBwrap(opts.Bwrap)
		if errB == nil {
			return s, nil
		}
		errL := s.setupLandlock()
		if errL == nil {
			s.detail += fmt.Sprintf(" (bubblewrap unavailable: %v)", errB)
			return s, nil
		}
		s.mode = None
		s.detail = fmt.Sprintf("no sandbox available (bubblewrap: %v; landlock: %v): commands see everything the service can see", errB, errL)
		return s, nil
	}
	return nil, fmt.Errorf("sandbox: unknown mode %q (want auto, landlock, bwrap or none)", opts.Mode)
}

// Mode returns the mechanism in use (never Auto).
func (s *Sandbox) Mode() Mode { return s.mode }

// Describe says what the sandbox does, for the start-up log.
func (s *Sandbox) Describe() string { return s.detail }

// Network reports whether commands may use the network.
func (s *Sandbox) Network() bool { return s.network }

// NetworkEnforced reports whether the network setting is enforced: with
// network off, only a sandbox can take it away.
func (s *Sandbox) NetworkEnforced() bool {
	switch s.mode {
	case Bwrap:
		return true
	case Landlock:
		return s.policy.ABI >= 4
	}
	return s.network
}

// Command returns the program and arguments that run argv (an absolute
// program path and its arguments) inside the sandbox, with tmpDir as the
// child's private temporary folder, and the value TMPDIR should have for
// the child. Start the resulting command with Start.
func (s *Sandbox) Command(tmpDir string, argv []string) (path string, args []string, childTmp string) {
	if s.mode == Bwrap {
		return s.bwrap, s.bwrapArgs(tmpDir, argv), "/tmp"
	}
	return argv[0], argv[1:], tmpDir
}

// Start starts cmd, built from Command with the same tmpDir, inside the
// sandbox.
func (s *Sandbox) Start(cmd *exec.Cmd, tmpDir string) error {
	if s.mode == Landlock {
		return s.startLandlocked(cmd, tmpDir)
	}
	return cmd.Start()
}

// setupBwrap finds bubblewrap and checks with a trial run that it can build
// its namespaces here (containers often forbid them).
func (s *Sandbox) setupBwrap(bin string) error {
	if bin == "" {
		bin = "bwrap"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return errors.New("the bwrap program was not found")
	}
	s.bwrap = path
	s.mode = Bwrap
	if err := s.trial(); err != nil {
		s.mode = None
		return fmt.Errorf("trial run failed: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ver, _ := exec.CommandContext(ctx, path, "--version").Output()
	s.detail = fmt.Sprintf("bubblewrap (%s): system read-only, workspace read-write, private /tmp, data folder and private paths hidden, own PID namespace, network %s",
		strings.TrimSpace(string(ver)), onOff(s.network, "shared", "off (own network namespace)"))
	return nil
}

// trial runs a shell that does nothing inside the sandbox.
func (s *Sandbox) trial() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tmp, err := os.MkdirTemp("", "toolsvc-sandbox-probe-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	path, args, _ := s.Command(tmp, []string{"/bin/sh", "-c", "exit 0"})
	cmd := exec.CommandContext(ctx, path, args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := s.Start(cmd, tmp); err != nil {
		return err
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("%v: %s", err, strings.TrimSpace(out.String()))
	}
	return nil
}

// setupLandlock checks the kernel's Landlock ABI and prepares the rules.
func (s *Sandbox) setupLandlock() error {
	abi, err := llsys.LandlockGetABIVersion()
	if err != nil || abi < 1 {
		return fmt.Errorf("the kernel does not offer Landlock (%v)", err)
	}
	if !s.network && abi < 4 {
		return fmt.Errorf("the kernel's Landlock ABI is %d; turning the network off needs ABI 4. Set TOOLSVC_EXEC_NETWORK=true or use bwrap", abi)
	}
	s.policy = buildPolicy(abi, s.ws, s.private, s.network)
	s.mode = Landlock
	if err := s.trial(); err != nil {
		s.mode = None
		return fmt.Errorf("trial run failed: %v", err)
	}
	net := "on"
	if !s.network {
		net = "off for TCP (Landlock ABI 4 rules); UDP and other protocols not covered"
		if abi >= 10 {
			net = "off for TCP and UDP (Landlock rules); raw and other protocols not covered"
		}
	}
	s.detail = fmt.Sprintf("landlock ABI %d: system read-only, workspace read-write, private temp folder, data folder and private paths unreadable, network %s", abi, net)
	return nil
}

func onOff(b bool, on, off string) string {
	if b {
		return on
	}
	return off
}

// realPath returns p absolute with symbolic links resolved.
func realPath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(abs)
}

// systemSecrets are files readable by root that no command needs.
func systemSecrets() []string {
	var out []string
	for _, p := range []string{"/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/ssh"} {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			out = append(out, real)
		}
	}
	return out
}

// within reports whether p is base or below it.
func within(p, base string) bool {
	return p == base || strings.HasPrefix(p, strings.TrimSuffix(base, "/")+"/")
}
