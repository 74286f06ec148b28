package workspace

import (
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/countbot/toolsvc/internal/pathx"
)

// Folder returns the workspace of the folder rel inside w (slash-separated,
// relative, such as "tenants/alice"): a key's own folder, which its
// policy gives it. Its paths are confined to it whether or not w is
// restricted, and it is opened through w's root, so that neither a path a
// model gives nor a symbolic link put in rel's place leads out of w. ""
// is w itself.
//
// The first use makes the folder if it is missing, and makes it private:
// mode 0700, owned by Options.FolderOwner when set. The folders above it
// are made with mode 0711, so that the account commands run as can reach
// the folder without listing its neighbours. Each folder is opened once
// and kept until w is closed.
func (w *Workspace) Folder(rel string) (*Workspace, error) {
	if rel == "" {
		return w, nil
	}
	if m := w.folders.Load(); m != nil {
		if f, ok := (*m)[rel]; ok {
			return f, nil
		}
	}
	w.foldersMu.Lock()
	defer w.foldersMu.Unlock()
	old := w.folders.Load()
	if old != nil {
		if f, ok := (*old)[rel]; ok {
			return f, nil
		}
	}
	if !filepath.IsLocal(filepath.FromSlash(rel)) || path.Clean(rel) != rel {
		return nil, fmt.Errorf("workspace folder %q is not a clean relative path", rel)
	}
	f := &Workspace{given: filepath.Join(w.given, filepath.FromSlash(rel)), restrict: true, pathEvery: w.pathEvery,
		start: time.Now(), warn: w.warn, parent: w, rel: rel}
	if err := f.makePrivate(w.owner); err != nil {
		return nil, unavailable(err)
	}
	o, err := f.openPath()
	if err != nil {
		return nil, unavailable(err)
	}
	f.cur.Store(o)
	f.repairTemp(o.root)
	removeStaleTemps(o.root)
	next := map[string]*Workspace{}
	if old != nil {
		maps.Copy(next, *old)
	}
	next[rel] = f
	w.folders.Store(&next)
	return f, nil
}

// makePrivate makes the folder, and the folders above it, where missing,
// then gives it mode 0700 and its owner.
func (w *Workspace) makePrivate(owner *Owner) error {
	po, err := w.parent.current()
	if err != nil {
		return err
	}
	if up := path.Dir(w.rel); up != "." {
		if err := po.root.MkdirAll(up, 0o711); err != nil {
			return err
		}
	}
	if err := po.root.Mkdir(w.rel, 0o700); err != nil && !os.IsExist(err) {
		return err
	}
	d, err := po.root.Open(w.rel)
	if err != nil {
		return err
	}
	defer d.Close()
	if fi, err := d.Stat(); err != nil || !fi.IsDir() {
		return fmt.Errorf("%s is not a folder", w.rel)
	}
	if owner != nil {
		if err := d.Chown(owner.Uid, owner.Gid); err != nil {
			return err
		}
	}
	return d.Chmod(0o700)
}

// statPath describes the folder at the configured path: for a key's own
// folder, as its parent's root finds it.
func (w *Workspace) statPath() (fs.FileInfo, error) {
	if w.parent == nil {
		return os.Stat(w.given)
	}
	po, err := w.parent.current()
	if err != nil {
		return nil, err
	}
	return po.root.Stat(w.rel)
}

// openPath opens the folder at the configured path: for a key's own
// folder, through its parent's root, which refuses a link out of it.
func (w *Workspace) openPath() (*opened, error) {
	if w.parent == nil {
		return openDir(w.given)
	}
	po, err := w.parent.current()
	if err != nil {
		return nil, err
	}
	root, err := po.root.OpenRoot(w.rel)
	if err != nil {
		return nil, err
	}
	f, err := root.Open(".")
	if err != nil {
		root.Close()
		return nil, err
	}
	dir, err := openedPath(f)
	if err == nil && !pathx.Contains(po.dir, dir) {
		err = fmt.Errorf("%s is not inside the workspace", w.rel)
	}
	if err != nil {
		f.Close()
		root.Close()
		return nil, err
	}
	return &opened{dir: dir, root: root, f: f}, nil
}
