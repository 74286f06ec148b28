// Package workspace confines the paths a model names to the workspace
// folder. Every access goes through os.Root, so ".." and symbolic links that
// lead out are refused by the kernel-backed openat walk, with no window
// between a check and the use of the path.
package workspace

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/countbot/toolsvc/internal/pathx"
	"github.com/countbot/toolsvc/internal/runes"
	"github.com/countbot/toolsvc/internal/toolerr"
)

// MaxPathLen bounds the paths a model may name.
const MaxPathLen = 4096

// Workspace is the folder tools work in.
//
// It holds the folder open as an os.Root, which keeps working on the
// folder it opened even when the configured path is deleted, moved or
// mounted over. So every Resolve checks the open folder with one fstat: a
// deleted folder has no links left. At most every PathCheckInterval it also
// compares the device and inode at the configured path with the open
// folder, which catches a folder moved away and replaced by another (or a
// mount over it); doing that at every call would add a path walk to each.
// When the folder is gone, tools get an "unavailable" error instead of an
// empty listing; when a new folder has taken its place, it is opened and
// used from then on, without a restart.
type Workspace struct {
	given    string // absolute as configured, before resolving links
	restrict bool
	sys      *os.Root // "/" for paths outside, only when not restricted

	cur atomic.Pointer[opened]
	// pathChecked is when (monotonic nanoseconds since start) the path was
	// last compared with the open folder; pathEvery is how often it is.
	pathChecked atomic.Int64
	pathEvery   time.Duration
	start       time.Time
	mu          sync.Mutex // serialises reopening; guards old
	// old holds the roots replaced by a reopen. Calls that resolved a path
	// before the reopen may still use them, so they stay open until Close.
	// One is kept per reopen, which happens only when an operator replaces
	// the workspace folder.
	old []*opened

	warn   func(msg string) // told of repairs; may be nil
	healMu sync.Mutex       // one repair of the temporary folder at a time

	// parent and rel are set for a key's own folder (see Folder): the
	// folder rel inside parent, always opened through parent's root.
	parent *Workspace
	rel    string
	owner  *Owner // who a key's own folder is made for; nil: the service
	// folders are the keys' own folders opened so far, by rel; replaced
	// whole under foldersMu, read without a lock.
	folders   atomic.Pointer[map[string]*Workspace]
	foldersMu sync.Mutex
}

// PathCheckInterval is how often Resolve compares the configured path with
// the open folder (see Workspace).
const PathCheckInterval = time.Second

// opened is the workspace folder as opened at one time.
type opened struct {
	dir  string   // absolute, symbolic links resolved
	root *os.Root // the folder
	f    *os.File // the same folder, for fstat
}

func (o *opened) close() {
	o.f.Close()
	o.root.Close()
}

// Options configure OpenWith.
type Options struct {
	// Restrict confines paths to the workspace; false lets absolute paths
	// and ".." also reach outside it.
	Restrict bool
	// Warn, when set, is told of repairs the service made in the
	// workspace on its own (its temporary folder put back), for the log.
	Warn func(msg string)
	// FolderOwner, when set, owns the keys' own folders the service makes
	// (see Folder): the account exec's commands run as, which must be
	// able to write there.
	FolderOwner *Owner
}

// Owner is an account by its numeric IDs.
type Owner struct{ Uid, Gid int }

// Open is OpenWith without warnings.
func Open(dir string, restrict bool) (*Workspace, error) {
	return OpenWith(dir, Options{Restrict: restrict})
}

// OpenWith creates dir if it is missing and opens it as the workspace. Its
// temporary folder (TempDir) is made a folder again if something took its
// place, and temporary files left there by writes that a crash interrupted
// are removed.
func OpenWith(dir string, opts Options) (*Workspace, error) {
	restrict := opts.Restrict
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	o, err := openDir(abs)
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	w := &Workspace{given: abs, restrict: restrict, pathEvery: PathCheckInterval, start: time.Now(), warn: opts.Warn, owner: opts.FolderOwner}
	w.cur.Store(o)
	if !restrict {
		if w.sys, err = os.OpenRoot("/"); err != nil {
			o.close()
			return nil, fmt.Errorf("workspace: %w", err)
		}
	}
	w.repairTemp(o.root)
	removeStaleTemps(o.root)
	return w, nil
}

