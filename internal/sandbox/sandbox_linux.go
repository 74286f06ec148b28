package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/countbot/toolsvc/internal/cgroups"
	"github.com/countbot/toolsvc/internal/netinit"
)

// Sandbox turns a command line into one that runs inside the chosen
// mechanism, and starts it. It is safe for concurrent use.
type Sandbox struct {
	mode    Mode
	detail  string
	network bool
	// egress: each command gets a network namespace of its own whose
	// only way out is a listener on EgressAddr (egress_linux.go), and
	// egressTCP: Landlock lets its TCP reach that port only (ABI 4).
	egress    bool
	egressTCP bool
	// netinit is the service's binary where each command's first program
	// makes its network namespace (no CAP_SYS_ADMIN); "" where its
	// launching thread does.
	netinit  string
	ws       string
	writable []string
	bwrap    string // bubblewrap binary
	policy   policy // landlock rules without the per-call temp folder
	// With mounts of its own a command gets its private paths covered
	// by mounts (hidden), and Landlock rules that need no carving around
	// them (mounted).
	mounted policy
	hidden  []string
	private []string
	user    *User

	lastCap   int              // highest capability number the kernel knows
	seccomp   *filter          // nil where the kernel has no seccomp
	netFilter bool             // seccomp refuses sockets (network off without a network namespace)
	pidns     bool             // each command is the first process of its own PID namespace
	userns    bool             // that PID namespace is in a user namespace of the command's own (a service without CAP_SYS_ADMIN)
	scoped    bool             // each command is in a Landlock domain of its call's own that scopes signals
	noScope   bool             // Landlock's signal scoping is treated as missing (tests)
	noUserns  bool             // user namespaces are treated as missing (tests)
	mountns   bool             // each command has its own mounts: private /proc, empty /run and /var/tmp
	tmpMount  string           // root only: the folder each command's own tmpfs is mounted on, in its mount namespace
	bwrapTmp  bool             // bubblewrap can size a tmpfs: each command's /tmp is a fresh one
	subreaper bool             // the service reaps its commands' orphans and kills them by mark
	leaders   sync.Map         // pid -> true: the shells of running commands, which os/exec reaps
	launching sync.RWMutex     // held to read while a command starts, to write while a sweep reaps
	cg        *cgroups.Manager // nil without writable control groups
	spareMu   sync.Mutex       // guards the four below
	spares    bool             // New has finished and Close not begun: spares may be made
	spare     *spare           // a launching thread confined ahead, or nil
	warming   bool             // a spare is being made
	warmed    *sync.Cond       // signalled when warming ends
	limits    cgroups.Limits
	ulimit    string   // shell prefix setting rlimits where control groups cannot
	common    []string // what setupCommon found, for Describe
	parts     []string // what the chosen mode adds
	opts      Options  // what New was given, for the sandboxes For makes
	folders   folderCache
}

// New detects what the kernel and the system offer and returns a Sandbox of
// the requested mode. Auto picks the strongest available: bubblewrap when a
// trial run works, else Landlock; when neither works it returns an error
// wrapping ErrNoSandbox, so that commands never run unconfined by surprise.
// An explicitly requested mode that is unavailable is an error naming why.
func New(opts Options) (*Sandbox, error) {
	s, err := newSandbox(opts)
	if err != nil {
		return nil, err
	}
	// The trial runs are over: from here on the settings are fixed, and
	// a thread confined ahead is confined as a command's would be.
	s.spareMu.Lock()
	s.spares = true
	s.spareMu.Unlock()
	return s, nil
}

