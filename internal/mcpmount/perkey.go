package mcpmount

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/homedir"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/sandbox"
	"github.com/countbot/toolsvc/internal/toolerr"
	"github.com/countbot/toolsvc/internal/workspace"
)

// A server whose entry says "per_key": true keeps each key's state apart:
// every key gets an instance of its own (a process of the server), in its
// own folder, so that one key's calls never reach what another key's
// calls left in a server's memory or files. Its tools are listed by one
// more instance, the listing instance, started with the service as a
// shared server is: GET /tools, the policy's names and the switches need
// the tools before any key has called, and a key's instance may come and
// go.

// listingHome names the HOME a per_key server's listing instance keeps
// below the shared HOME. homedir.ForFolder names a key folder's HOME with
// every "%" followed by two hex digits, so no folder can be given this
// one.
const listingHome = "%mcp-listing"

// minReap is the shortest wait of the reaper between two looks, so that
// instances falling idle together are stopped together.
const minReap = 10 * time.Millisecond

// newListing returns the listing instance of the per_key server name (not
// started), with what runs its keys' instances. It runs in an empty
// folder of its own, outside the workspace, made for it and removed when
// it is closed: it lists tools and runs no call, so it must hold no key's
// data, and a server that reads or writes files at start (server-memory
// loads its file) would otherwise do so in some key's folder or in the
// whole workspace, which the keys' folders are part of. ${WORKSPACE} is
// that folder, its HOME one of its own below the shared HOME (when there
// is one), its package cache the server's own (no key's instance uses
// it), and it runs in a sandbox whose workspace is that folder, the
// real workspace hidden (in a mode that confines files; in mode none
// nothing is confined anyway).
func newListing(name string, cfg Config, base Deps, addSecrets func(...string)) (*Server, error) {
	tmp := base.TempDir
	if tmp == "" {
		tmp = os.TempDir()
	}
	dir, err := os.MkdirTemp(tmp, "toolsvc-mcp-list-*")
	if err == nil && base.Owner != nil {
		err = os.Chown(dir, int(base.Owner.Uid), int(base.Owner.Gid))
	}
	if err == nil {
		dir, err = filepath.EvalSymlinks(dir)
	}
	if err != nil {
		return nil, fmt.Errorf("MCP server %s: the folder of its listing instance: %w", name, err)
	}
	ws, err := workspace.Open(dir, true)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("MCP server %s: the folder of its listing instance: %w", name, err)
	}
	cleanup := func() {
		ws.Close()
		os.RemoveAll(dir)
	}
	d := base
	d.Workspace = ws
	if base.Home != "" {
		if d.Home, err = homedir.Prepare(filepath.Join(base.Home, listingHome), homeUser(base.Owner)); err != nil {
			cleanup()
			return nil, fmt.Errorf("MCP server %s: the HOME of its listing instance: %w", name, err)
		}
	}
	if base.Sandbox != nil {
		d.Sandbox = confined(base.Sandbox, dir, d.Home, true)
	}
	s := New(name, cfg, d)
	s.keyed = &instances{name: name, cfg: cfg, base: base, addSecrets: addSecrets, log: s.log,
		m: map[instKey]*instance{}, added: map[string]bool{}, stop: make(chan struct{}), cleanup: cleanup}
	for _, v := range s.Secrets() {
		s.keyed.added[v] = true
	}
	return s, nil
}

// confined returns the sandboxes of a folder: those of sandboxes, with
// the folder dir as their workspace and home (when set) as their only
// other writable folder, the rest of the workspace and the shared
// writable folders hidden (sandbox.For). Where files cannot be confined
// (mode none), loose says whether to run in the original sandbox anyway:
// for the listing instance, whose folder holds nothing of anyone's; never
// for a key's folder, which must not run unconfined beside the others.
func confined(sandboxes func(Net) (*sandbox.Sandbox, error), dir, home string, loose bool) func(Net) (*sandbox.Sandbox, error) {
	var writable []string
	if home != "" {
		writable = []string{home}
	}
	return func(n Net) (*sandbox.Sandbox, error) {
		sb, err := sandboxes(n)
		if err != nil {
			return nil, err
		}
		f, err := sb.For(dir, writable...)
		if loose && errors.Is(err, sandbox.ErrFolderUnconfined) {
			return sb, nil
		}
		return f, err
	}
}

func homeUser(u *sandbox.User) *homedir.User {
	if u == nil {
		return nil
	}
	return &homedir.User{Uid: u.Uid, Gid: u.Gid}
}

// instKey names a key's instance: the key's name and its folder (both ""
// for the calls of a service without keys, which share one instance).
type instKey struct{ key, folder string }

