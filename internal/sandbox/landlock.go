package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

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
		real, err := filepath.EvalSymlinks(d)
		if err != nil {
			continue
		}
		dirs, files := grantExcept(real, private)
		p.RODirs = append(p.RODirs, dirs...)
		p.ROFiles = append(p.ROFiles, files...)
	}
	// The workspace is always granted, even below a private folder; only
	// private paths inside it are taken out.
	var inside []string
	for _, p := range private {
		if p != ws && within(p, ws) {
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
		if within(dir, p) {
			return nil, nil
		}
		if within(p, dir) {
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
		if within(p, q) {
			return true
		}
	}
	return false
}

// startLandlocked starts cmd from an OS thread that has restricted itself
// with Landlock: the child inherits the thread's domain through fork, keeps
// it across execve, and so does every process it starts. Landlock without
// the TSYNC flag binds the calling thread only, so the rest of the service
// stays free; the thread is never unlocked, so the Go runtime ends it with
// its goroutine instead of reusing it. This avoids re-executing the
// service's binary as a launcher, whose package initialisation (tens of MB
// of tables in dependencies) would cost more than the command.
func (s *Sandbox) startLandlocked(cmd *exec.Cmd, tmpDir string) error {
	p := s.policy
	cfg := landlock.V11.BestEffort()
	if p.Network {
		cfg.HandledAccessNet = 0
	}
	fd, flags, err := cfg.NewRulesetFD(
		landlock.RODirs(p.RODirs...).IgnoreIfMissing(),
		landlock.ROFiles(p.ROFiles...).IgnoreIfMissing(),
		landlock.RWDirs(append(append([]string(nil), p.RWDirs...), tmpDir)...).WithRefer().IgnoreIfMissing(),
		landlock.RWFiles(p.RWFiles...).IgnoreIfMissing(),
	)
	if err != nil {
		return fmt.Errorf("building the Landlock rules: %w", err)
	}
	if fd < 0 {
		return errors.New("the kernel enforces no Landlock rule; refusing to run unconfined")
	}
	defer unix.Close(fd)
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with this goroutine
		// no_new_privs keeps setuid programs from shedding the domain; it
		// is per thread too, and required by Landlock without CAP_SYS_ADMIN.
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			errc <- fmt.Errorf("setting no_new_privs: %w", err)
			return
		}
		if err := llsys.LandlockRestrictSelf(fd, flags); err != nil {
			errc <- fmt.Errorf("enforcing the Landlock rules: %w", err)
			return
		}
		errc <- cmd.Start()
	}()
	return <-errc
}