func newSandbox(opts Options) (*Sandbox, error) {
	if opts.Mode == "" {
		opts.Mode = Auto
	}
	if err := checkOptions(opts); err != nil {
		return nil, err
	}
	var netinitExe string
	if opts.Egress {
		// Before any mode is tried: their trial runs would otherwise
		// fail on the namespace and be retried with less confinement.
		var err error
		if netinitExe, err = chooseEgress(opts); err != nil {
			return nil, err
		}
	}
	opts.Private, opts.Writable = slices.Clone(opts.Private), slices.Clone(opts.Writable)
	s := &Sandbox{opts: opts, network: opts.Network, egress: opts.Egress, netinit: netinitExe, ws: opts.Workspace, user: opts.User, noScope: opts.noScope, noUserns: opts.noUserns,
		limits: cgroups.Limits{MaxProcs: opts.MaxProcs, MaxMemory: opts.MaxMemory}, lastCap: lastCap()}
	s.warmed = sync.NewCond(&s.spareMu)
	if err := s.resolvePaths(opts); err != nil {
		return nil, err
	}
	s.setupCommon()
	if os.Geteuid() == 0 {
		// Only a service that can build mount namespaces uses it; an
		// empty folder costs nothing where it ends up unused.
		if d, err := os.MkdirTemp("", "toolsvc-exec-"); err == nil {
			s.tmpMount = d
		}
	}
	if opts.Mode != Auto {
		if err := s.setupMode(opts); err != nil {
			s.Close()
			return nil, err
		}
		return s, nil
	}
	errB := s.setupBwrap(opts.Bwrap)
	if errB == nil {
		return s, nil
	}
	errL := errors.New("disabled")
	if !opts.noLandlock {
		errL = s.setupLandlock()
	}
	if errL == nil && !s.SignalsContained() {
		errL = errors.New(uncontainedSignals)
	}
	if errL == nil {
		s.detail += fmt.Sprintf(" (bubblewrap unavailable: %v)", errB)
		return s, nil
	}
	s.Close()
	return nil, fmt.Errorf("%w (bubblewrap: %w; landlock: %w); exec is off. Install bubblewrap, run on Linux 5.13 or newer with Landlock enabled, or set TOOLSVC_EXEC_SANDBOX=none to run commands without a sandbox", ErrNoSandbox, errB, errL)
}

// checkOptions refuses options no sandbox can be made from.
func checkOptions(opts Options) error {
	if opts.Workspace == "" || !filepath.IsAbs(opts.Workspace) {
		return fmt.Errorf("sandbox: workspace must be an absolute path, got %q", opts.Workspace)
	}
	switch opts.Mode {
	case Auto, None, Bwrap, Landlock:
	default:
		return fmt.Errorf("sandbox: unknown mode %q (want auto, landlock, bwrap or none)", opts.Mode)
	}
	if opts.User != nil && os.Geteuid() != 0 {
		return fmt.Errorf("TOOLSVC_EXEC_USER=%s needs the service to run as root", opts.User.Name)
	}
	if opts.Egress && opts.Network {
		return errors.New("sandbox: a network allowlist (Egress) and the whole network (Network) exclude each other")
	}
	return nil
}

// resolvePaths resolves the private and writable paths, as the rules and
// mounts name them: a private path that does not exist is left out, a
// writable one must exist.
func (s *Sandbox) resolvePaths(opts Options) error {
	for _, p := range opts.Private {
		if resolved, err := realPath(p); err == nil {
			s.private = append(s.private, resolved)
		}
	}
	s.private = append(s.private, systemSecrets()...)
	for _, p := range opts.Writable {
		resolved, err := realPath(p)
		if err != nil {
			return fmt.Errorf("sandbox: writable folder %s: %w", p, err)
		}
		s.writable = append(s.writable, resolved)
	}
	return nil
}

// setupMode sets up the mode asked for by name, or says why it is not
// available here.
func (s *Sandbox) setupMode(opts Options) error {
	switch opts.Mode {
	case None:
		return s.setupNone()
	case Bwrap:
		if err := s.setupBwrap(opts.Bwrap); err != nil {
			return fmt.Errorf("TOOLSVC_EXEC_SANDBOX=bwrap is not available: %w. Install Debian's bubblewrap package and allow user namespaces, or choose landlock, auto or none", err)
		}
	case Landlock:
		if err := s.setupLandlock(); err != nil {
			return fmt.Errorf("TOOLSVC_EXEC_SANDBOX=landlock is not available: %w. Choose bwrap, auto or none", err)
		}
	}
	return nil
}