// instances runs the keys' instances of one per_key server: each started
// at its key's first call, stopped after IdleTimeout without a call, at
// most MaxInstances at once. It is safe for concurrent use.
type instances struct {
	name       string
	cfg        Config
	base       Deps            // the Mount's: the whole workspace, exec's sandboxes, the shared HOME
	addSecrets func(...string) // adds an instance's secrets to the service's redaction
	log        zerolog.Logger  // the listing instance's
	cleanup    func()          // removes the listing instance's folder
	stop       chan struct{}   // closed by close: the reaper ends
	wg         sync.WaitGroup  // the reaper, and instances being stopped

	mu      sync.Mutex // the fields below
	closed  bool
	reaping bool // the reaper runs
	m       map[instKey]*instance
	added   map[string]bool // secrets already given to the redaction
}

// instance is one key's instance.
type instance struct {
	key instKey
	// srv is set, under instances.mu, once the instance's parts are made
	// (its folder, HOME, sandbox); err instead when they could not be.
	// ready is closed after either.
	srv   *Server
	err   error
	ready chan struct{}
	busy  int       // calls holding it
	last  time.Time // when the last call ended
}

// acquire returns the instance of ctx's call (its key and folder),
// starting it if there is none, and what the call must run when done
// with it. The first call of an instance waits for it to start, within
// the connect timeout. When MaxInstances run, the one idle longest is
// stopped to make room; when every one is running a call, the call gets
// a busy error.
func (p *instances) acquire(ctx context.Context) (*Server, func(), error) {
	call, _ := registry.CallFrom(ctx)
	k := instKey{key: call.Key, folder: call.Workspace}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, nil, p.stoppedError()
	}
	if in, ok := p.m[k]; ok {
		in.busy++
		p.mu.Unlock()
		release := func() { p.release(in) }
		select {
		case <-in.ready:
		case <-ctx.Done():
			release()
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, nil, toolerr.Errorf(toolerr.Timeout, "the MCP server %s did not start its instance for this key in time; the call was canceled. Next: retry in a moment.", p.name)
			}
			return nil, nil, toolerr.Errorf(toolerr.Canceled, "the call to the MCP server %s was canceled while its instance for this key was starting.", p.name)
		}
		if in.err != nil {
			release()
			return nil, nil, in.err
		}
		return in.srv, release, nil
	}
	var evicted *instance
	if len(p.m) >= p.cfg.MaxInstances {
		evicted = p.idlestLocked()
		if evicted == nil {
			p.mu.Unlock()
			return nil, nil, toolerr.Errorf(toolerr.Busy, "the MCP server %s runs an instance for each key, at most %d at once, and every one is running a call now. Next: retry in a moment.", p.name, p.cfg.MaxInstances)
		}
		delete(p.m, evicted.key)
		// Stopped before this key's starts, so that no more than
		// MaxInstances run even for a moment; close waits for it.
		p.wg.Add(1)
	}
	in := &instance{key: k, busy: 1, ready: make(chan struct{})}
	p.m[k] = in
	if !p.reaping {
		p.reaping = true
		p.wg.Go(p.reap)
	}
	p.mu.Unlock()
	release := func() { p.release(in) }
	if evicted != nil {
		p.log.Info().Str("key", evicted.key.key).Str("folder", evicted.key.folder).Int("max_instances", p.cfg.MaxInstances).
			Msg("mcp server: the key's instance stopped to make room for another key's")
		_ = evicted.srv.Close()
		p.wg.Done()
	}
	srv, err := p.start(ctx, in)
	if err != nil {
		release()
		return nil, nil, err
	}
	return srv, release, nil
}

// start makes the instance's parts, puts it in use and starts it. An
// instance that could not be made is removed, and its error given to the
// calls waiting for it; one that did not start this time is kept and
// restarted in the background, as a shared server is.
func (p *instances) start(ctx context.Context, in *instance) (*Server, error) {
	srv, err := p.make(in.key)
	p.mu.Lock()
	if err == nil && p.closed {
		err = p.stoppedError()
	}
	if err != nil {
		in.err = err
		if p.m[in.key] == in {
			delete(p.m, in.key)
		}
	} else {
		in.srv = srv
	}
	close(in.ready)
	p.mu.Unlock()
	if err != nil {
		return nil, err
	}
	p.add(srv.Secrets())
	srv.log.Info().Msg("mcp server: starting the key's own instance")
	if err := srv.Start(ctx); err != nil {
		p.mu.Lock()
		closed := p.closed
		p.mu.Unlock()
		if closed {
			return nil, p.stoppedError()
		}
		if ctx.Err() != nil {
			return nil, srv.ctxError(ctx)
		}
		if IsConfigError(err) {
			p.remove(in)
			return nil, toolerr.Errorf(toolerr.Unavailable, "the MCP server %s cannot start an instance for this key: %s. Nothing was run. Next: use another tool; the operator must fix the server's entry.", p.name, srv.redact(err.Error()))
		}
		return nil, toolerr.Errorf(toolerr.Unavailable, "the MCP server %s did not start an instance for this key: %s. It is retried in the background. Next: retry in a while, or use another tool.", p.name, srv.redact(err.Error()))
	}
	return srv, nil
}

