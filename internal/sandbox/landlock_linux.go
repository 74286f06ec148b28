package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/countbot/toolsvc/internal/pathx"
	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// systemDirs are granted read and execute under Landlock. Missing ones are
// skipped.
var systemDirs = []string{
	"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
	"/etc", "/opt", "/proc", "/sys",
}

// policy is what Landlock enforces for every command; the call's private
// temporary folder is added per call.
type policy struct {
	ABI     int
	RODirs  []string
	ROFiles []string
	RWDirs  []string
	RWFiles []string
	Network bool
}

// buildPolicy computes the rules once at start-up. Landlock only grants, it
// cannot take away below a granted folder; a private path inside a granted
// folder is honoured by granting that folder's other entries one by one.
func buildPolicy(abi int, ws string, private []string, network bool) policy {
	p := policy{ABI: abi, Network: network}
	for _, d := range systemDirs {
		resolved, err := filepath.EvalSymlinks(d)
		if err != nil {
			continue
		}
		dirs, files := grantExcept(resolved, private)
		p.RODirs = append(p.RODirs, dirs...)
		p.ROFiles = append(p.ROFiles, files...)
	}
	// The workspace is always granted, even below a private folder; only
	// private paths inside it are taken out.
	var inside []string
	for _, p := range private {
		if p != ws && pathx.Contains(ws, p) {
			inside = append(inside, p)
		}
	}
	dirs, files := grantExcept(ws, inside)
	p.RWDirs = append(p.RWDirs, dirs...)
	p.RWFiles = append(p.RWFiles, files...)
	for _, f := range []string{"/dev/null", "/dev/zero", "/dev/full"} {
		if _, err := os.Stat(f); err == nil {
			p.RWFiles = append(p.RWFiles, f)
		}
	}
	for _, f := range []string{"/dev/urandom", "/dev/random"} {
		if _, err := os.Stat(f); err == nil {
			p.ROFiles = append(p.ROFiles, f)
		}
	}
	return p
}

// grantExcept returns the folders and files to grant so that everything
// under dir is reachable except the private paths. Symbolic links met while
// splitting a folder are skipped: granting one would grant its target.
func grantExcept(dir string, private []string) (dirs, files []string) {
	split := false
	for _, p := range private {
		if pathx.Contains(p, dir) {
			return nil, nil
		}
		if pathx.Contains(dir, p) {
			split = true
		}
	}
	if !split {
		return []string{dir}, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil
	}
	for _, e := range entries {
		full := filepath.Join(dir, e.Name())
		switch {
		case e.Type()&os.ModeSymlink != 0:
		case e.IsDir():
			d, f := grantExcept(full, private)
			dirs, files = append(dirs, d...), append(files, f...)
		default:
			if !isPrivate(full, private) {
				files = append(files, full)
			}
		}
	}
	return dirs, files
}

func isPrivate(p string, private []string) bool {
	for _, q := range private {
		if pathx.Contains(q, p) {
			return true
		}
	}
	return false
}

// carved returns the private paths Landlock must carve out of the folders
// it grants, where commands have no mounts of their own. Granting the
// other entries of a folder one by one makes a rule each (/etc, split
// around the shadow files and /etc/ssh, is well over a hundred), and
// every command's rules are built afresh: so a path the commands could
// not open anyway, by its permissions, is left out. That is judged for
// a service that is not root, whose commands run with its own
// credentials and cannot change another owner's permissions; root's
// commands could read every file, so every path is carved for them.
func (s *Sandbox) carved() []string {
	if os.Geteuid() == 0 {
		return s.private
	}
	var out []string
	for _, p := range s.private {
		if unix.Faccessat(unix.AT_FDCWD, p, unix.R_OK, unix.AT_EACCESS) == nil || unix.Faccessat(unix.AT_FDCWD, p, unix.X_OK, unix.AT_EACCESS) == nil {
			out = append(out, p)
		}
	}
	return out
}

// privateInside returns the private paths inside the folders Landlock
// grants, which a command with mounts of its own gets covered by mounts
// instead of carved out of its rules (see coverPaths): a few mounts cost
// less than the hundred rules of a split /etc, built for every command.
// Paths outside every granted folder are out of reach already. A path in
// a granted folder that holds the workspace or a writable folder (the
// whole workspace, private to a key's own folder inside it, in /opt) is
// in carve instead: a mount over it would hide the folder too, while the
// rules grant the workspace and the writable folders even below a
// private path. ok is false where a private path holds a system folder
// (a private /): no mount can stand for that, so every path is carved.
func (s *Sandbox) privateInside() (paths, carve []string, ok bool) {
	var system []string
	for _, d := range systemDirs {
		if r, err := filepath.EvalSymlinks(d); err == nil {
			system = append(system, r)
		}
	}
	needed := append([]string{s.ws}, s.writable...)
	granted := append(slices.Clone(needed), system...)
	for _, p := range s.private {
		for _, d := range system {
			if p != d && pathx.Contains(p, d) {
				return nil, nil, false
			}
		}
		switch {
		case !slices.ContainsFunc(granted, func(g string) bool { return pathx.Contains(g, p) }):
		case slices.ContainsFunc(needed, func(n string) bool { return pathx.Contains(p, n) }):
			carve = append(carve, p)
		default:
			paths = append(paths, p)
		}
	}
	return paths, carve, true
}