func openDir(abs string) (*opened, error) {
	resolved, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(resolved)
	if err != nil {
		return nil, err
	}
	f, err := root.Open(".")
	if err != nil {
		root.Close()
		return nil, err
	}
	return &opened{dir: resolved, root: root, f: f}, nil
}

// Close releases the workspace's open folders, the keys' own folders'
// too.
func (w *Workspace) Close() error {
	if w.sys != nil {
		w.sys.Close()
	}
	if m := w.folders.Load(); m != nil {
		for _, f := range *m {
			f.Close()
		}
	}
	w.mu.Lock()
	for _, o := range w.old {
		o.close()
	}
	w.old = nil
	w.mu.Unlock()
	o := w.cur.Load()
	o.f.Close()
	return o.root.Close()
}

// Dir returns the workspace's absolute path with symbolic links resolved.
func (w *Workspace) Dir() string { return w.cur.Load().dir }

// Restricted reports whether paths are confined to the workspace.
func (w *Workspace) Restricted() bool { return w.restrict }

// Root returns the workspace as an os.Root, as last opened. Prefer Current,
// which notices a replaced or missing folder.
func (w *Workspace) Root() *os.Root { return w.cur.Load().root }

// Current returns the workspace folder as an os.Root after checking that
// the configured path still names it. When the folder was replaced, the new
// one is opened (and cleared of stale temporary files); when it is missing,
// the error is a *toolerr.Error with code unavailable that tells the model so.
func (w *Workspace) Current() (*os.Root, error) {
	o, err := w.current()
	if err != nil {
		return nil, err
	}
	return o.root, nil
}

// ErrUnavailable matches (with errors.Is) the error returned while the
// workspace folder is missing.
var ErrUnavailable = errors.New("workspace unavailable")

func unavailable(err error) *toolerr.Error {
	return &toolerr.Error{Code: toolerr.Unavailable, Err: errors.Join(ErrUnavailable, err),
		Message: "the workspace folder is unavailable (deleted, moved or unmounted on the host), so nothing was read or changed. " +
			"Next: tell the user the workspace is missing; retry once it has been restored. Do not assume it is empty."}
}

