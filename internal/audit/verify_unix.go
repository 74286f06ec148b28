//go:build unix

package audit

import (
	"path/filepath"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// fileReader reads record files for Verify with three system calls each
// (openat relative to its day folder, read, close): os.Open would also
// register the file with the poller, and resolve the whole path, which
// cost a third of a million files' reading.
type fileReader struct {
	dirs         map[string]int // day folder -> descriptor
	atimeRefused atomic.Bool    // O_NOATIME refused: only the files' owner may ask
}

func newFileReader(root string, files []string) (*fileReader, error) {
	r := &fileReader{dirs: map[string]int{}}
	for _, f := range files {
		day, _, _ := strings.Cut(f, "/")
		if _, ok := r.dirs[day]; ok {
			continue
		}
		fd, err := unix.Open(filepath.Join(root, day), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			r.close()
			return nil, &pathError{op: "open", path: filepath.Join(root, day), err: err}
		}
		r.dirs[day] = fd
	}
	return r, nil
}

// read reads file (DAY/NAME) into *buf, grown as needed.
func (r *fileReader) read(file string, buf *[]byte) ([]byte, error) {
	day, name, _ := strings.Cut(file, "/")
	flags := unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW
	if !r.atimeRefused.Load() {
		flags |= oNoATime
	}
	fd, err := unix.Openat(r.dirs[day], name, flags, 0)
	if err == unix.EPERM && flags&oNoATime != 0 {
		r.atimeRefused.Store(true)
		fd, err = unix.Openat(r.dirs[day], name, flags&^oNoATime, 0)
	}
	if err != nil {
		return nil, &pathError{op: "open", path: file, err: err}
	}
	defer unix.Close(fd)
	n := 0
	for {
		if n == len(*buf) {
			*buf = append(*buf, make([]byte, len(*buf))...)
		}
		m, err := unix.Read(fd, (*buf)[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &pathError{op: "read", path: file, err: err}
		}
		n += m
		// A read short of the buffer reached the end of a file nobody
		// writes any more: records are written once.
		if m == 0 || n < len(*buf) {
			return (*buf)[:n], nil
		}
	}
}

func (r *fileReader) close() {
	for _, fd := range r.dirs {
		unix.Close(fd)
	}
}

// pathError is an error of a file Verify reads.
type pathError struct {
	op, path string
	err      error
}

func (e *pathError) Error() string { return e.op + " " + e.path + ": " + e.err.Error() }
func (e *pathError) Unwrap() error { return e.err }
