package mcpmount

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countbot/toolsvc/internal/childenv"
	"github.com/countbot/toolsvc/internal/egress"
	"github.com/countbot/toolsvc/internal/pkgcache"
	"github.com/countbot/toolsvc/internal/sandbox"
)

// stopGrace is how long a stdio server may take to exit after its stdin
// closes before it is killed.
const stopGrace = 2 * time.Second

// child is a stdio server's process, started inside the sandbox.
type child struct {
	proc   *sandbox.Child
	cmd    *exec.Cmd
	stdin  *os.File // the service's end
	stdout *os.File // the service's end
	tmp    string
	stderr *stderrLog
	// cache is the server's package cache, nil without one: its start is
	// over (Done) once the process is ready or has ended on its own.
	cache  *pkgcache.Folder
	exited chan struct{}
	err    error // how it ended, after exited
	once   sync.Once
	// killed is set when the service killed it (it did not exit after its
	// stdin closed, or sent too much): its exit status then says nothing.
	killed atomic.Bool
	// starting is the context of its start (the connect timeout, ended
	// by Close too); ready is set once the handshake is done. A process
	// stopped before it is ready and after starting has ended gets no
	// grace (see stop).
	starting context.Context
	ready    atomic.Bool
}

// sandbox is the sandbox the server's process runs in, with its network.
// A package runner's registry is the only default that needs a network
// namespace: where none can be made, the runner gets no network, as
// before allowlists, and the start-up error says why if it needed one.
func (s *Server) sandbox() (*sandbox.Sandbox, error) { return s.sandboxOf(s.d) }

func (s *Server) sandboxOf(d Deps) (*sandbox.Sandbox, error) {
	sb, err := d.Sandbox(s.netKind())
	if err != nil && s.registry && errors.Is(err, sandbox.ErrEgressUnavailable) {
		s.log.Warn().Err(err).Msg("MCP server: its package registry cannot be its only network here; it gets no network")
		return d.Sandbox(NetOff)
	}
	return sb, err
}

// connectStdio starts the server's process in the sandbox and runs the
// initialize handshake with it.
func (s *Server) connectStdio(ctx context.Context) (*conn, error) {
	sb, err := s.sandbox()
	if err != nil {
		return nil, fmt.Errorf("MCP server %s: no sandbox for it: %w", s.name, err)
	}
	sb, cache, err := s.withCache(sb)
	if err != nil {
		return nil, err
	}
	ch, err := s.startChild(sb, cache)
	if err != nil {
		if cache != nil {
			cache.Done()
		}
		return nil, err
	}
	ch.starting = ctx
	limit := &frameLimit{r: ch.stdout, limit: s.d.MaxMessage, lines: true, onOver: func() {
		ch.killed.Store(true)
		ch.kill()
	}}
	c := newConn(s, ch, limit)
	// The sdk's own bound on a line stays above ours, which ends the
	// connection with a clear reason first.
	t := &mcp.IOTransport{Reader: limit, Writer: stdinCloser{ch}, MaxLineLength: s.d.MaxMessage + 1<<20}
	return s.session(ctx, c, t)
}

// session runs the MCP handshake over t and, once it is done, watches c
// for the end of the connection.
func (s *Server) session(ctx context.Context, c *conn, t mcp.Transport) (*conn, error) {
	cs, err := s.client().Connect(ctx, t, nil)
	if err != nil {
		return nil, s.connectError(ctx, c, "initialize", err)
	}
	c.cs = cs
	if c.child != nil {
		c.child.ready.Store(true)
		if c.child.cache != nil {
			c.child.cache.Done()
		}
	}
	go c.watch()
	return c, nil
}

// program finds the entry's command on the child's PATH, or says where
// the service finds it when the sandbox hides it.
func (s *Server) program(dir string, env []string) (string, error) {
	prog, err := lookPath(s.cfg.Command, dir, envValue(env, "PATH"))
	if err != nil {
		if where, hidden := s.onHost(s.cfg.Command); where != "" && hidden != "" {
			return "", fmt.Errorf("MCP server %s: %w (likely cause: it is at %s, under %s, which is not on the server's PATH and which the sandbox hides from servers. Next: install it system-wide, under /usr/local or /opt, and name that path)", s.name, err, where, hidden)
		}
		return "", fmt.Errorf("MCP server %s: %w", s.name, err)
	}
	return prog, nil
}