// make builds (does not start) the instance of k: its workspace is the
// key's folder (the whole workspace for a key without one), which is also
// its working folder and ${WORKSPACE}; its HOME the folder's own below
// the shared HOME, as exec's commands for that folder get (the shared
// HOME for the whole workspace); its sandbox the folder's (sandbox.For);
// its package cache the key's own (pkgcache.Caches.Key).
func (p *instances) make(k instKey) (*Server, error) {
	d := p.base
	if k.folder != "" {
		ws, err := d.Workspace.Folder(k.folder)
		if err != nil {
			return nil, p.folderError(err)
		}
		d.Workspace = ws
		if d.Home != "" {
			if d.Home, err = homedir.ForFolder(d.Home, k.folder, homeUser(d.Owner)); err != nil {
				return nil, p.folderError(err)
			}
		}
		if d.Sandbox != nil {
			d.Sandbox = confined(d.Sandbox, ws.Dir(), d.Home, false)
		}
	}
	d.Log = d.Log.With().Str("key", k.key).Str("folder", k.folder).Logger()
	s := New(p.name, p.cfg, d)
	s.files = p.base.Workspace
	// The key's own package cache: a cache shared by the keys would let
	// one key's calls plant a package that another key's instance runs.
	key := k.key
	s.cacheKey = &key
	if k.folder != "" && d.Sandbox != nil {
		// Made now, so that a folder commands cannot be confined to is
		// this call's clear error, not a server that never starts.
		if _, err := s.sandbox(); err != nil {
			return nil, p.folderError(err)
		}
	}
	return s, nil
}

func (p *instances) folderError(err error) error {
	return toolerr.Errorf(toolerr.Unavailable, "the MCP server %s cannot run an instance in this key's own folder: %s. Nothing was run. Next: tell the user; the operator must fix it.", p.name, toolerr.ErrorMessage(err))
}

func (p *instances) stoppedError() error {
	return toolerr.Errorf(toolerr.Unavailable, "the MCP server %s was stopped (the service is shutting down or reloading its tools). Next: retry in a moment.", p.name)
}

// add gives the service's redaction the secrets of an instance it does
// not have yet: those that hold the instance's ${WORKSPACE}.
func (p *instances) add(secrets []string) {
	p.mu.Lock()
	var fresh []string
	for _, v := range secrets {
		if !p.added[v] {
			p.added[v] = true
			fresh = append(fresh, v)
		}
	}
	p.mu.Unlock()
	if len(fresh) > 0 && p.addSecrets != nil {
		p.addSecrets(fresh...)
	}
}

// release ends a call's hold on in: its idle time starts when the last
// call ends.
func (p *instances) release(in *instance) {
	p.mu.Lock()
	in.busy--
	in.last = time.Now()
	p.mu.Unlock()
}

// remove takes in out of use and stops it.
func (p *instances) remove(in *instance) {
	p.mu.Lock()
	if p.m[in.key] == in {
		delete(p.m, in.key)
	}
	p.mu.Unlock()
	_ = in.srv.Close()
}

// idlestLocked returns the started instance that no call holds and that
// has been idle longest, or nil.
func (p *instances) idlestLocked() *instance {
	var best *instance
	for _, in := range p.m {
		if in.busy == 0 && in.srv != nil && (best == nil || in.last.Before(best.last)) {
			best = in
		}
	}
	return best
}

// reap stops the instances idle for IdleTimeout, until close.
func (p *instances) reap() {
	t := time.NewTimer(p.cfg.IdleTimeout)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		idle, next := p.expired(time.Now())
		for _, in := range idle {
			p.log.Info().Str("key", in.key.key).Str("folder", in.key.folder).Dur("idle_timeout", p.cfg.IdleTimeout).
				Msg("mcp server: the key's instance stopped after idle_timeout without a call")
		}
		closeAll(idle)
		t.Reset(next)
	}
}

// expired takes out of use the instances idle for IdleTimeout at now,
// and says how long until the next one may be.
func (p *instances) expired(now time.Time) ([]*instance, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	next := p.cfg.IdleTimeout
	var out []*instance
	for k, in := range p.m {
		if in.busy > 0 || in.srv == nil {
			continue
		}
		left := in.last.Add(p.cfg.IdleTimeout).Sub(now)
		if left <= 0 {
			delete(p.m, k)
			out = append(out, in)
			continue
		}
		next = min(next, left)
	}
	return out, max(next, minReap)
}

// closeAll stops instances at once and waits for all of them.
func closeAll(list []*instance) {
	var wg sync.WaitGroup
	for _, in := range list {
		wg.Go(func() { _ = in.srv.Close() })
	}
	wg.Wait()
}

// close stops every instance (calls in flight on them end with an
// error), and no more start; then the listing instance's folder goes.
func (p *instances) close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	var list []*instance
	for _, in := range p.m {
		if in.srv != nil {
			list = append(list, in)
		}
	}
	p.m = nil
	p.mu.Unlock()
	close(p.stop)
	closeAll(list)
	p.wg.Wait()
	p.cleanup()
}
