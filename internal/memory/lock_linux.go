package memory

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/gofrs/flock"

	"github.com/countbot/toolsvc/internal/pathx"
)

// lock takes the cross-process lock on memory/.MEMORY.md.lock. The lock
// file is opened relative to the memory folder, itself opened through the
// workspace root, and O_NOFOLLOW refuses a lock file that is a symbolic
// link: nothing outside the workspace is created or locked. It is opened
// for writing, though nothing is written: an NFS client emulates flock
// with a lock of the whole file, which NFS grants exclusively only to a
// writer, and replicas sharing the workspace over NFS lock it that way.
func (s *Store) lock(ctx context.Context, root *os.Root) (unlock func(), err error) {
	dir, err := root.Open(Dir)
	if err != nil {
		return nil, err
	}
	lk := flock.New(fmt.Sprintf("/proc/self/fd/%d/%s", dir.Fd(), LockFile),
		flock.SetFlag(os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC),
		flock.SetPermissions(0o644))
	wctx, cancel := context.WithTimeout(ctx, s.opts.LockWait)
	defer cancel()
	// flock(2) cannot be interrupted by a context, so poll; the lock is
	// held for one append and fsync, well under a millisecond.
	ok, err := lk.TryLockContext(wctx, time.Millisecond)
	if !ok || err != nil {
		dir.Close()
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.Is(err, context.DeadlineExceeded):
			return nil, ErrBusy
		case err == nil:
			return nil, ErrBusy
		}
		return nil, &os.PathError{Op: "lock", Path: Dir + "/" + LockFile, Err: pathx.StripPath(err)}
	}
	return func() {
		_ = lk.Unlock()
		dir.Close()
	}, nil
}
