package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/countbot/toolsvc/internal/childenv"
	"github.com/countbot/toolsvc/internal/egress"
	"github.com/countbot/toolsvc/internal/headtail"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/runes"
	"github.com/countbot/toolsvc/internal/sandbox"
	"github.com/countbot/toolsvc/internal/shellguard"
	"github.com/countbot/toolsvc/internal/tooldef"
	"github.com/countbot/toolsvc/internal/toolerr"
	"github.com/countbot/toolsvc/internal/tracing"
	"github.com/countbot/toolsvc/internal/workspace"
)

// CommandGuard judges a shell script before it runs. Check returns nil to
// allow it, or an error carrying the policy_denied code and the reason.
type CommandGuard interface {
	Check(script string) error
}

// ExecOptions configure the exec tool.
type ExecOptions struct {
	DefaultTimeout time.Duration    // when the call gives none
	MaxTimeout     time.Duration    // upper bound of a call's timeout
	MaxConcurrent  int              // commands running at once; more wait, then get busy
	MaxOutput      int              // characters of output in a result
	EnvAllow       []string         // extra variable names passed to commands ("NAME" or "PREFIX_*")
	Guard          CommandGuard     // required
	Sandbox        *sandbox.Sandbox // required; mode None when commands run unconfined
	// Egress configures the proxy that is the only way out of a command
	// whose sandbox has Egress (a network allowlist): its rules, its
	// network guard, its log. Required with such a sandbox; each command
	// gets a proxy of its own made from it.
	Egress *egress.Options
	// TempDir is where each command's private temporary folder is made;
	// default os.TempDir(). It must not be inside the workspace.
	TempDir string
	// Home, when set, is the commands' HOME, kept between calls for the
	// dotfiles and caches of the programs they run. Empty (the default):
	// each call gets a fresh HOME, the folder "home" in its private
	// temporary folder, so that nothing one command plants there (a
	// .gitconfig, a usercustomize.py, a shell rc file) runs in the next.
	// A call whose key has a folder of its own (registry.Call.Workspace)
	// keeps a HOME of that folder's own inside Home instead, and cannot
	// reach Home itself: nothing one key plants runs in another's calls.
	Home string
	// Owner, when set, owns each call's temporary folder (the account
	// commands run as).
	Owner *sandbox.User
	// Environ returns the service's environment; default os.Environ.
	Environ func() []string
	// Tracer, when set, gives each command an exec span (the sandbox's
	// mode, the exit status). Nil: none.
	Tracer *tracing.Tracer
}

// Shell is the shell exec runs commands with.
const Shell = "/bin/sh"

// Exec runs shell commands in the workspace: /bin/sh -c in its own session,
// with an allowlisted environment, bounded output and time, inside the
// configured sandbox.
type Exec struct {
	tooldef.Def[execArgs]
	ws   *workspace.Workspace
	opts ExecOptions
	sem  chan struct{}

	mu      sync.Mutex
	running map[*sandbox.Child]struct{} // killed by Close
	closed  bool

	// homes maps a key's folder (registry.Call.Workspace) to the HOME its
	// commands keep between calls, below Home, once prepared.
	homes sync.Map
}

// NewExec returns the exec tool.
func NewExec(ws *workspace.Workspace, o ExecOptions) *Exec {
	if o.DefaultTimeout <= 0 {
		o.DefaultTimeout = 30 * time.Second
	}
	if o.MaxTimeout < o.DefaultTimeout {
		o.MaxTimeout = o.DefaultTimeout
	}
	if o.MaxConcurrent <= 0 {
		o.MaxConcurrent = 4
	}
	if o.MaxOutput <= 0 {
		o.MaxOutput = 10000
	}
	if o.TempDir == "" {
		o.TempDir = os.TempDir()
	}
	if o.Environ == nil {
		o.Environ = os.Environ
	}
	e := &Exec{ws: ws, opts: o, sem: make(chan struct{}, o.MaxConcurrent), running: map[*sandbox.Child]struct{}{}}
	e.Def = tooldef.New[execArgs]("exec", e.describe(), func(p tooldef.Prop) {
		p.Prop("command").MinLength(1).MaxLength(shellguard.MaxScriptBytes)
		p.Prop("timeout").Minimum(1).Maximum(int(o.MaxTimeout / time.Second)).
			Description(fmt.Sprintf("Seconds before the command is stopped. Default: %d.", int(o.DefaultTimeout/time.Second)))
	}, tooldef.Sample(execArgs{Command: "true"}),
		tooldef.Title("Run command"), tooldef.Hints(tooldef.Destructive, tooldef.OpenWorld))
	return e
}

