//go:build unix

package audit

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// errLocked says another process holds the lock.
var errLocked = errors.New("locked by a live process")

// lockFile takes an exclusive flock on f, held until f is closed (or the
// process dies, whatever kills it). Without wait it fails with errLocked
// when another process holds it.
func lockFile(f *os.File, wait bool) error {
	how := unix.LOCK_EX
	if !wait {
		how |= unix.LOCK_NB
	}
	for {
		err := unix.Flock(int(f.Fd()), how)
		switch err {
		case nil:
			return nil
		case unix.EINTR:
			continue
		case unix.EWOULDBLOCK:
			return errLocked
		}
		return err
	}
}
