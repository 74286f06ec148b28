package sandbox

import (
	"os"
)

// hiddenByDefault are folders replaced by an empty tmpfs under bubblewrap:
// home folders may hold keys, /run holds sockets (docker, dbus) that lead
// out of any sandbox.
var hiddenByDefault = []string{"/root", "/home", "/run"}

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
	if !s.network {
		a = append(a, "--unshare-net")
	}
	for _, d := range hiddenByDefault {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			a = append(a, "--tmpfs", d)
		}
	}
	if s.network {
		// Keep name resolution working where resolv.conf points into /run.
		a = append(a, "--ro-bind-try", "/run/systemd/resolve", "/run/systemd/resolve")
	}
	var inside []string
	for _, p := range s.private {
		if within(p, s.ws) {
			inside = append(inside, p)
			continue
		}
		a = append(a, hide(p)...)
	}
	a = append(a, "--bind", tmpDir, "/tmp", "--bind", s.ws, s.ws)
	for _, p := range inside {
		a = append(a, hide(p)...)
	}
	a = append(a, "--")
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
