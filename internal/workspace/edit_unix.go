//go:build unix

package workspace

import (
	"context"
	"errors"
	"os"
	"syscall"
	"time"
)

// LocksEdits reports whether OpenForEdit holds a lock that keeps other
// editors of the file, in this process or another sharing the workspace
// (another replica on a network file system), out until release.
const LocksEdits = true

// OpenForEdit opens the file at p for a read-modify-write and takes an
// exclusive flock(2) on it, waiting for another editor's to go, until ctx
// is done. Since an edit replaces the file (a new file renamed over it),
// an editor that waited may hold the lock of a file that is no longer at
// p: then it opens p again. So two edits of one file run one after the
// other, each on what the other wrote, instead of the later one silently
// dropping the earlier one's change.
//
// The file is opened for writing where it can be, though nothing is
// written to it: an NFS client emulates flock with a lock of the whole
// file, which NFS grants exclusively only to a writer. Where no lock can be
// had (a read-only file, a file system without locks), the edit goes on
// unlocked, as before locks existed. release unlocks and closes the file;
// call it once the edit is written.
func (p Path) OpenForEdit(ctx context.Context) (f *os.File, release func(), err error) {
	for {
		f, err := p.Root.OpenFile(p.Name, os.O_RDWR|syscall.O_NONBLOCK, 0)
		if err != nil {
			if f, err = p.Open(); err != nil {
				return nil, nil, err
			}
		}
		release := func() { f.Close() } // closing drops the lock too
		locked, err := waitFlock(ctx, f)
		if err != nil {
			f.Close()
			return nil, nil, err
		}
		if !locked {
			return f, release, nil
		}
		held, err1 := f.Stat()
		now, err2 := p.Stat()
		if err1 == nil && err2 == nil && os.SameFile(held, now) {
			return f, release, nil
		}
		f.Close()
		if err2 != nil {
			return nil, nil, err2
		}
		// Replaced while this waited: lock what is there now.
	}
}

// waitFlock takes an exclusive flock on f, polling (flock cannot be
// interrupted by a context) until ctx is done. locked is false, with no
// error, when the file system offers no lock for f.
func waitFlock(ctx context.Context, f *os.File) (locked bool, err error) {
	wait := 100 * time.Microsecond
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR):
			return false, nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return false, ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, 20*time.Millisecond)
	}
}