// uncontainedSignals says why a mode without a way to keep a command's
// signals in its call is refused in Auto and named in Describe.
const uncontainedSignals = "a command could signal every process of the account it runs as, the service included: " +
	"Landlock's signal scoping needs Linux 6.12, and a PID namespace needs CAP_SYS_ADMIN or user namespaces"

// setupCommon prepares what applies in every mode: the control groups, or
// the rlimits that stand in for them.
func (s *Sandbox) setupCommon() {
	// Control groups are used even without limits: killing a command's
	// group reaches every process it started.
	cg, err := cgroups.New(s.limits)
	if err == nil {
		s.cg = cg
		s.common = append(s.common, "control group per command: "+cg.Describe())
	} else {
		s.common = append(s.common, "no control groups ("+err.Error()+")")
	}
	s.ulimit = s.rlimitPrefix()
}

// Close releases the control group folders and the temporary folders'
// mount point, and closes the sandboxes For made.
func (s *Sandbox) Close() {
	s.closeFolders()
	s.stopSpares()
	if s.cg != nil {
		s.cg.Close()
	}
	if s.tmpMount != "" {
		_ = os.Remove(s.tmpMount)
	}
}

// FreshTemp reports whether the sandbox gives each command a temporary
// folder of its own, fresh and empty, holding an empty folder TempHome:
// a tmpfs mounted in the command's own mount namespace, gone with its
// last process, so that nothing is made on or removed from a disk per
// command. dir is then what to pass to Command and Start as tmpDir. When
// ok is false, the caller makes a fresh folder per command and removes it
// afterwards.
//
// The tmpfs is as large as the memory limit, when there is one: its pages
// are the command's memory, counted by its control group.
func (s *Sandbox) FreshTemp() (dir string, ok bool) {
	switch {
	case s.mode == Bwrap:
		return "", s.bwrapTmp
	case s.mountns && s.tmpMount != "":
		return s.tmpMount, true
	}
	return "", false
}

// Mode returns the mechanism in use (never Auto).
func (s *Sandbox) Mode() Mode { return s.mode }

// Describe says what the sandbox does, for the start-up log.
func (s *Sandbox) Describe() string {
	return s.detail + "; " + strings.Join(append(append([]string(nil), s.common...), s.parts...), "; ")
}

// Network reports whether commands may use the network.
func (s *Sandbox) Network() bool { return s.network }

// Egress reports whether each command reaches the network only through
// the listener its Child's Egress returns.
func (s *Sandbox) Egress() bool { return s.egress }

// NetworkEnforced reports whether the network setting is enforced: with
// network off, only a network namespace or the seccomp filter can take it
// away. A sandbox with Egress is made only where it is enforced.
func (s *Sandbox) NetworkEnforced() bool {
	if s.network || s.egress {
		return true
	}
	return s.mode == Bwrap || s.netFilter
}

// Contains reports whether every process a command starts is known to end
// with the call: true with a PID namespace or a control group per command,
// false where only the command's process group can be killed (a process
// that detached into a session of its own is then out of reach).
func (s *Sandbox) Contains() bool {
	return s.mode == Bwrap || s.pidns || (s.cg != nil && s.cg.Kills()) || s.subreaper && s.scoped
}

// SignalsContained reports whether no signal a command sends can reach a
// process its call did not start (the service, other calls, the rest of
// the account's processes): true with a PID namespace of the command's
// own or a Landlock domain of its call's own that scopes signals.
func (s *Sandbox) SignalsContained() bool {
	return s.mode == Bwrap || s.pidns || s.scoped
}

// Limits describes how the process and memory limits are enforced: "cgroup",
// "rlimit" (per process, and RLIMIT_NPROC not at all for root), or "none".
func (s *Sandbox) Limits() string {
	switch {
	case s.cg != nil && (s.cg.LimitsProcs() || s.cg.LimitsMemory()):
		return "cgroup"
	case s.ulimit != "":
		return "rlimit"
	}
	return "none"
}

