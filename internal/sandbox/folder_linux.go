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

// folderKey names a sandbox For or With made: the workspace and writable
// folders For was given, or the folders With added (with set); the
// folders joined by NUL, which no path holds.
type folderKey struct {
	ws, writable string
	with         bool
}

// folderCache holds the sandboxes For and With made. The map is
// replaced, never changed, so that a call finds its sandbox without
// taking a lock; mu is held only to make one.
type folderCache struct {
	m      atomic.Pointer[map[folderKey]*Sandbox]
	mu     sync.Mutex
	closed bool
}

// get returns the sandbox of key, or nil when none was made yet.
func (c *folderCache) get(key folderKey) *Sandbox {
	if m := c.m.Load(); m != nil {
		return (*m)[key]
	}
	return nil
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
	if f := s.folders.get(key); f != nil {
		return f, nil
	}
	if s.mode == None {
		return nil, ErrFolderUnconfined
	}
	if !filepath.IsAbs(workspace) {
		return nil, fmt.Errorf("sandbox: a folder's workspace must be an absolute path, got %q", workspace)
	}
	return s.derive(key, func() (Options, error) { return s.folderOptions(workspace, writable) })
}

// folderOptions are the options of the sandbox For makes.
func (s *Sandbox) folderOptions(workspace string, writable []string) (Options, error) {
	ws, err := realPath(workspace)
	if err != nil {
		return Options{}, fmt.Errorf("sandbox: folder %s: %w", workspace, err)
	}
	if pathx.Contains(ws, s.ws) {
		return Options{}, fmt.Errorf("sandbox: folder %s holds the workspace %s: a folder's own sandbox is for a folder inside it", ws, s.ws)
	}
	o := s.opts
	// The mode s settled on (Auto chose it already) and the bubblewrap
	// it found: the folder's sandbox is the same kind.
	o.Mode, o.Bwrap = s.mode, s.bwrap
	o.Workspace = ws
	o.Writable = slices.Clone(writable)
	o.Private = append(append(slices.Clone(s.opts.Private), s.ws), s.writable...)
	return o, nil
}

// With returns a sandbox like s (the same mode, network, workspace,
// private paths, writable folders, account and limits) in which the
// folders writable are readable and writable too: for a program that
// keeps a folder of its own between runs (an MCP server's package cache)
// that no other command may reach. Such a folder may lie inside one of
// s's private paths (the data folder), of which everything else stays
// hidden: under bubblewrap the private path is still covered, and the
// folder bound over the cover; under Landlock, which grants and never
// takes away, the folder gets a rule of its own and the private path
// none. A folder that holds s's workspace or a private path is refused:
// it would open them.
//
// The sandbox is made at the first call for those folders (with a trial
// run, as New makes one), kept, and closed with s; For on it makes a
// key's folder's sandbox, in which they are private. With is safe for
// concurrent use. In mode None, where nothing is confined, it returns s.
func (s *Sandbox) With(writable ...string) (*Sandbox, error) {
	if s.mode == None || len(writable) == 0 {
		return s, nil
	}
	key := folderKey{writable: strings.Join(writable, "\x00"), with: true}
	if f := s.folders.get(key); f != nil {
		return f, nil
	}
	return s.derive(key, func() (Options, error) { return s.withOptions(writable) })
}

// withOptions are the options of the sandbox With makes.
func (s *Sandbox) withOptions(writable []string) (Options, error) {
	for _, w := range writable {
		p, err := realPath(w)
		if err != nil {
			return Options{}, fmt.Errorf("sandbox: writable folder %s: %w", w, err)
		}
		for _, q := range append([]string{s.ws}, s.private...) {
			if pathx.Contains(p, q) {
				return Options{}, fmt.Errorf("sandbox: writable folder %s holds %s, which it would open to commands", p, q)
			}
		}
	}
	o := s.opts
	o.Mode, o.Bwrap = s.mode, s.bwrap
	o.Writable = append(slices.Clone(s.opts.Writable), writable...)
	return o, nil
}

// derive makes, keeps and returns the sandbox of key from the options
// build returns, unless another call made it meanwhile.
func (s *Sandbox) derive(key folderKey, build func() (Options, error)) (*Sandbox, error) {
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
	o, err := build()
	if err != nil {
		return nil, err
	}
	f, err := New(o)
	if err != nil {
		if key.with {
			return nil, fmt.Errorf("the sandbox with %s writable: %w", strings.ReplaceAll(key.writable, "\x00", ", "), err)
		}
		return nil, fmt.Errorf("the sandbox of folder %s: %w", o.Workspace, err)
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
