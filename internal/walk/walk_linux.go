package walk

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// bufSize is each worker's getdents buffer. Larger than the os package's
// 8 KiB, so a folder of a few hundred entries takes one system call.
const bufSize = 64 << 10

// Walk reads every folder below root, which must be an open folder, and
// calls opt.Visit for each entry. It returns an error when the root itself
// cannot be read or ctx ends first (ctx.Err()); folders below the root that
// cannot be read are counted in Stats.Unreadable and the walk goes on.
func Walk(ctx context.Context, root *os.File, opt Options) (Stats, error) {
	defer runtime.KeepAlive(root)
	rootFD := int(root.Fd())
	w := &walker{opt: opt, root: rootFD}
	if w.opt.open == nil {
		w.opt.open = w.openBeneath
	}
	if w.opt.openAt == nil {
		w.opt.openAt = openChild
	}
	n := WorkerCount(opt.Workers)
	w.stack = []job{{rel: "", depth: 0, fd: rootFD}}
	w.cond = sync.NewCond(&w.mu)
	stop := context.AfterFunc(ctx, func() {
		w.mu.Lock()
		w.canceled = true
		w.cond.Broadcast()
		w.mu.Unlock()
	})
	defer stop()

	stats := make([]Stats, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.work(i, &stats[i])
		}()
	}
	wg.Wait()
	for _, j := range w.stack { // left by a cancellation
		if j.fd >= 0 && j.rel != "" {
			unix.Close(j.fd)
		}
	}

	var total Stats
	for _, s := range stats {
		total.Dirs += s.Dirs
		total.Entries += s.Entries
		total.Unreadable += s.Unreadable
	}
	if err := ctx.Err(); err != nil {
		return total, err
	}
	if w.rootErr != nil {
		return total, w.rootErr
	}
	return total, nil
}

// job is a folder to read: its path from the root, the depth of its
// entries (the root's entries are at depth 0) and, when it was opened
// while its parent was, its descriptor (else -1).
type job struct {
	rel   string
	depth int
	fd    int
}

// maxQueuedFDs bounds the folders one walk keeps open while they wait in
// the queue; past it, folders wait by path. Many searches run at once
// (MAX_CONCURRENT_CALLS), so it stays far below the descriptor limit.
const maxQueuedFDs = 128

type walker struct {
	opt  Options
	root int

	mu       sync.Mutex
	cond     *sync.Cond
	stack    []job // folders waiting to be read; last in, first out keeps it short
	active   int   // folders being read now
	canceled bool
	rootErr  error
	queued   atomic.Int32 // descriptors held by jobs in the stack

	// noOpenat2 is set once openat2 has proved unavailable (an old kernel,
	// or a seccomp filter that refuses it), so later opens go straight to
	// the component walk.
	noOpenat2 atomic.Bool
}

// next returns the next folder to read, or false when the walk is over:
// nothing is left and nobody is reading a folder that could add more, or
// the walk was canceled.
func (w *walker) next() (job, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.stack) == 0 && w.active > 0 && !w.canceled {
		w.cond.Wait()
	}
	if w.canceled || len(w.stack) == 0 {
		return job{}, false
	}
	j := w.stack[len(w.stack)-1]
	w.stack = w.stack[:len(w.stack)-1]
	w.active++
	return j, true
}

// done hands over the subfolders found while reading a folder.
func (w *walker) done(children []job) {
	w.mu.Lock()
	w.stack = append(w.stack, children...)
	w.active--
	if len(children) > 0 || w.active == 0 {
		w.cond.Broadcast()
	}
	w.mu.Unlock()
}

func (w *walker) work(id int, st *Stats) {
	buf := make([]byte, bufSize)
	var children []job
	for {
		j, ok := w.next()
		if !ok {
			return
		}
		children = children[:0]
		err := w.read(id, j, buf, &children, st)
		if err != nil {
			if j.rel == "" {
				w.mu.Lock()
				w.rootErr = err
				w.mu.Unlock()
			} else {
				st.Unreadable++
			}
		}
		w.done(children)
	}
}

