//go:build unix

package audit

import (
	"fmt"
	"os"
	"runtime/debug"

	"golang.org/x/sys/unix"
)

// headWriter writes the head file through a shared mapping of it: a
// record's slot is a copy into memory, with no system call, where a
// write(2) costs microseconds on a journaling file system (it updates the
// file's times through the journal). The pages are the page cache's, so
// the head outlives the process as a write would, and, as with a write,
// nothing waits for the disk.
//
// A page the kernel cannot back (a file system out of space that must
// allocate on every write, an I/O error) faults with SIGBUS; the copy is
// made with the runtime's panic-on-fault set, so that it is an error the
// log acts on, not the process's death. The file's blocks are written
// once at the start, which spares the common file systems (ext4, XFS,
// tmpfs) any allocation afterwards.
type headWriter struct {
	m   []byte
	buf [headSlot]byte
}

func newHeadWriter(f *os.File) (*headWriter, error) {
	// The head as it is, written back whole: the file gets its blocks.
	data := make([]byte, headSize)
	if _, err := f.ReadAt(data, 0); err != nil {
		clear(data) // new, or too short to hold a whole head
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		return nil, err
	}
	m, err := unix.Mmap(int(f.Fd()), 0, headSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map the head file: %w", err)
	}
	return &headWriter{m: m}, nil
}

func (w *headWriter) write(h headState) (err error) {
	encodeSlot(w.buf[:], h)
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			err = fmt.Errorf("write the head file's mapping: %v", r)
		}
	}()
	off := int(h.Seq%2) * headSlot
	copy(w.m[off:off+headSlot], w.buf[:])
	return nil
}

func (w *headWriter) close() {
	if w.m != nil {
		unix.Munmap(w.m)
		w.m = nil
	}
}
