// Package walk lists a directory tree in parallel without ever following a
// symbolic link.
//
// A pool of workers shares a stack of folders still to read. Each folder is
// read with getdents(2) and the entry types come from the d_type field, so
// listing costs one open and a few getdents calls per folder and no stat per
// entry. A subfolder is opened right away, while its parent is open, with
// openat(parent, name, O_NOFOLLOW|O_DIRECTORY), which looks up a single
// name; when too many opened folders wait in the queue, the rest wait by
// path and are opened later relative to the root's file descriptor with
// openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS), or one component at a time
// with O_NOFOLLOW where openat2 is unavailable. Either way the kernel
// refuses a path that would leave the root or pass through a symbolic link,
// even if the tree changes during the walk. Symbolic links are
// reported as links and never entered, so link loops cannot make a walk
// endless and links that point elsewhere are never read.
//
// On other systems (walk_other.go) the tree is read with the os package,
// one folder at a time, below an os.Root: entries are typed without
// following links, links are never entered, and no path leaves the root.
package walk

import "runtime"

// Kind is the type of an entry, from lstat's point of view.
type Kind uint8

// Entry kinds.
const (
	File  Kind = iota // a regular file
	Dir               // a folder
	Link              // a symbolic link, never followed
	Other             // a device, socket or pipe
)

// Options configure a walk.
type Options struct {
	// Workers is the number of folders read at once; see WorkerCount.
	Workers int
	// MaxDepth bounds how deep the walk goes: 0 reports only the root's own
	// entries, 1 also those of its subfolders, and so on; -1 is unlimited.
	MaxDepth int
	// Skip, when not nil, is asked about every entry's name; a skipped entry
	// is neither visited nor, for a folder, entered. It is called from
	// several goroutines at once.
	Skip func(name []byte) bool
	// Visit is called for every entry that is not skipped, from several
	// goroutines at once; worker (0 <= worker < WorkerCount(Workers)) tells
	// them apart so callers can keep state per worker without locking. dir
	// is the folder's path relative to the root, slash-separated, "" for the
	// root itself. name is only valid during the call.
	Visit func(worker int, dir string, name []byte, kind Kind)

	// open and openAt replace walker.openBeneath and openChild in tests,
	// to inject failures. Only the Linux walker has them to replace.
	//lint:ignore U1000 used by walk_linux.go
	open func(root int, rel string) (int, error)
	//lint:ignore U1000 used by walk_linux.go
	openAt func(parent int, name string) (int, error)
}

// Stats describes a finished walk.
type Stats struct {
	Dirs       int // folders read, the root included
	Entries    int // entries seen, skipped ones included
	Unreadable int // folders that could not be opened or read
}

// WorkerCount returns how many workers a walk with Options.Workers = n uses:
// n itself when positive, else the number of usable CPUs.
func WorkerCount(n int) int {
	if n > 0 {
		return n
	}
	return runtime.GOMAXPROCS(0)
}

func isDots(name []byte) bool {
	return len(name) == 1 && name[0] == '.' || len(name) == 2 && name[0] == '.' && name[1] == '.'
}
