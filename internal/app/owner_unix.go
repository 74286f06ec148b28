//go:build unix

package app

import (
	"os"
	"syscall"
)

// ownerOther reports whether fi belongs to a user other than uid, and
// which.
func ownerOther(fi os.FileInfo, uid int) (owner uint32, other bool) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != uid {
		return st.Uid, true
	}
	return 0, false
}