// execArgs are the arguments of a call; working_dir and timeout have
// defaults.
type execArgs struct {
	Command    string `json:"command" jsonschema:"The shell command to run, e.g. 'go test ./...' or 'grep -rn TODO src'."`
	WorkingDir string `json:"working_dir,omitempty" jsonschema:"Folder to run in, relative to the workspace. Default: the workspace root."`
	Timeout    int    `json:"timeout,omitempty"`
}

func (e *Exec) describe() string {
	where := "The workspace is writable; the rest of the system is read-only"
	net := "not restricted (no sandbox)"
	if sb := e.opts.Sandbox; sb.Mode() != sandbox.None {
		net = "off"
		switch {
		case sb.Network():
			net = "on"
		case sb.Egress() && e.opts.Egress != nil:
			net = "only to " + e.opts.Egress.Rules.String() + ", through the proxy that HTTP_PROXY, HTTPS_PROXY and npm's and pip's settings name (no DNS otherwise; a refused connection gets HTTP 403 naming the rule)"
		}
	} else {
		where = "Work in the workspace"
	}
	return fmt.Sprintf("Run a shell command with /bin/sh -c in the workspace and return its output: stdout, then "+
		"stderr after 'STDERR:'; a failed command starts with 'COMMAND FAILED (exit code N)'. Use it for builds, "+
		"tests, git, grep and other command-line work. "+where+"; "+e.homeText()+"; network: %s. Destructive "+
		"commands (rm -rf, mkfs, dd, shutdown...) are refused by a safety guard. Commands stop after %d s "+
		"unless 'timeout' says otherwise (at most %d s). Output beyond %d characters is cut in the middle: "+
		"send large output to a file and read it with read_file, or narrow it with grep, head or tail.",
		net, int(e.opts.DefaultTimeout/time.Second), int(e.opts.MaxTimeout/time.Second), e.opts.MaxOutput)
}

// homeText tells the model which of its files last beyond the call.
func (e *Exec) homeText() string {
	if e.opts.Home == "" {
		return "$HOME and $TMPDIR are private folders deleted after the call (keep what must last in the workspace)"
	}
	return "$TMPDIR is a private temporary folder deleted after the call; $HOME is kept between calls"
}

// Timeout implements registry.Timeouter: the registry's deadline is a
// backstop above the longest wait for a free slot plus the largest
// per-call timeout, so that exec's own timeout, which reports the output
// captured so far, fires first.
func (e *Exec) Timeout() time.Duration { return 2*e.opts.MaxTimeout + 15*time.Second }

// Execute implements registry.Tool.
func (e *Exec) Execute(ctx context.Context, raw json.RawMessage) (string, error) {
	a, err := e.Decode(raw)
	if err != nil {
		return "", err
	}
	if strings.TrimSpace(a.Command) == "" {
		return "", toolerr.Errorf(toolerr.InvalidArguments, "the command is empty. Next: give the shell command to run.")
	}
	pl, err := e.placeOf(ctx)
	if err != nil {
		return "", err
	}
	dir, err := e.workingDir(pl.ws, a.WorkingDir)
	if err != nil {
		return "", err
	}
	if err := e.opts.Guard.Check(a.Command); err != nil {
		return "", err
	}
	sb, err := pl.sandbox(e.opts.Sandbox)
	if err != nil {
		return "", err
	}
	timeout := e.opts.DefaultTimeout
	if a.Timeout > 0 {
		timeout = min(time.Duration(a.Timeout)*time.Second, e.opts.MaxTimeout)
	}
	release, waited, err := e.acquire(ctx, timeout)
	if err != nil {
		return "", err
	}
	defer release()
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out, err := e.run(ctx, cctx, job{argv: []string{Shell, "-c", a.Command}, dir: dir, sandbox: sb, home: pl.home, what: "the shell"}, timeout)
	if err == nil && waited >= time.Second {
		out += fmt.Sprintf("\n\n(The command waited %.0f s for a free slot before it started; its timeout counted from then.)", waited.Seconds())
	}
	return out, err
}

// workingDir resolves the call's working_dir through ws (the workspace,
// or the key's own folder in it), with symbolic links resolved, to a host
// path for the child.
func (e *Exec) workingDir(ws *workspace.Workspace, p string) (string, error) {
	path, err := ws.ResolveDir(p, "give working_dir a folder relative to the workspace, or leave it out.")
	if err != nil {
		return "", err
	}
	return ws.RealPath(path)
}

