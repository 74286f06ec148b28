//go:build unix

package tools

import (
	"os"
	"syscall"
)

// openDir is or'ed into the flags of an open that must find a folder:
// should the folder be swapped for a pipe meanwhile, the open fails
// instead of blocking.
const openDir = syscall.O_DIRECTORY

// ownerOther reports whether fi belongs to a user other than uid, and
// which.
func ownerOther(fi os.FileInfo, uid int) (owner uint32, other bool) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != uid {
		return st.Uid, true
	}
	return 0, false
}
