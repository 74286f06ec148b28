//go:build unix

package pkgcache

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/countbot/toolsvc/internal/homedir"
)

// traversable checks that u may pass through dir and every folder above
// it, by their permission bits (the servers run without supplementary
// groups): a server reaches its cache by its path, under bubblewrap,
// which runs as u to bind it, as under Landlock.
func traversable(dir string, u *homedir.User) error {
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("package caches: %w", err)
		}
		perm := uint32(fi.Mode().Perm())
		var x uint32 = 0o001
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			switch {
			case st.Uid == u.Uid:
				x = 0o100
			case st.Gid == u.Gid:
				x = 0o010
			}
		}
		if perm&x == 0 {
			return fmt.Errorf("package caches: %s (mode %04o) does not let uid %d, which the MCP servers run as (TOOLSVC_EXEC_USER), through to the caches below it. Next: chmod o+x %s (or g+x, with a group of that account)", d, perm, u.Uid, d)
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}