// run starts the shell of j and waits for it, its timeout, or the caller.
func (e *Exec) run(ctx, cctx context.Context, j job, timeout time.Duration) (string, error) {
	o, err := e.runJob(ctx, cctx, j)
	if err != nil {
		return "", err
	}
	switch {
	case ctx.Err() != nil:
		return "", canceled(o.contained)
	case o.timedOut:
		last := lastLines(e.format(o.stdout, o.stderr, 0, false), 2000)
		if strings.TrimSpace(last) == "" {
			last = "(no output)"
		}
		return "", toolerr.Errorf(toolerr.Timeout, "Command timed out after %s and was stopped; %s.\n\nLast output captured:\n%s%s\n\nNext: give a larger 'timeout' (at most %d s), or split the work into shorter commands.", timeout, killedText(o.contained), last, o.refused, int(e.opts.MaxTimeout/time.Second))
	}
	// The command ran: the call succeeded whatever its status, which the
	// caller reads from exit_code and the model from the text.
	registry.ReportExitCode(ctx, o.code)
	return e.format(o.stdout, o.stderr, o.code, true) + o.refused, nil
}

// killedText says what is known of the command's processes after a kill.
func killedText(contained bool) string {
	if contained {
		return "every process it started was killed"
	}
	return "its process group was killed (processes that detached into a session of their own cannot be tracked without a PID namespace or a control group here)"
}

func canceled(contained bool) error {
	return toolerr.Errorf(toolerr.Canceled, "the command was stopped because the call was canceled (the client went away or the service is shutting down); %s.", killedText(contained))
}

// exitedByItself reports whether the shell exited rather than being killed,
// so a command that finished as its deadline passed is not called timed
// out.
func exitedByItself(ps *os.ProcessState) bool {
	if ps == nil {
		return false
	}
	ws, ok := ps.Sys().(syscall.WaitStatus)
	return ok && ws.Exited()
}

// exitCode returns the shell's exit status, 128+N for a signal as shells
// report it.
func exitCode(ps *os.ProcessState, err error) int {
	if ps == nil {
		if err != nil {
			return -1
		}
		return 0
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// callHome is the name of a call's own HOME in its temporary folder.
const callHome = sandbox.TempHome

// makeHome creates a call's own HOME, private to the account commands run
// as.
func (e *Exec) makeHome(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	if e.opts.Owner != nil {
		return os.Chown(dir, int(e.opts.Owner.Uid), int(e.opts.Owner.Gid))
	}
	return nil
}

// env builds the child's environment from the allowlist only: the
// service's own variables (API keys, tokens) never reach commands. HOME is
// home (the call's own, or the configured one that lasts between calls),
// and TMPDIR the call's private folder.
func (e *Exec) env(home, tmp string) []string {
	return append([]string{"HOME=" + home, "TMPDIR=" + tmp}, childenv.From(e.opts.Environ(), e.opts.EnvAllow, nil)...)
}

// format renders the output in CountBot's form: a failure announced first
// and last, stdout, then stderr under "STDERR:" when not blank, and
// "(no output)" when there is nothing. Each stream is cut in the middle to
// fit MaxOutput, with a note of how much was cut.
func (e *Exec) format(stdout, stderr *headtail.Buffer, code int, final bool) string {
	outN, errN := stdout.Total(), stderr.Total()
	errBlank := errN == 0 || isBlank(stderr)
	if errBlank {
		errN = 0
	}
	limit := int64(e.opts.MaxOutput)
	outB, errB := outN, errN
	if outN+errN > limit {
		errB = min(errN, max(limit/2, limit-outN))
		outB = min(outN, limit-errB)
	}
	var parts []string
	if final && code != 0 {
		parts = append(parts, fmt.Sprintf("COMMAND FAILED (exit code %d)", code))
	}
	if outN > 0 {
		parts = append(parts, render(stdout, int(outB), "stdout"))
	}
	if !errBlank {
		parts = append(parts, "STDERR:\n"+render(stderr, int(errB), "stderr"))
	}
	if final && code != 0 {
		parts = append(parts, fmt.Sprintf("\nExit code: %d", code))
	}
	if len(parts) == 0 || (len(parts) == 1 && strings.TrimSpace(parts[0]) == "") {
		return "(no output)"
	}
	return strings.Join(parts, "\n")
}

func isBlank(b *headtail.Buffer) bool {
	h, t, d := b.Snapshot()
	return d == 0 && strings.TrimSpace(string(h)+string(t)) == ""
}

// render returns one stream within budget characters: whole when it fits,
// else its first and last halves around a note saying how much was cut.
// Invalid UTF-8 is replaced, never passed on.
func render(b *headtail.Buffer, budget int, name string) string {
	head, tail, dropped := b.Snapshot()
	all := append(head, tail...)
	total := int64(len(all)) + dropped
	if dropped == 0 && utf8.RuneCount(all) <= budget {
		return strings.ToValidUTF8(string(all), "\uFFFD")
	}
	h := len(runes.Prefix(string(all), budget/2))
	start := suffixStart(all, budget-budget/2)
	if start < h {
		start = h
	}
	cut := total - int64(h) - int64(len(all)-start)
	note := fmt.Sprintf("\n\n... [%d bytes of %s cut here (%d bytes in all); the first %d and last %d characters are shown. Next: send the output to a file (command > out.txt) and read it with read_file, or narrow it with grep, head or tail] ...\n\n",
		cut, name, total, budget/2, budget-budget/2)
	return strings.ToValidUTF8(string(all[:h]), "\uFFFD") + note + strings.ToValidUTF8(string(all[start:]), "\uFFFD")
}

// suffixStart returns where the last n characters of b begin.
func suffixStart(b []byte, n int) int {
	i := len(b)
	for k := 0; k < n && i > 0; k++ {
		_, size := utf8.DecodeLastRune(b[:i])
		i -= size
	}
	return i
}

// lastLines keeps the end of s, at most limit bytes, starting at a line.
func lastLines(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	s = s[len(s)-limit:]
	if i := strings.IndexByte(s, '\n'); i >= 0 && i < len(s)-1 {
		s = s[i+1:]
	}
	return "...\n" + strings.ToValidUTF8(s, "\uFFFD")
}

func (e *Exec) track(c *sandbox.Child) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.running[c] = struct{}{}
	return !e.closed
}

func (e *Exec) untrack(c *sandbox.Child) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.running, c)
}