// freshHome makes the folder "home" in the process's temporary folder
// tmp, its HOME when no HOME is kept between starts: its own, gone when
// the server stops.
func (s *Server) freshHome(tmp string) error {
	home := filepath.Join(tmp, "home")
	err := os.Mkdir(home, 0o700)
	if err == nil && s.d.Owner != nil {
		err = os.Chown(home, int(s.d.Owner.Uid), int(s.d.Owner.Gid))
	}
	if err != nil {
		return fmt.Errorf("MCP server %s: home folder: %w", s.name, err)
	}
	return nil
}

// withCache prepares the server's package cache (see Deps.Caches) for a
// start and returns sb with the cache writable (sandbox.With): the one
// sandbox that reaches it. Without Caches it returns sb and no cache.
func (s *Server) withCache(sb *sandbox.Sandbox) (*sandbox.Sandbox, *pkgcache.Folder, error) {
	if s.d.Caches == nil {
		return sb, nil, nil
	}
	var f *pkgcache.Folder
	var err error
	if s.cacheKey != nil {
		f, err = s.d.Caches.Key(s.name, *s.cacheKey)
	} else {
		f, err = s.d.Caches.Server(s.name)
	}
	if err == nil {
		sb, err = sb.With(f.Dir)
	}
	if err == nil {
		err = f.Begin()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("MCP server %s: its package cache: %w", s.name, err)
	}
	return sb, f, nil
}

// tempDir makes the process's private temporary folder, owned by the
// account servers run as.
func (s *Server) tempDir() (string, error) {
	tmp, err := os.MkdirTemp(s.d.TempDir, "toolsvc-mcp-*")
	if err == nil && s.d.Owner != nil {
		err = os.Chown(tmp, int(s.d.Owner.Uid), int(s.d.Owner.Gid))
	}
	if err != nil {
		return "", fmt.Errorf("MCP server %s: temporary folder: %w", s.name, err)
	}
	return tmp, nil
}

// startChild starts the command: argv resolved against the child's PATH,
// an allowlisted environment plus the entry's env and the package cache
// (when there is one), the working folder in the workspace, a private
// temporary folder, stdin and stdout as pipes to the service and stderr
// to the log.
func (s *Server) startChild(sb *sandbox.Sandbox, cache *pkgcache.Folder) (*child, error) {
	env := s.env()
	if cache != nil {
		env = withCacheEnv(env, cache.Dir)
	}
	dir, err := s.workDir()
	if err != nil {
		return nil, err
	}
	prog, err := s.program(dir, env)
	if err != nil {
		return nil, err
	}
	tmp, err := s.tempDir()
	if err != nil {
		return nil, err
	}
	path, args, childTmp := sb.Command(tmp, append([]string{prog}, s.res.args...))
	env = append(env, "TMPDIR="+childTmp)
	if sb.Egress() {
		env = append(env, egress.Env("http://"+sandbox.EgressAddr)...)
	}
	if s.d.Home == "" {
		if err := s.freshHome(tmp); err != nil {
			os.RemoveAll(tmp)
			return nil, err
		}
		env[0] = "HOME=" + filepath.Join(childTmp, "home")
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		os.RemoveAll(tmp)
		return nil, err
	}
	ch := &child{stdin: inW, stdout: outR, tmp: tmp, stderr: &stderrLog{s: s}, cache: cache, exited: make(chan struct{})}
	cmd := exec.CommandContext(s.life, path, args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdin = inR
	cmd.Stdout = outW
	cmd.Stderr = ch.stderr
	cmd.WaitDelay = stopGrace
	ch.cmd = cmd
	proc, err := sb.Start(cmd, tmp)
	// The child holds its own ends now.
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("MCP server %s: could not start %s: %w", s.name, prog, err)
	}
	ch.proc = proc
	proxy := s.serveEgress(proc)
	go func() {
		err, _ := proc.Wait()
		if proxy != nil {
			_ = proxy.Close()
		}
		ch.err = err
		if err == nil {
			ch.err = errors.New("exit status 0")
		}
		close(ch.exited)
	}()
	return ch, nil
}