// Command returns the program and arguments that run argv (an absolute
// program path and its arguments) inside the sandbox, with tmpDir as the
// child's private temporary folder, and the value TMPDIR should have for
// the child. Start the resulting command with Start.
func (s *Sandbox) Command(tmpDir string, argv []string) (path string, args []string, childTmp string) {
	childTmp = s.childTmp(tmpDir)
	if s.pidns {
		// The first process of a PID namespace ignores signals it has no
		// handler for, even SIGKILL from inside, and `kill $$` must still
		// work: a shell stays first and runs the command as its child.
		argv = append([]string{"/bin/sh", "-c", `"$0" "$@"; exit $?`}, argv...)
	}
	if s.mode == Bwrap {
		argv = append([]string{s.bwrap}, s.bwrapArgs(tmpDir, argv)...)
	}
	argv = s.limited(argv)
	if s.netinit != "" && s.mode != Bwrap {
		// First of all: only the first program the process executes
		// holds the capabilities that make the network namespace.
		argv = netinit.Args("/proc/self/exe", s.netinitFD(), argv)
	}
	return argv[0], argv[1:], childTmp
}

// limited returns argv run with the sandbox's resource limits where they
// are set by a shell (no control groups): the shell sets them before
// anything else runs, around bubblewrap too (inside its user namespace
// the process limit would count afresh), so nothing can fork between
// start and limit.
func (s *Sandbox) limited(argv []string) []string {
	if s.ulimit == "" {
		return argv
	}
	return append([]string{"/bin/sh", "-c", s.ulimit + ` || exit 125; exec "$0" "$@"`}, argv...)
}

// childTmp returns where a command sees its temporary folder tmpDir.
func (s *Sandbox) childTmp(tmpDir string) string {
	if s.mode == Bwrap {
		return "/tmp"
	}
	return tmpDir
}

// setupNone is the explicit choice of no file-system sandbox: the rest of
// the confinement (capabilities, seccomp, control groups) still applies.
func (s *Sandbox) setupNone() error {
	s.mode = None
	s.egressTCP = s.egress && landlockTCP()
	if err := s.setupFilter(true); err != nil {
		return err
	}
	s.detail = "no sandbox: commands can read and write everything the service's user can, the audit log included"
	switch {
	case s.egress:
		s.detail += "; network " + s.egressDetail()
	case !s.network && !s.netFilter:
		s.detail += "; network NOT enforced"
	}
	return nil
}

// setupFilter compiles the seccomp filter and runs a trial command with
// everything in force; without seccomp, or where the trial fails with the
// PID namespace, it retries without them and says so.
func (s *Sandbox) setupFilter(noSocketsWithoutNetns bool) error {
	s.parts = nil // a mode tried before (auto) says nothing of this one
	rule := s.socketRule(noSocketsWithoutNetns)
	f, err := newFilter(rule)
	if err == nil {
		s.seccomp, s.netFilter = f, rule.refuse && len(rule.allow) == 0
	} else {
		s.parts = append(s.parts, "no seccomp filter ("+err.Error()+")")
	}
	s.scoped = s.mode != Bwrap && s.scopeAvailable()
	s.pidns = s.mode != Bwrap && os.Geteuid() == 0
	s.userns = false
	s.mountns = s.pidns
	// One trial with everything in force; on failure, the next weaker
	// setting goes and the trial runs again.
	err = s.trial()
	if err != nil && s.mountns {
		s.parts = append(s.parts, fmt.Sprintf("no private mounts (%v)", err))
		s.mountns = false
		err = s.trial()
	}
	if err != nil && s.pidns {
		s.parts = append(s.parts, fmt.Sprintf("no PID namespace (%v)", err))
		s.pidns = false
		err = s.trial()
	}
	if err != nil && s.seccomp != nil {
		s.parts = append(s.parts, fmt.Sprintf("no seccomp filter (%v)", err))
		s.seccomp, s.netFilter = nil, false
		err = s.trial()
	}
	if err != nil && s.scoped {
		s.parts = append(s.parts, fmt.Sprintf("no signal scoping (%v)", err))
		s.scoped = false
		err = s.trial()
	}
	if err != nil {
		return fmt.Errorf("trial run failed: %w", err)
	}
	if s.egress && s.seccomp == nil {
		// The namespace holds IP sockets in, not the others (see
		// socketRule): without the filter, the allowlist would not hold.
		return egressUnavailable(errors.New("the seccomp filter that keeps commands from sockets a network namespace does not confine (Unix by path, vsock) is not available here"))
	}
	if s.mode != Bwrap && !s.pidns && !s.scoped {
		s.tryUserNamespace()
	}
	s.subreaper = false
	if s.mode != Bwrap && !s.pidns && (s.cg == nil || !s.cg.Kills()) {
		if err := becomeSubreaper(); err == nil {
			s.subreaper = true
		} else {
			s.parts = append(s.parts, fmt.Sprintf("not the subreaper of commands (%v)", err))
		}
	}
	s.parts = append(s.parts, s.privilegeDetail())
	return nil
}

