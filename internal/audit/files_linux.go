package audit

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// files places records in the day folders. Each record is written to an
// unnamed file (O_TMPFILE) in its day folder and linked in under its name,
// so it appears whole, with its data, or not at all, and nothing is left
// to delete. Where the file system has no O_TMPFILE, a record is written
// under a temporary name and renamed.
//
// Day folders stay open: files are made relative to their descriptors,
// which spares a path walk per record.
type files struct {
	root string
	use  sync.RWMutex // held for reading while a descriptor is in use, for writing to close them
	mu   sync.Mutex
	days sync.Map // day folder name -> descriptor (int)
	old  []int    // descriptors of deleted day folders, closed by close

	noTmpfile   atomic.Bool // O_TMPFILE refused here: use a temporary name
	noEmptyPath atomic.Bool // linkat(AT_EMPTY_PATH) refused: link through /proc/self/fd

	// An unnamed file made ahead in a day folder, for the next record
	// there: making one costs a tenth of a millisecond or more on ext4
	// (its inode allocator scans past recently freed inodes), which a
	// call would otherwise wait for. Guarded by mu.
	ahead    int // descriptor, or -1
	aheadDay string
	aheadDir int // the day folder's descriptor it was made in
	closed   bool
	last     atomic.Int64  // when the last record was placed, Unix nanoseconds
	wake     chan string   // a day folder to make a file ahead in
	done     chan struct{} // closed by close: the maker ends
}

func newFiles(root string) *files {
	f := &files{root: root, ahead: -1, wake: make(chan string, 1), done: make(chan struct{})}
	go f.maker()
	return f
}

// maker makes files ahead, one at a time, until close.
func (f *files) maker() {
	for {
		select {
		case day := <-f.wake:
			f.makeAhead(day)
		case <-f.done:
			return
		}
	}
}

// reserve returns an unnamed file in day's folder for a record about to
// be placed there (the one made ahead, or a new one), or -1 when none can
// be made, in which case placeIn makes its own or falls back to a
// temporary name. It is called before the chain's lock is taken: making
// a file costs a tenth of a millisecond or more on an ext4 whose inode
// allocator scans past many freed inodes, and calls finishing at once
// would otherwise wait for each other's. The file goes to placeIn, or
// to unreserve.
func (f *files) reserve(day string) int {
	if f.noTmpfile.Load() {
		return -1
	}
	f.use.RLock()
	defer f.use.RUnlock()
	dfd, err := f.dir(day)
	if err != nil {
		return -1
	}
	if fd, _ := f.takeAhead(day, dfd); fd >= 0 {
		return fd
	}
	fd, err := unix.Openat(dfd, ".", unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o640)
	if err != nil {
		return -1 // placeAt meets the error again and acts on it
	}
	return fd
}

// unreserve closes a file reserve returned that was not placed.
func (f *files) unreserve(fd int) {
	if fd >= 0 {
		unix.Close(fd)
	}
}

// placeIn makes the file name appear in the day folder with data, written
// to fd (from reserve; -1: one made here). With ifAbsent, an existing
// file of that name is kept and placeIn succeeds. fd is closed.
func (f *files) placeIn(day, name string, data []byte, ifAbsent bool, fd int) error {
	f.use.RLock()
	defer f.use.RUnlock()
	dfd, err := f.dir(day)
	if err != nil {
		f.unreserve(fd)
	} else {
		// An unnamed file can be linked into any folder of its file
		// system, so one made in a day folder deleted since (and made
		// again below) still serves.
		err = f.placeAt(day, dfd, name, data, ifAbsent, fd)
		if errors.Is(err, unix.ENOENT) {
			// The day folder was deleted under us: make it again.
			f.drop(day)
			if dfd, err = f.dir(day); err == nil {
				err = f.placeAt(day, dfd, name, data, ifAbsent, -1)
			}
		}
	}
	if err != nil {
		return &os.PathError{Op: "write", Path: filepath.Join(f.root, day, name), Err: err}
	}
	return nil
}

// placeAt places the record in the folder dfd, writing it to fd (-1:
// the file made ahead, or a new one), which it closes.
func (f *files) placeAt(day string, dfd int, name string, data []byte, ifAbsent bool, fd int) error {
	if fd >= 0 || !f.noTmpfile.Load() {
		var err error
		if fd < 0 {
			if fd, err = f.takeAhead(day, dfd); fd < 0 {
				fd, err = unix.Openat(dfd, ".", unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o640)
			}
		}
		switch err {
		case nil:
			err = writeAll(fd, data)
			if err == nil {
				err = f.link(fd, dfd, name)
			}
			unix.Close(fd)
			if err == nil {
				// Placed: the next record's file can be made. (A record
				// whose folder was deleted under it is placed on the
				// second try, in the folder made again.)
				f.wakeMaker(day)
			}
			if err == unix.EEXIST && ifAbsent {
				return nil
			}
			return err
		case unix.EOPNOTSUPP, unix.EISDIR, unix.EINVAL:
			f.noTmpfile.Store(true)
		default:
			return err
		}
	}
	return placeRenamed(dfd, name, data, ifAbsent)
}