func (w *Workspace) current() (*opened, error) {
	o := w.cur.Load()
	if alive(o.f) && !w.pathDue() {
		return o, nil
	}
	if w.same(o) {
		w.pathChecked.Store(int64(time.Since(w.start)))
		return o, nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if o = w.cur.Load(); w.same(o) {
		return o, nil // another call reopened it
	}
	fi, err := w.statPath()
	if err != nil {
		return o, unavailable(err)
	}
	if !fi.IsDir() {
		return o, unavailable(fmt.Errorf("%s is not a folder", w.given))
	}
	n, err := w.openPath()
	if err != nil {
		return o, unavailable(err)
	}
	if !w.same(n) {
		// Opened, but it cannot be told to be the folder at the path (it
		// cannot be searched, or was replaced again meanwhile): do not keep
		// it, or every call would open another.
		n.close()
		return o, unavailable(errors.New("the folder at the path cannot be checked"))
	}
	w.repairTemp(n.root)
	removeStaleTemps(n.root)
	w.old = append(w.old, o)
	w.cur.Store(n)
	w.pathChecked.Store(int64(time.Since(w.start)))
	return n, nil
}

// pathDue reports whether the path is due to be compared with the folder.
func (w *Workspace) pathDue() bool {
	return time.Since(w.start)-time.Duration(w.pathChecked.Load()) >= w.pathEvery
}

// alive reports whether the open folder f still has a name: fstat works
// and, where the platform reports it, the folder has links left.
func alive(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && !unlinked(fi)
}

// same reports whether the configured path still names the folder o holds
// open, comparing device and inode (os.SameFile).
func (w *Workspace) same(o *opened) bool {
	pfi, err := w.statPath()
	if err != nil {
		return false
	}
	rfi, err := o.f.Stat()
	return err == nil && !unlinked(rfi) && os.SameFile(pfi, rfi)
}

// Path is a resolved location: a name under a root. Inside the workspace,
// Root is the workspace and Display the workspace-relative path; outside
// (only when not restricted), Root is "/" and Display the absolute path.
type Path struct {
	Root    *os.Root
	Name    string // relative to Root, slash-separated, "." for Root itself
	Display string // what results show the model
	Outside bool   // true when the path is outside the workspace
}

// Resolve turns a path a model gave into a Path. Relative paths are taken
// from the workspace; an absolute path inside the workspace is accepted; any
// other absolute path, and any ".." that climbs out, is refused while the
// workspace is restricted. Symbolic links are checked when the path is used.
func (w *Workspace) Resolve(p string) (Path, error) {
	switch {
	case strings.IndexByte(p, 0) >= 0:
		return Path{}, &toolerr.Error{Code: toolerr.PathDenied, Message: "the path contains a NUL byte. Next: give a plain path relative to the workspace."}
	case len(p) > MaxPathLen:
		return Path{}, &toolerr.Error{Code: toolerr.InvalidArguments, Message: fmt.Sprintf("the path is %d bytes long; at most %d are allowed.", len(p), MaxPathLen)}
	case p == "~" || strings.HasPrefix(p, "~/"):
		return Path{}, &toolerr.Error{Code: toolerr.PathDenied, Message: fmt.Sprintf("path '%s': '~' is not expanded here. Next: give a path relative to the workspace, such as 'notes/todo.md'.", runes.Shorten(p, runes.Echo))}
	}
	if p == "" {
		p = "."
	}
	o, err := w.current()
	var abs string
	if filepath.IsAbs(p) {
		abs = filepath.Clean(p)
	} else {
		abs = filepath.Join(o.dir, p)
	}
	for _, base := range []string{o.dir, w.given} {
		if rel, ok := pathx.Rel(base, abs); ok {
			if err != nil {
				return Path{}, err
			}
			return Path{Root: o.root, Name: rel, Display: rel}, nil
		}
	}
	if w.restrict {
		return Path{}, outside(p)
	}
	return Path{Root: w.sys, Name: strings.TrimPrefix(abs, "/"), Display: abs, Outside: true}, nil
}

// ResolveDir resolves p like Resolve and requires it to be a folder. A file
// is refused with a message ending in next, which tells the model what to
// do instead.
func (w *Workspace) ResolveDir(p, next string) (Path, error) {
	path, err := w.Resolve(p)
	if err != nil {
		return path, err
	}
	fi, err := path.Stat()
	if err != nil {
		return path, err
	}
	if !fi.IsDir() {
		return path, &toolerr.Error{Code: toolerr.InvalidArguments, Message: fmt.Sprintf("'%s' is a file, not a folder. Next: %s", runes.Shorten(path.Display, runes.Echo), next)}
	}
	return path, nil
}

func outside(p string) *toolerr.Error {
	return &toolerr.Error{Code: toolerr.PathDenied, Message: fmt.Sprintf("path '%s' is outside the workspace, and access is restricted to the workspace. Next: use a path relative to the workspace root.", runes.Shorten(p, runes.Echo))}
}

// Explain turns an error from using p into one a model can act on.
func Explain(err error, p Path) error {
	if err == nil {
		return nil
	}
	var we *toolerr.Error
	if errors.As(err, &we) {
		return err
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "path escapes from parent"):
		return &toolerr.Error{Code: toolerr.PathDenied, Err: err, Message: fmt.Sprintf("path '%s' leads outside the workspace (through '..' or a symbolic link) and is refused. Next: use a path inside the workspace.", runes.Shorten(p.Display, runes.Echo))}
	case errors.Is(err, fs.ErrNotExist):
		return &toolerr.Error{Code: toolerr.NotFound, Err: err, Message: fmt.Sprintf("'%s' does not exist. Next: check the name with list_dir or file_search.", runes.Shorten(p.Display, runes.Echo))}
	case errors.Is(err, syscall.ENOTDIR):
		return &toolerr.Error{Code: toolerr.NotFound, Err: err, Message: fmt.Sprintf("'%s' does not exist: a part of the path is a file, not a folder.", runes.Shorten(p.Display, runes.Echo))}
	case errors.Is(err, fs.ErrPermission):
		return &toolerr.Error{Code: toolerr.PathDenied, Err: err, Message: fmt.Sprintf("permission denied for '%s'.", runes.Shorten(p.Display, runes.Echo))}
	case errors.Is(err, syscall.ELOOP):
		return &toolerr.Error{Code: toolerr.PathDenied, Err: err, Message: fmt.Sprintf("'%s' is a loop of symbolic links.", runes.Shorten(p.Display, runes.Echo))}
	case errors.Is(err, syscall.ENAMETOOLONG):
		return &toolerr.Error{Code: toolerr.InvalidArguments, Err: err, Message: fmt.Sprintf("the path '%s' is too long.", runes.Shorten(p.Display, runes.Echo))}
	}
	return &toolerr.Error{Code: toolerr.ToolError, Err: err, Message: fmt.Sprintf("cannot use '%s': %s", runes.Shorten(p.Display, runes.Echo), stripOp(err))}
}