// exitText says how the process ended, or "" while it runs or when the
// service killed it.
func (c *child) exitText() string {
	select {
	case <-c.exited:
		if c.killed.Load() {
			return ""
		}
		return fmt.Sprintf("the server process ended (%v)", c.err)
	default:
		return ""
	}
}

// exitErr returns how the process ended on its own, or nil while it
// runs or when the service killed it.
func (c *child) exitErr() error {
	select {
	case <-c.exited:
		if c.killed.Load() {
			return nil
		}
		return c.err
	default:
		return nil
	}
}

// kill kills the process and everything it started.
func (c *child) kill() { c.proc.Kill() }

// stop closes the server's stdin, as the MCP spec asks, waits stopGrace
// for it to exit, then kills it and what it started, and removes its
// temporary folder. A process that never finished the handshake and
// whose time to start is up (it did not answer initialize, or the
// service stops) is killed at once: it has nothing to save, and a
// program waiting for a download may not read its stdin at all. Killed
// so, it may have been installing into its package cache: the cache's
// start is left open, for the next start to clear (pkgcache.Begin).
func (c *child) stop() {
	c.once.Do(func() {
		c.stdin.Close()
		grace := stopGrace
		if !c.ready.Load() && c.starting != nil && c.starting.Err() != nil {
			grace = 0
		}
		t := time.NewTimer(grace)
		select {
		case <-c.exited:
		case <-t.C:
			c.killed.Store(true)
			c.kill()
			<-c.exited
		}
		t.Stop()
		if c.cache != nil && (c.ready.Load() || !c.killed.Load()) {
			c.cache.Done()
		}
		c.stdout.Close()
		os.RemoveAll(c.tmp)
	})
}

// stdinCloser is the transport's writer: writes go to the server's stdin;
// Close stops the server (the transport closes it with the session).
type stdinCloser struct{ c *child }

func (w stdinCloser) Write(p []byte) (int, error) { return w.c.stdin.Write(p) }
func (w stdinCloser) Close() error                { w.c.stop(); return nil }

// env builds a stdio server's environment as exec builds a command's: the
// allowlist of the service's variables, never the rest (API keys,
// tokens), HOME the configured home folder (set per start by startChild
// when there is none), then the entry's env.
func (s *Server) env() []string {
	own := func(name string) bool { _, ok := s.res.env[name]; return ok }
	out := append([]string{"HOME=" + s.d.Home}, childenv.From(s.d.Environ(), s.d.EnvAllow, own)...)
	for _, k := range sortedKeys(s.res.env) {
		if k == "HOME" || k == "TMPDIR" {
			continue // the sandbox decides where the server may write
		}
		out = append(out, k+"="+s.res.env[k])
	}
	return out
}

// withCacheEnv adds the variables that point the package managers at the
// cache dir (pkgcache.Env) to env, each unless env sets it already: the
// entry's env and TOOLSVC_EXEC_ENV_ALLOW's variables are the operator's
// choice and win.
func withCacheEnv(env []string, dir string) []string {
	for _, kv := range pkgcache.Env(dir) {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.ContainsFunc(env, func(e string) bool { return strings.HasPrefix(e, name+"=") }) {
			env = append(env, kv)
		}
	}
	return env
}

func envValue(env []string, name string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], name+"="); ok {
			return v
		}
	}
	return ""
}

// workDir resolves the entry's cwd through the workspace (default: the
// workspace itself) to a host path.
func (s *Server) workDir() (string, error) {
	p, err := s.d.Workspace.ResolveDir(s.cfg.Cwd, "give cwd a folder relative to the workspace, or leave it out.")
	if err != nil {
		return "", fmt.Errorf("MCP server %s: cwd %q: %w", s.name, s.cfg.Cwd, err)
	}
	return s.d.Workspace.RealPath(p)
}

// lookPath finds the program as a shell would for the child: a name with
// a slash is taken relative to the working folder, a bare name is looked
// up in the child's PATH (not the service's).
func lookPath(name, dir, path string) (string, error) {
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if err := executable(p); err != nil {
			return "", fmt.Errorf("command %q: %w", name, err)
		}
		return p, nil
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" || !filepath.IsAbs(d) {
			continue
		}
		p := filepath.Join(d, name)
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("command %q was not found in PATH (%s); install it, or give its absolute path", name, path)
}
