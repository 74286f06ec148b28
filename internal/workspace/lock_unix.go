//go:build unix

package workspace

import (
	"os"
	"syscall"
)

// renameOpen: a file may be renamed while open, so a temporary file stays
// locked until it has its final name.
const renameOpen = true

// lockTemp takes an exclusive flock on a new temporary file. Nothing else
// holds it, so it does not wait.
func lockTemp(f *os.File) (unlock func()) {
	fd := int(f.Fd())
	if syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		return func() {}
	}
	return func() { _ = syscall.Flock(fd, syscall.LOCK_UN) }
}

// tryLockTemp takes the lock of a temporary file if no write holds it.
func tryLockTemp(f *os.File) (unlock func(), ok bool) {
	fd := int(f.Fd())
	if syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		return nil, false
	}
	return func() { _ = syscall.Flock(fd, syscall.LOCK_UN) }, true
}

// unlinked reports whether a folder described by fi was deleted: a folder
// in use has at least two links ("." and its name in the parent).
func unlinked(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Nlink == 0
}
