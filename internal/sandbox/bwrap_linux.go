package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/countbot/toolsvc/internal/netinit"
	"github.com/countbot/toolsvc/internal/pathx"
)

// hiddenByDefault are folders replaced by an empty tmpfs under bubblewrap:
// home folders may hold keys; /run, /var/run and /var/tmp hold sockets
// (docker, dbus, databases) that lead out of any sandbox, and /var/tmp is
// shared between processes like /tmp.
var hiddenByDefault = []string{"/root", "/home", "/run", "/var/run", "/var/tmp"}

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
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// --perms and --size (bubblewrap 0.7 and later) let each command's
	// /tmp be a fresh tmpfs instead of a folder made on the disk.
	help, _ := exec.CommandContext(ctx, path, "--help").Output()
	s.bwrapTmp = bytes.Contains(help, []byte("--perms")) && bytes.Contains(help, []byte("--size"))
	s.egressTCP = s.egress && landlockTCP()
	if err := s.setupFilter(false); err != nil {
		s.mode, s.bwrapTmp, s.egressTCP = None, false, false
		return err
	}
	ver, _ := exec.CommandContext(ctx, path, "--version").Output()
	net := "shared"
	switch {
	case s.egress:
		net = s.egressDetail()
	case !s.network:
		net = "off (own network namespace)"
	}
	s.detail = fmt.Sprintf("bubblewrap (%s): system read-only, workspace read-write, private /tmp and /var/tmp, /run and home folders empty, data folder and private paths hidden, own PID namespace, network %s",
		strings.TrimSpace(string(ver)), net)
	return nil
}

// bwrapArgs builds the bubblewrap command line. Mount order matters: later
// mounts cover earlier ones, so private paths outside the workspace are
// hidden before the workspace is bound, and those inside it after.
func (s *Sandbox) bwrapArgs(tmpDir string, argv []string) []string {
	a := []string{
		// The sandbox's PID 1 takes every process in it down when it
		// ends, and dies when bwrap (killed with the process group) dies.
		"--die-with-parent",
		"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
		"--cap-drop", "ALL",
		"--ro-bind", "/", "/",
		"--dev", "/dev",
		"--proc", "/proc",
	}
	if !s.network && (!s.egress || s.netinit != "") {
		// With Egress made by the launching thread, bubblewrap is started
		// in the command's network namespace, and stays in it (it would
		// bring loopback up in one of its own, where the proxy is not).
		// Made by the command's first program, the namespace is
		// bubblewrap's, with loopback up, where that program listens.
		a = append(a, "--unshare-net")
	}
	for _, d := range hiddenByDefault {
		// A link (/var/run -> /run) is covered through its target.
		if fi, err := os.Lstat(d); err == nil && fi.IsDir() {
			a = append(a, "--tmpfs", d)
		}
	}
	if s.netinit != "" {
		// The command's first program, on the empty /run: the service's
		// binary, wherever it is (a folder hidden here, /tmp).
		a = append(a, "--ro-bind", s.netinit, netinitPath)
	}
	if s.network {
		// Keep name resolution working where resolv.conf points into /run.
		a = append(a, "--ro-bind-try", "/run/systemd/resolve", "/run/systemd/resolve")
	}
	var inside []string
	for _, p := range s.private {
		if s.user != nil && !reachableBy(p, s.user) {
			// bubblewrap runs as the user and could not mount over it,
			// nor could the command get there.
			continue
		}
		if pathx.Contains(s.ws, p) {
			inside = append(inside, p)
			continue
		}
		a = append(a, hide(p)...)
	}
	if tmpDir == "" {
		// A fresh tmpfs, private to the command's user, holding its HOME.
		a = append(a, "--perms", "0700")
		if s.limits.MaxMemory > 0 {
			a = append(a, "--size", strconv.FormatInt(s.limits.MaxMemory, 10))
		}
		a = append(a, "--tmpfs", "/tmp", "--perms", "0700", "--dir", "/tmp/"+TempHome)
	} else {
		a = append(a, "--bind", tmpDir, "/tmp")
	}
	a = append(a, "--bind", s.ws, s.ws)
	for _, w := range s.writable {
		a = append(a, "--bind", w, w)
	}
	for _, p := range inside {
		a = append(a, hide(p)...)
	}
	if s.seccomp != nil {
		a = append(a, "--seccomp", "3") // Start passes the program as fd 3
	}
	a = append(a, "--")
	if s.netinit != "" {
		argv = netinit.Args(netinitPath, s.netinitFD(), argv)
	}
	return append(a, argv...)
}

// hide covers p: an empty tmpfs over a folder, /dev/null over a file.
func hide(p string) []string {
	fi, err := os.Stat(p)
	switch {
	case err != nil:
		return nil
	case fi.IsDir():
		return []string{"--tmpfs", p}
	default:
		return []string{"--ro-bind", "/dev/null", p}
	}
}

// reachableBy reports whether u can walk the folders down to p, judged by
// their permission bits (commands run without supplementary groups).
func reachableBy(p string, u *User) bool {
	for d := filepath.Dir(p); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return false
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return true
		}
		perm := uint32(fi.Mode().Perm())
		var x uint32 = 0o001
		switch {
		case st.Uid == u.Uid:
			x = 0o100
		case st.Gid == u.Gid:
			x = 0o010
		}
		if perm&x == 0 {
			return false
		}
		if d == "/" || d == "." {
			return true
		}
	}
}
