//go:build !linux

package memory

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/gofrs/flock"

	"github.com/countbot/toolsvc/internal/pathx"
)

// lock takes the cross-process lock on memory/.MEMORY.md.lock (flock on
// macOS, LockFileEx on Windows). Without /proc/self/fd the lock file is
// first created through the workspace root, which refuses a path leading
// out of the workspace, then locked by its path below the root's folder.
func (s *Store) lock(ctx context.Context, root *os.Root) (unlock func(), err error) {
	f, err := root.OpenFile(Dir+"/"+LockFile, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	f.Close()
	lk := flock.New(filepath.Join(root.Name(), Dir, LockFile), flock.SetFlag(os.O_CREATE|os.O_RDWR), flock.SetPermissions(0o644))
	wctx, cancel := context.WithTimeout(ctx, s.opts.LockWait)
	defer cancel()
	ok, err := lk.TryLockContext(wctx, time.Millisecond)
	if !ok || err != nil {
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.Is(err, context.DeadlineExceeded), err == nil:
			return nil, ErrBusy
		}
		return nil, &os.PathError{Op: "lock", Path: Dir + "/" + LockFile, Err: pathx.StripPath(err)}
	}
	return func() { _ = lk.Unlock() }, nil
}
