package audit

import (
	"sync"

	"golang.org/x/sys/unix"
)

// spares hands out unnamed files (O_TMPFILE) that a background goroutine
// creates ahead of need. Allocating the inode is the dear part of writing a
// record; done ahead, it is off the path of the call that waits for the
// record. Each file is used once: it is written, then linked into place.
type spares struct {
	ready chan int // open descriptors of unnamed, empty files
	stop  chan struct{}
	done  sync.WaitGroup
	once  sync.Once
}

// newSpares starts keeping up to n unnamed files ready in the folder dir
// (a descriptor), which must stay open until close returns. Where the file
// system cannot create unnamed files the goroutine ends at once and take
// always reports none.
func newSpares(dir, n int) *spares {
	s := &spares{ready: make(chan int, n), stop: make(chan struct{})}
	s.done.Add(1)
	go s.fill(dir)
	return s
}

func (s *spares) fill(dir int) {
	defer s.done.Done()
	for {
		fd, err := createUnnamed(dir)
		if err != nil {
			return
		}
		select {
		case s.ready <- fd:
		case <-s.stop:
			unix.Close(fd)
			return
		}
	}
}

// take returns a ready file, or -1 when none is ready.
func (s *spares) take() int {
	select {
	case fd := <-s.ready:
		return fd
	default:
		return -1
	}
}

// close stops the goroutine and closes the files not handed out. Unnamed
// files vanish when closed.
func (s *spares) close() {
	s.once.Do(func() {
		close(s.stop)
		s.done.Wait()
		for {
			select {
			case fd := <-s.ready:
				unix.Close(fd)
			default:
				return
			}
		}
	})
}

func createUnnamed(dir int) (int, error) {
	return unix.Openat(dir, ".", unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o640)
}