func (s *Sandbox) privilegeDetail() string {
	d := "commands get no capabilities and no_new_privs"
	if s.seccomp != nil {
		d += ", a seccomp filter refusing privileged calls"
		switch {
		case s.netFilter:
			d += " and every socket()"
		case s.egress && s.mode == Bwrap:
			d += " and sockets but IPv4, IPv6 and Unix ones"
		case s.egress:
			d += " and sockets but IPv4 and IPv6 ones"
		}
	}
	d += s.processDetail()
	if s.user != nil {
		d += fmt.Sprintf("; run as %s (uid %d)", s.user.Name, s.user.Uid)
	}
	switch s.Limits() {
	case "cgroup":
		d += fmt.Sprintf("; limits by control group: %s", s.limitText())
	case "rlimit":
		d += fmt.Sprintf("; limits by rlimit, per process: %s", s.limitText())
		if os.Geteuid() == 0 && s.user == nil && s.limits.MaxProcs > 0 {
			d += " (the kernel does not apply the process limit to root: set TOOLSVC_EXEC_USER)"
		}
	default:
		if s.limits.MaxProcs > 0 || s.limits.MaxMemory > 0 {
			d += "; process and memory limits NOT enforced"
		}
	}
	return d
}

// processDetail says how a command's processes are kept to its call: who
// its signals can reach, and what ends them when it ends.
func (s *Sandbox) processDetail() string {
	var d string
	switch {
	case s.mode == Bwrap:
		d = "; own PID namespace: its signals reach only its own processes, and every process ends with the command"
	case s.pidns && s.userns:
		d = "; own PID namespace, in a user namespace of its own where it sees itself as " + s.usernsIdentity() +
			": its signals reach only its own processes, and every process ends with the command"
	case s.pidns:
		d = "; own PID namespace: its signals reach only its own processes, and every process ends with the command"
		if s.mountns {
			d += "; own mounts: a /proc showing no process it could not inspect anyway, empty /run and /var/tmp"
		}
	case s.scoped:
		d = "; a Landlock domain of the call's own that scopes signals: its signals reach only processes its call started"
	default:
		d = "; signals NOT contained: " + uncontainedSignals
	}
	switch {
	case s.mode == Bwrap || s.pidns:
	case s.cg != nil && s.cg.Kills():
		d += "; the command's control group is killed when it ends"
	case s.subreaper && s.scoped:
		d += "; the service is the subreaper of the commands' processes and, when a call ends, kills every process in the call's Landlock domain, however it detached"
	case s.subreaper:
		d += "; the service is the subreaper of the commands' processes and kills every one still carrying its call's mark when the call ends (a process that replaces its whole environment is NOT recognised and may outlive it)"
	default:
		d += "; only the command's process group is killed when it ends (a process that starts a session of its own may outlive it)"
	}
	return d
}