// stripOp drops the absolute path the os package puts in its errors, which
// would tell the model where the workspace is on the host.
func stripOp(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err.Error()
	}
	return err.Error()
}

// Open opens the file or folder at p for reading. It opens without
// blocking, so a named pipe planted in the workspace cannot hang the call;
// callers check the type with Stat on the opened file.
func (p Path) Open() (*os.File, error) {
	f, err := p.Root.OpenFile(p.Name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	return f, Explain(err, p)
}

// Stat follows symbolic links (within the root) and describes the target.
func (p Path) Stat() (fs.FileInfo, error) {
	fi, err := p.Root.Stat(p.Name)
	return fi, Explain(err, p)
}

// Lstat describes p itself, without following a final symbolic link.
func (p Path) Lstat() (fs.FileInfo, error) {
	fi, err := p.Root.Lstat(p.Name)
	return fi, Explain(err, p)
}

// Join returns the path of a child of p.
func (p Path) Join(name string) Path {
	q := p
	q.Name = path.Join(p.Name, name)
	if p.Display == "." {
		q.Display = name
	} else {
		q.Display = path.Join(p.Display, name)
	}
	return q
}

// RealPath returns the absolute host path of p with every symbolic link
// resolved, as the kernel sees the opened file. Use it where a host path is
// unavoidable (a child process's working folder); it is checked against the
// workspace again when restricted.
func (w *Workspace) RealPath(p Path) (string, error) {
	f, err := p.Root.Open(p.Name)
	if err != nil {
		return "", Explain(err, p)
	}
	defer f.Close()
	resolved, err := openedPath(f)
	if err != nil {
		return "", Explain(err, p)
	}
	if w.restrict && !pathx.Contains(w.Dir(), resolved) {
		return "", outside(p.Display)
	}
	return resolved, nil
}

// maxLinks bounds how many symbolic links a write follows.
const maxLinks = 40

// target follows symbolic links at the end of p's name while they stay
// inside p's root, so a write replaces the file a link points to rather than
// the link. A link that leads out is refused.
func (w *Workspace) target(p Path) (Path, error) {
	for i := 0; i < maxLinks; i++ {
		fi, err := p.Root.Lstat(p.Name)
		if errors.Is(err, fs.ErrNotExist) {
			return p, nil
		}
		if err != nil {
			return p, Explain(err, p)
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			return p, nil
		}
		dest, err := p.Root.Readlink(p.Name)
		if err != nil {
			return p, Explain(err, p)
		}
		var abs string
		switch {
		case filepath.IsAbs(dest):
			abs = filepath.Clean(dest)
		case p.Outside:
			abs = filepath.Join("/", path.Dir(p.Name), dest)
		default:
			abs = filepath.Join(w.Dir(), path.Dir(p.Name), dest)
		}
		next, err := w.Resolve(abs)
		if err != nil {
			return p, &toolerr.Error{Code: toolerr.PathDenied, Message: fmt.Sprintf("'%s' is a symbolic link that leads outside the workspace; writing through it is refused. Next: write to a path inside the workspace.", runes.Shorten(p.Display, runes.Echo))}
		}
		next.Display = p.Display
		p = next
	}
	return p, &toolerr.Error{Code: toolerr.PathDenied, Message: fmt.Sprintf("'%s' is a chain of more than %d symbolic links.", runes.Shorten(p.Display, runes.Echo), maxLinks)}
}

// WriteFile replaces the file at p with data, atomically: the data goes to
// a temporary file, which is synced and renamed over the target. With
// appendTo, the old content is kept in front of data. Missing parent
// folders are created. An existing file keeps its permission bits.
//
// The temporary file is made in the workspace's temporary folder (TempDir),
// so the leftovers of a crash can be found in one place at the next start;
// when the target is on another file system (a mount inside the workspace)
// it is made beside the target instead. Either way IsTemp recognises its
// name. Besides data, which the caller holds, WriteFile holds only a fixed
// copy buffer: the old content of an appended file is streamed.
func (w *Workspace) WriteFile(p Path, data []byte, appendTo bool) error {
	return w.write(p, appendTo, func(f *os.File) error {
		_, err := f.Write(data)
		return err
	})
}

// WriteString is WriteFile for text held in a string, which it writes
// without copying it into a byte slice.
func (w *Workspace) WriteString(p Path, data string, appendTo bool) error {
	return w.write(p, appendTo, func(f *os.File) error {
		_, err := f.WriteString(data)
		return err
	})
}

// WriteStrings replaces the file at p with parts one after another, as
// WriteString does with their concatenation, without building it in
// memory first.
func (w *Workspace) WriteStrings(p Path, parts ...string) error {
	return w.write(p, false, func(f *os.File) error {
		for _, s := range parts {
			if _, err := f.WriteString(s); err != nil {
				return err
			}
		}
		return nil
	})
}

func (w *Workspace) write(p Path, appendTo bool, data func(*os.File) error) error {
	dir := path.Dir(p.Name)
	if err := p.Root.MkdirAll(dir, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) || errors.Is(err, syscall.ENOTDIR) {
			return &toolerr.Error{Code: toolerr.InvalidArguments, Err: err, Message: fmt.Sprintf("cannot create '%s': a part of its folder path is a file, not a folder.", runes.Shorten(p.Display, runes.Echo))}
		}
		return Explain(err, p)
	}
	t, err := w.target(p)
	if err != nil {
		return err
	}
	perm := fs.FileMode(0o644)
	var old *os.File
	if fi, err := t.Root.Stat(t.Name); err == nil {
		if fi.IsDir() {
			return &toolerr.Error{Code: toolerr.InvalidArguments, Message: fmt.Sprintf("'%s' is a folder, not a file.", runes.Shorten(p.Display, runes.Echo))}
		}
		if !fi.Mode().IsRegular() {
			return &toolerr.Error{Code: toolerr.InvalidArguments, Message: fmt.Sprintf("'%s' is not a regular file (a device, pipe or socket).", runes.Shorten(p.Display, runes.Echo))}
		}
		perm = fi.Mode().Perm()
		if appendTo {
			if old, err = t.Root.Open(t.Name); err != nil {
				return Explain(err, p)
			}
			defer old.Close()
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return Explain(err, p)
	}
	// The shared temporary folder only serves paths in the workspace's own
	// root; outside paths (unrestricted mode) use their own folder.
	shared := !t.Outside
	for {
		tmp := tempBeside(t.Name)
		if shared {
			if tmp, err = w.tempShared(t.Root); err != nil {
				shared = false
				continue
			}
		}
		err := writeTemp(t.Root, tmp, t.Name, old, data, perm)
		if shared && errors.Is(err, syscall.EXDEV) {
			// The target is on another file system: start again beside it.
			shared = false
			if old != nil {
				if _, err := old.Seek(0, io.SeekStart); err != nil {
					return Explain(err, p)
				}
			}
			continue
		}
		return Explain(err, p)
	}
}

// writeTemp writes old's content and data to the new file tmp, syncs it
// and renames it to name. The temporary file is locked while it exists
// under its name, so that a start-up clean-up by another process sharing
// the workspace leaves it alone. On failure it is removed.
func writeTemp(root *os.Root, tmp, name string, old *os.File, data func(*os.File) error, perm fs.FileMode) error {
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	unlock := lockTemp(f)
	err = func() error {
		if old != nil {
			if _, err := io.Copy(f, old); err != nil {
				return err
			}
		}
		if err := data(f); err != nil {
			return err
		}
		if err := f.Chmod(perm); err != nil {
			return err
		}
		return f.Sync()
	}()
	if err == nil && renameOpen {
		err = root.Rename(tmp, name)
		unlock()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = root.Remove(tmp)
		}
		return err
	}
	unlock()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, name)
	}
	if err != nil {
		_ = root.Remove(tmp)
	}
	return err
}
