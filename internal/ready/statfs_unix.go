//go:build linux || darwin || freebsd

package ready

import (
	"fmt"
	"syscall"
)

// freeBytes returns the bytes available to an unprivileged user on dir's
// file system.
func freeBytes(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("statfs: %w", err)
	}
	return uint64(st.Bavail) * uint64(st.Bsize), nil
}