// Close kills every running command and what it started. Shutdown also
// cancels the calls; this makes sure nothing outlives the service.
func (e *Exec) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	for c := range e.running {
		c.Kill()
	}
}

// Streaming of output as it comes, for callers that asked for events.
const (
	streamEvery    = 100 * time.Millisecond
	streamMaxEvent = 16 << 10 // bytes per event; more within one period is dropped and counted
)

// streamer sends output to registry.Progress in bounded events, at most one
// per streamEvery. It does nothing when nobody listens.
type streamer struct {
	ctx     context.Context
	on      bool
	mu      sync.Mutex
	pending []byte
	dropped int64
	done    chan struct{}
	wg      sync.WaitGroup
	once    sync.Once
}

func newStreamer(ctx context.Context) *streamer {
	s := &streamer{ctx: ctx, on: registry.Streaming(ctx), done: make(chan struct{})}
	if s.on {
		s.wg.Add(1)
		go s.loop()
	}
	return s
}

// tee returns a writer that feeds buf and, when streaming, the events.
func (s *streamer) tee(buf *headtail.Buffer) writerFunc {
	if !s.on {
		return buf.Write
	}
	return func(p []byte) (int, error) {
		s.add(p)
		return buf.Write(p)
	}
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func (s *streamer) add(p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	room := streamMaxEvent - len(s.pending)
	if room < len(p) {
		s.dropped += int64(len(p) - max(room, 0))
		p = p[:max(room, 0)]
	}
	s.pending = append(s.pending, p...)
}

func (s *streamer) loop() {
	defer s.wg.Done()
	t := time.NewTicker(streamEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			s.flush(false)
		case <-s.done:
			s.flush(true)
			return
		}
	}
}

// flush sends what is pending, keeping back a rune cut at the end unless
// this is the last flush.
func (s *streamer) flush(last bool) {
	s.mu.Lock()
	data := s.pending
	dropped := s.dropped
	s.dropped = 0
	keep := 0
	if !last {
		for i := len(data) - 1; i >= 0 && i >= len(data)-utf8.UTFMax; i-- {
			if utf8.RuneStart(data[i]) {
				if !utf8.FullRune(data[i:]) {
					keep = len(data) - i
				}
				break
			}
		}
	}
	s.pending = append([]byte(nil), data[len(data)-keep:]...)
	data = data[:len(data)-keep]
	s.mu.Unlock()
	if len(data) > 0 {
		registry.Progress(s.ctx, "output", strings.ToValidUTF8(string(data), "\uFFFD"))
	}
	if dropped > 0 {
		registry.Progress(s.ctx, "output", fmt.Sprintf("\n[... %d bytes of output not streamed; the result shows the first and last parts ...]\n", dropped))
	}
}

// stop sends what is left and ends the streaming; it may be called twice.
func (s *streamer) stop() {
	s.once.Do(func() {
		close(s.done)
		s.wg.Wait()
	})
}

var (
	_ registry.Tool      = (*Exec)(nil)
	_ registry.Timeouter = (*Exec)(nil)
)