// link gives the unnamed file fd the name in dfd. Linking by descriptor
// (AT_EMPTY_PATH) needs CAP_DAC_READ_SEARCH on most kernels; the path
// under /proc/self/fd needs /proc.
func (f *files) link(fd, dfd int, name string) error {
	if !f.noEmptyPath.Load() {
		err := unix.Linkat(fd, "", dfd, name, unix.AT_EMPTY_PATH)
		if err != unix.EPERM && err != unix.ENOENT && err != unix.EINVAL {
			return err
		}
		f.noEmptyPath.Store(true)
	}
	return unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), dfd, name, unix.AT_SYMLINK_FOLLOW)
}

// placeRenamed writes data under a fresh temporary name and renames it to
// name.
func placeRenamed(dfd int, name string, data []byte, ifAbsent bool) error {
	tmp := "." + name + ".tmp"
	fd, err := unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o640)
	if err != nil {
		return err
	}
	err = writeAll(fd, data)
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	if err == nil {
		if ifAbsent {
			err = unix.Renameat2(dfd, tmp, dfd, name, unix.RENAME_NOREPLACE)
			if err == unix.EEXIST {
				err = unix.Unlinkat(dfd, tmp, 0)
			} else if err == unix.EINVAL { // no RENAME_NOREPLACE here
				var st unix.Stat_t
				if unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
					err = unix.Unlinkat(dfd, tmp, 0)
				} else {
					err = unix.Renameat(dfd, tmp, dfd, name)
				}
			}
		} else {
			err = unix.Renameat(dfd, tmp, dfd, name)
		}
	}
	if err != nil {
		_ = unix.Unlinkat(dfd, tmp, 0)
	}
	return err
}

// dir returns an open descriptor of a day folder, creating the folder the
// first time.
func (f *files) dir(day string) (int, error) {
	if fd, ok := f.days.Load(day); ok {
		return fd.(int), nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if fd, ok := f.days.Load(day); ok {
		return fd.(int), nil
	}
	path := filepath.Join(f.root, day)
	if err := os.MkdirAll(path, 0o750); err != nil {
		return -1, err
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	f.days.Store(day, fd)
	return fd, nil
}

// aheadGap is the shortest time between records for which files are
// made ahead. Records closer together than that come from calls that
// wait for nothing else (a saturated service): the maker could not get
// ahead of them, and would only add the cost of waking it to each call.
const aheadGap = time.Millisecond

// wakeMaker asks for a file to be made ahead in day's folder, unless
// records come too close together for it to help.
func (f *files) wakeMaker(day string) {
	now := time.Now().UnixNano()
	if now-f.last.Swap(now) < int64(aheadGap) {
		return
	}
	select {
	case f.wake <- day:
	default: // the maker has one to make already
	}
}

// takeAhead returns the unnamed file made ahead in day's folder open as
// dfd, or -1.
func (f *files) takeAhead(day string, dfd int) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ahead < 0 || f.aheadDay != day || f.aheadDir != dfd {
		return -1, nil
	}
	fd := f.ahead
	f.ahead = -1
	return fd, nil
}

// makeAhead makes an unnamed file in day's folder for the next record,
// unless one is there. It gives up without a word: the next record then
// makes its own.
func (f *files) makeAhead(day string) {
	f.mu.Lock()
	skip := f.closed || (f.ahead >= 0 && f.aheadDay == day)
	f.mu.Unlock()
	if skip {
		return
	}
	// Held for reading so that the folder's descriptor stays open.
	f.use.RLock()
	defer f.use.RUnlock()
	dfd, ok := f.days.Load(day)
	if !ok {
		return // forgotten meanwhile: a record makes the folder again
	}
	fd, err := unix.Openat(dfd.(int), ".", unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o640)
	if err != nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if now, ok := f.days.Load(day); !ok || now != dfd || f.closed {
		unix.Close(fd) // the folder was forgotten or made again meanwhile
		return
	}
	f.dropAhead()
	f.ahead, f.aheadDay, f.aheadDir = fd, day, dfd.(int)
}

// dropAhead closes the file made ahead, if any. f.mu is held.
func (f *files) dropAhead() {
	if f.ahead >= 0 {
		unix.Close(f.ahead)
		f.ahead = -1
	}
}

// forget closes the descriptor of a day folder about to be deleted.
func (f *files) forget(day string) {
	f.use.Lock()
	defer f.use.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	if fd, ok := f.days.LoadAndDelete(day); ok {
		unix.Close(fd.(int))
	}
	if f.aheadDay == day {
		f.dropAhead()
	}
}

// drop forgets a day folder's descriptor, to be closed by close: another
// record may be using it now. Only a deleted folder is dropped, seldom.
func (f *files) drop(day string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fd, ok := f.days.LoadAndDelete(day); ok {
		f.old = append(f.old, fd.(int))
	}
	if f.aheadDay == day {
		f.dropAhead()
	}
}

func (f *files) close() {
	f.use.Lock()
	defer f.use.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.closed {
		f.closed = true
		close(f.done)
	}
	f.days.Range(func(k, fd any) bool {
		unix.Close(fd.(int))
		f.days.Delete(k)
		return true
	})
	for _, fd := range f.old {
		unix.Close(fd)
	}
	f.old = nil
	f.dropAhead()
}

func writeAll(fd int, data []byte) error {
	for len(data) > 0 {
		n, err := unix.Write(fd, data)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}