// landlockRules is a ruleset ready to be enforced on a thread.
type landlockRules struct {
	fd    int
	flags uint32
}

// landlockRuleset builds the rules of one command: the policy computed at
// start-up plus the call's private temporary folder.
func (s *Sandbox) landlockRuleset(tmpDir string) (*landlockRules, error) {
	p := s.policy
	if s.mountns {
		p = s.mounted
	}
	cfg := landlock.V11.BestEffort()
	if p.Network {
		cfg.HandledAccessNet = 0
	}
	if !s.scoped {
		// As on a kernel that cannot scope (tests): where it can, the
		// domain scopes signals and abstract Unix sockets.
		cfg.Scoped = 0
	}
	rw := append(append(append([]string(nil), p.RWDirs...), s.writable...), tmpDir)
	rules := []landlock.Rule{
		landlock.RODirs(p.RODirs...).IgnoreIfMissing(),
		landlock.ROFiles(p.ROFiles...).IgnoreIfMissing(),
		landlock.RWDirs(rw...).WithRefer().IgnoreIfMissing(),
		landlock.RWFiles(p.RWFiles...).IgnoreIfMissing(),
	}
	if s.egress {
		// With the network off otherwise, TCP may reach the proxy's port
		// only (below ABI 4 the rule is dropped, as the library degrades
		// every rule the kernel cannot enforce; the namespace still holds).
		rules = append(rules, s.egressRules()...)
	}
	if s.netinit != "" {
		// The command's first program is the service's binary, which
		// must be executable however little else is.
		rules = append(rules, landlock.ROFiles("/proc/self/exe"))
	}
	fd, flags, err := cfg.NewRulesetFD(rules...)
	if err != nil {
		return nil, fmt.Errorf("building the Landlock rules: %w", err)
	}
	if fd < 0 {
		return nil, errors.New("the kernel enforces no Landlock rule; refusing to run unconfined")
	}
	return &landlockRules{fd: fd, flags: flags}, nil
}

// restrictSelf enforces the rules on the calling thread. Landlock without
// the TSYNC flag binds that thread only; a process it forks inherits the
// domain, keeps it across execve, and so does every process that one
// starts. no_new_privs must be set first.
func (r *landlockRules) restrictSelf() error {
	if err := llsys.LandlockRestrictSelf(r.fd, r.flags); err != nil {
		return fmt.Errorf("enforcing the Landlock rules: %w", err)
	}
	return nil
}

func (r *landlockRules) close() { _ = unix.Close(r.fd) }

// setupLandlock checks the kernel's Landlock ABI, prepares the rules and
// runs a trial command. Below ABI 4 Landlock cannot refuse TCP; with the
// network off the seccomp filter refuses every socket instead, and where
// there is no seccomp either the file-system rules still apply and the
// start-up log says the network is not enforced.
func (s *Sandbox) setupLandlock() error {
	abi, err := llsys.LandlockGetABIVersion()
	if err != nil || abi < 1 {
		return fmt.Errorf("the kernel does not offer Landlock (%w)", err)
	}
	s.policy = buildPolicy(abi, s.ws, s.carved(), s.network)
	if hidden, carve, ok := s.privateInside(); ok {
		s.mounted, s.hidden = buildPolicy(abi, s.ws, carve, s.network), hidden
	} else {
		s.mounted = buildPolicy(abi, s.ws, s.private, s.network)
	}
	s.mode = Landlock
	s.egressTCP = s.egress && abi >= 4
	if err := s.setupFilter(true); err != nil {
		s.mode, s.egressTCP = None, false
		return err
	}
	net := "on"
	switch {
	case s.egress:
		net = s.egressDetail()
	case s.network:
	case s.netFilter && abi >= 4:
		net = "off (no socket can be made; Landlock refuses TCP too)"
	case s.netFilter:
		net = "off (no socket can be made)"
	case abi >= 4:
		net = "off for TCP only (Landlock rules; no seccomp here for the other protocols)"
	default:
		net = "NOT enforced (Landlock ABI below 4 and no seccomp)"
	}
	s.detail = fmt.Sprintf("landlock ABI %d: system read-only, workspace read-write, private temp folder, data folder and private paths unreadable, network %s", abi, net)
	return nil
}
