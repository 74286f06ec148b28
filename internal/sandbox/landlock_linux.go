package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

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

// landlockRules is a ruleset ready to be enforced on a thread.
type landlockRules struct {
	fd    int
	flags uint32
}

// landlockRuleset builds the rules of one command: the policy computed at
// start-up plus the call's private temporary folder.
func (s *Sandbox) landlockRuleset(tmpDir string) (*landlockRules, error) {
	p := s.policy
	cfg := landlock.V11.BestEffort()
	if p.Network {
		cfg.HandledAccessNet = 0
	}
	rw := append(append(append([]string(nil), p.RWDirs...), s.writable...), tmpDir)
	fd, flags, err := cfg.NewRulesetFD(
		landlock.RODirs(p.RODirs...).IgnoreIfMissing(),
		landlock.ROFiles(p.ROFiles...).IgnoreIfMissing(),
		landlock.RWDirs(rw...).WithRefer().IgnoreIfMissing(),
		landlock.RWFiles(p.RWFiles...).IgnoreIfMissing(),
	)
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
	s.policy = buildPolicy(abi, s.ws, s.private, s.network)
	s.mode = Landlock
	if err := s.setupFilter(true); err != nil {
		s.mode = None
		return err
	}
	net := "on"
	switch {
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