// egressDetail says how a command with Egress reaches the network.
func (s *Sandbox) egressDetail() string {
	d := "only through the service's proxy at " + EgressAddr + ", in a network namespace of its own holding loopback alone"
	if s.netinit != "" {
		d += ", made by its first program (the service's binary) in a user namespace of the command's own"
	}
	switch {
	case s.egressTCP && s.netinit != "":
		d += " (Landlock lets TCP connect to the proxy's port only, and bind none but that one, which the listener keeps taken)"
	case s.egressTCP:
		d += " (Landlock lets TCP connect to the proxy's port only, and bind none)"
	}
	return d
}

func (s *Sandbox) limitText() string {
	var p []string
	if s.limits.MaxProcs > 0 {
		p = append(p, fmt.Sprintf("%d processes", s.limits.MaxProcs))
	}
	if s.limits.MaxMemory > 0 {
		p = append(p, fmt.Sprintf("%d MiB memory", s.limits.MaxMemory>>20))
	}
	return strings.Join(p, ", ")
}

// trial runs a shell that does nothing inside the sandbox, with a
// temporary folder made as exec makes it.
func (s *Sandbox) trial() error {
	tmp, fresh := s.FreshTemp()
	if !fresh {
		var err error
		if tmp, err = os.MkdirTemp("", "toolsvc-sandbox-probe-*"); err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		if s.user != nil {
			if err := os.Chown(tmp, int(s.user.Uid), int(s.user.Gid)); err != nil {
				return err
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	argv := []string{"/bin/sh", "-c", "exit 0"}
	if fresh {
		// The sandbox made the folder: the shell checks that it is there
		// with its HOME, writable.
		argv = []string{"/bin/sh", "-c", `: > "$0/probe"`, filepath.Join(s.childTmp(tmp), TempHome)}
	}
	path, args, _ := s.Command(tmp, argv)
	cmd := exec.CommandContext(ctx, path, args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	c, err := s.Start(cmd, tmp)
	if err != nil {
		return err
	}
	if err, _ := c.Wait(); err != nil {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(out.String()))
	}
	return nil
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
		if resolved, err := filepath.EvalSymlinks(p); err == nil {
			out = append(out, resolved)
		}
	}
	return out
}

// rlimitPrefix returns the shell commands that set per-process limits where
// control groups do not enforce them, or "" when none are needed. The
// option naming the process limit differs between shells (dash: -p, bash
// and others: -u), so both are tried once at start-up, and the one that
// really changed the limit is kept.
func (s *Sandbox) rlimitPrefix() string {
	var parts []string
	if s.limits.MaxProcs > 0 && (s.cg == nil || !s.cg.LimitsProcs()) {
		for _, opt := range []string{"-u", "-p"} {
			// The probe reads the limit back with the builtin: forking a
			// program could itself fail where the user is at the limit.
			set := fmt.Sprintf("ulimit %s %d", opt, s.limits.MaxProcs)
			out, err := exec.Command("/bin/sh", "-c", set+" 2>/dev/null && ulimit "+opt).Output()
			if err == nil && strings.TrimSpace(string(out)) == strconv.Itoa(s.limits.MaxProcs) {
				parts = append(parts, set)
				break
			}
		}
	}
	if s.limits.MaxMemory > 0 && (s.cg == nil || !s.cg.LimitsMemory()) {
		// RLIMIT_DATA counts memory a process has written to or may, not
		// address space merely reserved (as Go, Java and V8 reserve), so
		// it limits without breaking those runtimes as RLIMIT_AS would.
		parts = append(parts, fmt.Sprintf("ulimit -d %d", s.limits.MaxMemory>>10))
	}
	return strings.Join(parts, " && ")
}

// isLeader reports whether pid is the shell of a running command.
func (s *Sandbox) isLeader(pid int) bool {
	_, ok := s.leaders.Load(pid)
	return ok
}

// sweep is the package's sweep, with no command starting during a pass.
func (s *Sandbox) sweep(mark string, leader int, limit time.Duration) bool {
	return sweep(mark, leader, s.isLeader, &s.launching, limit)
}
