package sandbox

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/countbot/toolsvc/internal/pathx"
)

// folderKey names a sandbox For made: its workspace and writable folders
// as For was given them (the folders joined by NUL, which no path holds).
type folderKey struct{ ws, writable string }

// folderCache holds the sandboxes For made, one per folder. The map is
// replaced, never changed, so that a call finds its folder's sandbox
// without taking a lock; mu is held only to make one.
type folderCache struct {
	m      atomic.Pointer[map[folderKey]*Sandbox]
	mu     sync.Mutex
	closed bool
}

// For returns a sandbox like s (the same mode, network, private paths,
// account and limits) whose workspace is the folder workspace instead of
// s's, for a key given a folder of its own: the command can read and
// write that folder, and nothing of s's workspace around it. Its writable
// folders are writable (a HOME of the folder's own), not s's: a HOME
// shared by every key would let one plant files (a shell's rc file, a git
// hook) that another's commands run. s's workspace and writable folders
// are private paths of the new sandbox, hidden wherever they would be
// reachable otherwise (under bubblewrap, which shows the whole system; in
// a system folder Landlock grants, such as /opt).
//
// The sandbox is made at the first call for that folder (with a trial
// run, as New makes one), kept, and closed with s. For is safe for
// concurrent use, and takes no lock once the folder's sandbox is made.
// In mode None it returns ErrFolderUnconfined: nothing would confine the
// command to its folder. A workspace that holds s's (s's own included) is
// refused: its sandbox could not hide s's workspace without hiding itself.
func (s *Sandbox) For(workspace string, writable ...string) (*Sandbox, error) {
	key := folderKey{ws: workspace, writable: strings.Join(writable, "\x00")}
	if m := s.folders.m.Load(); m != nil {
		if f, ok := (*m)[key]; ok {
			return f, nil
		}
	}
	return s.newFolder(key, workspace, writable)
}

// newFolder makes, keeps and returns the sandbox of For's key, unless
// another call made it meanwhile.
func (s *Sandbox) newFolder(key folderKey, workspace string, writable []string) (*Sandbox, error) {
	if s.mode == None {
		return nil, ErrFolderUnconfined
	}
	if !filepath.IsAbs(workspace) {
		return nil, fmt.Errorf("sandbox: a folder's workspace must be an absolute path, got %q", workspace)
	}
	c := &s.folders
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errors.New("sandbox: closed")
	}
	old := c.m.Load()
	if old != nil {
		if f, ok := (*old)[key]; ok {
			return f, nil
		}
	}
	ws, err := realPath(workspace)
	if err != nil {
		return nil, fmt.Errorf("sandbox: folder %s: %w", workspace, err)
	}
	if pathx.Contains(ws, s.ws) {
		return nil, fmt.Errorf("sandbox: folder %s holds the workspace %s: a folder's own sandbox is for a folder inside it", ws, s.ws)
	}
	o := s.opts
	// The mode s settled on (Auto chose it already) and the bubblewrap
	// it found: the folder's sandbox is the same kind.
	o.Mode, o.Bwrap = s.mode, s.bwrap
	o.Workspace = ws
	o.Writable = slices.Clone(writable)
	o.Private = append(append(slices.Clone(s.opts.Private), s.ws), s.writable...)
	f, err := New(o)
	if err != nil {
		return nil, fmt.Errorf("the sandbox of folder %s: %w", ws, err)
	}
	next := make(map[folderKey]*Sandbox, 1)
	if old != nil {
		maps.Copy(next, *old)
	}
	next[key] = f
	c.m.Store(&next)
	return f, nil
}

// closeFolders closes the sandboxes For made, and has it make no more.
func (s *Sandbox) closeFolders() {
	c := &s.folders
	c.mu.Lock()
	c.closed = true
	m := c.m.Swap(nil)
	c.mu.Unlock()
	if m != nil {
		for _, f := range *m {
			f.Close()
		}
	}
}
