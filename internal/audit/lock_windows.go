package audit

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

// errLocked says another process holds the lock.
var errLocked = errors.New("locked by a live process")

// lockFile takes an exclusive lock on one byte of f far past its end, held
// until f is closed or the process dies. Locks on Windows are mandatory for
// their range, so the range is one nobody reads or writes.
func lockFile(f *os.File, wait bool) error {
	flags := uint32(windows.LOCKFILE_EXCLUSIVE_LOCK)
	if !wait {
		flags |= windows.LOCKFILE_FAIL_IMMEDIATELY
	}
	ol := &windows.Overlapped{Offset: 0, OffsetHigh: 0x40000000}
	err := windows.LockFileEx(windows.Handle(f.Fd()), flags, 0, 1, 0, ol)
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
		return errLocked
	}
	return err
}