// read lists one folder, visiting its entries and collecting the
// subfolders to enter.
func (w *walker) read(id int, j job, buf []byte, children *[]job, st *Stats) error {
	fd := j.fd
	switch {
	case j.rel != "" && fd >= 0:
		w.queued.Add(-1)
		defer unix.Close(fd)
	case j.rel != "":
		var err error
		if fd, err = w.opt.open(w.root, j.rel); err != nil {
			return err
		}
		defer unix.Close(fd)
	default:
		if _, err := unix.Seek(fd, 0, 0); err != nil {
			// The root's descriptor may have been read before; start over.
			return err
		}
	}
	st.Dirs++
	descend := w.opt.MaxDepth < 0 || j.depth < w.opt.MaxDepth
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n <= 0 {
			return nil
		}
		for off := 0; off < n; {
			// struct linux_dirent64 { u64 ino; s64 off; u16 reclen; u8 type; char name[]; }
			reclen := int(binary.NativeEndian.Uint16(buf[off+16:]))
			typ := buf[off+18]
			name := buf[off+19 : off+reclen]
			off += reclen
			for i, c := range name {
				if c == 0 {
					name = name[:i]
					break
				}
			}
			if isDots(name) {
				continue
			}
			st.Entries++
			if w.opt.Skip != nil && w.opt.Skip(name) {
				continue
			}
			kind, ok := kindOf(typ)
			if !ok {
				// The file system does not fill d_type: ask without
				// following a link.
				var s unix.Stat_t
				if err := unix.Fstatat(fd, string(name), &s, unix.AT_SYMLINK_NOFOLLOW); err != nil {
					continue // gone since the listing
				}
				kind = kindOfMode(s.Mode)
			}
			w.opt.Visit(id, j.rel, name, kind)
			if kind == Dir && descend {
				rel := string(name)
				if j.rel != "" {
					rel = j.rel + "/" + rel
				}
				child := job{rel: rel, depth: j.depth + 1, fd: -1}
				if w.queued.Load() < maxQueuedFDs {
					if cfd, err := w.opt.openAt(fd, string(name)); err == nil {
						w.queued.Add(1)
						child.fd = cfd
					}
					// On failure, the later open by path reports it.
				}
				*children = append(*children, child)
			}
		}
	}
}

func kindOf(dt uint8) (Kind, bool) {
	switch dt {
	case unix.DT_REG:
		return File, true
	case unix.DT_DIR:
		return Dir, true
	case unix.DT_LNK:
		return Link, true
	case unix.DT_UNKNOWN:
		return 0, false
	}
	return Other, true
}

func kindOfMode(m uint32) Kind {
	switch m & unix.S_IFMT {
	case unix.S_IFREG:
		return File
	case unix.S_IFDIR:
		return Dir
	case unix.S_IFLNK:
		return Link
	}
	return Other
}

const dirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC

// openBeneath opens the folder rel (slash-separated, no "." or ".."
// components) below the folder root, refusing symbolic links anywhere on
// the way and any path that would leave root.
func (w *walker) openBeneath(root int, rel string) (int, error) {
	if !w.noOpenat2.Load() {
		how := unix.OpenHow{
			Flags:   dirFlags,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		}
		for {
			fd, err := unix.Openat2(root, rel, &how)
			switch {
			case err == nil:
				return fd, nil
			case err == unix.EINTR || err == unix.EAGAIN:
				continue
			case err == unix.ENOSYS || err == unix.EPERM && !isPermissionProblem(root, rel):
				w.noOpenat2.Store(true)
			case err == unix.ENAMETOOLONG:
				// Longer than PATH_MAX: open it a component at a time.
			default:
				return -1, err
			}
			break
		}
	}
	return openComponents(root, rel)
}

// isPermissionProblem tells a real EPERM from openat2 apart from a seccomp
// filter refusing the system call, by trying the portable way.
func isPermissionProblem(root int, rel string) bool {
	fd, err := openComponents(root, rel)
	if err == nil {
		unix.Close(fd)
		return false
	}
	return errors.Is(err, unix.EPERM)
}

// openChild opens the folder name in the open folder parent, refusing a
// symbolic link.
func openChild(parent int, name string) (int, error) {
	for {
		fd, err := unix.Openat(parent, name, dirFlags, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// openComponents opens rel one name at a time, each with O_NOFOLLOW, so no
// symbolic link is ever followed; names never contain "/" and are never
// "." or "..", so the walk stays below root.
func openComponents(root int, rel string) (int, error) {
	fd := root
	for rel != "" {
		name, rest, _ := strings.Cut(rel, "/")
		rel = rest
		if name == "" || name == "." || name == ".." {
			if fd != root {
				unix.Close(fd)
			}
			return -1, fmt.Errorf("walk: invalid path component %q", name)
		}
		var next int
		var err error
		for {
			next, err = unix.Openat(fd, name, dirFlags, 0)
			if err != unix.EINTR {
				break
			}
		}
		if fd != root {
			unix.Close(fd)
		}
		if err != nil {
			return -1, err
		}
		fd = next
	}
	if fd == root {
		return unix.Dup(root)
	}
	return fd, nil
}
