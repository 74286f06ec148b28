package tools

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/countbot/toolsvc/internal/egress"
	"github.com/countbot/toolsvc/internal/headtail"
	"github.com/countbot/toolsvc/internal/homedir"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/sandbox"
	"github.com/countbot/toolsvc/internal/toolerr"
	"github.com/countbot/toolsvc/internal/workspace"
)

// This file is exec's run path, shared by exec and by the tools that run
// an operator's program in exec's sandbox (command tools from a file):
// the slots, the private temporary folder, the allowlisted environment,
// the bounded output, the sandbox and the kill of everything a program
// started.

// job is one program to run.
type job struct {
	argv    []string // absolute program path and its arguments
	dir     string   // host path of the working folder
	stdin   []byte   // nil: no input
	env     []string // NAME=value added after the allowlisted environment
	sandbox *sandbox.Sandbox
	egress  *egress.Options // the allowlist's proxy when sandbox has Egress; nil: exec's
	home    string          // HOME kept between calls (see place); "": the call's own
	what    string          // names the program in an error: "the shell"
}

// place is where a call's programs run: the whole workspace, or the
// folder the call's key is given (registry.Call.Workspace), which is then
// their workspace, their sandbox's writable workspace and the root of
// their working folder.
type place struct {
	ws     *workspace.Workspace
	folder string // the key's folder, relative to the workspace; "": the whole workspace
	// home is the HOME kept between calls: Home for the whole workspace,
	// the folder's own below it for a key's folder (a HOME shared between
	// keys would let one plant files, a shell's rc file or a git hook,
	// that another's commands run); "" where each call gets its own.
	home string
}

// placeOf returns where the programs of ctx's call run. A call without a
// folder of its own gets exec's workspace and HOME as they are, without
// an allocation.
func (e *Exec) placeOf(ctx context.Context) (place, error) {
	call, _ := registry.CallFrom(ctx)
	if call.Workspace == "" {
		return place{ws: e.ws, home: e.opts.Home}, nil
	}
	ws, err := e.ws.Folder(call.Workspace)
	if err != nil {
		return place{}, err
	}
	pl := place{ws: ws, folder: call.Workspace}
	if e.opts.Home != "" {
		if pl.home, err = e.folderHome(call.Workspace); err != nil {
			return place{}, err
		}
	}
	return pl, nil
}

// sandbox returns the sandbox the place's programs run in: sb for the
// whole workspace; for a key's folder, one like sb whose workspace is the
// folder and whose writable folder is the folder's HOME, with the rest of
// the workspace and the shared HOME out of reach (see sandbox.For).
func (pl place) sandbox(sb *sandbox.Sandbox) (*sandbox.Sandbox, error) {
	if pl.folder == "" {
		return sb, nil
	}
	var writable []string
	if pl.home != "" {
		writable = []string{pl.home}
	}
	f, err := sb.For(pl.ws.Dir(), writable...)
	if err != nil {
		return nil, toolerr.Errorf(toolerr.Unavailable, "commands cannot run in this key's own folder: %w. Nothing was run. Next: tell the user that exec's sandbox cannot confine commands to the key's folder, which the operator must fix.", err)
	}
	return f, nil
}

// folderHome returns the HOME a key's folder keeps between calls: a
// folder of its own in Home (see homedir.ForFolder), made and checked
// once, as Home was: private to the account commands run as, never a
// link.
func (e *Exec) folderHome(folder string) (string, error) {
	if h, ok := e.homes.Load(folder); ok {
		return h.(string), nil
	}
	var owner *homedir.User
	if o := e.opts.Owner; o != nil {
		owner = &homedir.User{Uid: o.Uid, Gid: o.Gid}
	}
	h, err := homedir.ForFolder(e.opts.Home, folder, owner)
	if err != nil {
		return "", toolerr.Errorf(toolerr.Unavailable, "the HOME of this key's folder could not be prepared: %w. Nothing was run. Next: tell the user; the operator must fix it.", err)
	}
	e.homes.Store(folder, h)
	return h, nil
}

// outcome is what a job left: its output (each stream bounded at both
// ends), its exit code, and how it ended.
type outcome struct {
	stdout, stderr *headtail.Buffer
	code           int
	timedOut       bool // cctx ended it, not the program itself
	contained      bool // every process it started is known to be gone
	// refused tells what the network allowlist refused, for the result;
	// "" when nothing was.
	refused string
}

// acquire waits for a free slot, for at most timeout: the wait does not
// eat into the program's timeout, and how long it was is returned.
func (e *Exec) acquire(ctx context.Context, timeout time.Duration) (release func(), waited time.Duration, err error) {
	waitStart := time.Now()
	wctx, wcancel := context.WithTimeout(ctx, timeout)
	defer wcancel()
	select {
	case e.sem <- struct{}{}:
		return func() { <-e.sem }, time.Since(waitStart), nil
	case <-wctx.Done():
		if ctx.Err() != nil {
			return nil, 0, canceled(true)
		}
		return nil, 0, toolerr.Errorf(toolerr.Busy, "%d commands are already running (TOOLSVC_EXEC_MAX_CONCURRENT) and none finished within the %s timeout. Next: wait for the running commands to finish, then retry.", cap(e.sem), timeout)
	}
}

// runJob starts j in its sandbox with a fresh private temporary folder
// and waits for it, for cctx (its timeout) or for ctx (the caller). An
// error means it could not start. With a Tracer, the command has its exec
// span: the sandbox's mode, and the exit status or why there is none.
func (e *Exec) runJob(ctx, cctx context.Context, j job) (outcome, error) {
	sb := j.sandbox
	if sb == nil {
		sb = e.opts.Sandbox
	}
	if e.opts.Tracer == nil {
		return e.startAndWait(ctx, cctx, j, sb)
	}
	_, span := e.opts.Tracer.StartExec(ctx, string(sb.Mode()))
	o, err := e.startAndWait(ctx, cctx, j, sb)
	switch {
	case err != nil:
		span.EndExec(0, false, err)
	case ctx.Err() != nil:
		span.EndExec(0, false, ctx.Err())
	case o.timedOut:
		span.EndExec(0, false, context.DeadlineExceeded)
	default:
		span.EndExec(o.code, true, nil)
	}
	return o, err
}

// startAndWait is runJob in the sandbox sb.
func (e *Exec) startAndWait(ctx, cctx context.Context, j job, sb *sandbox.Sandbox) (outcome, error) {
	// A fresh folder per call, never reused: nothing one command leaves
	// there can reach the next. Where the sandbox can, it mounts a fresh
	// tmpfs for each command itself, with the HOME folder in it.
	tmp, fresh := sb.FreshTemp()
	if !fresh {
		var err error
		tmp, err = os.MkdirTemp(e.opts.TempDir, "toolsvc-exec-*")
		if err == nil && e.opts.Owner != nil {
			err = os.Chown(tmp, int(e.opts.Owner.Uid), int(e.opts.Owner.Gid))
		}
		if err != nil {
			return outcome{}, toolerr.Errorf(toolerr.ToolError, "could not create a temporary folder for the command: %w", err)
		}
		defer os.RemoveAll(tmp)
	}
	path, args, childTmp := sb.Command(tmp, j.argv)
	home := j.home
	if home == "" {
		// The call's own HOME, inside its temporary folder: writable in
		// every sandbox mode, as seen by the child (bubblewrap shows the
		// folder as /tmp), and deleted with it.
		if !fresh {
			if err := e.makeHome(filepath.Join(tmp, callHome)); err != nil {
				return outcome{}, toolerr.Errorf(toolerr.ToolError, "could not create a HOME folder for the program: %w", err)
			}
		}
		home = filepath.Join(childTmp, callHome)
	}
	// Room for MaxOutput characters of up to 4 bytes at each end.
	keep := utf8.UTFMax * e.opts.MaxOutput
	o := outcome{stdout: headtail.New(keep, keep), stderr: headtail.New(keep, keep)}
	stream := newStreamer(ctx)
	defer stream.stop()

	cmd := exec.CommandContext(cctx, path, args...)
	cmd.Dir = j.dir
	cmd.Env = append(e.env(home, childTmp), j.env...)
	if sb.Egress() {
		cmd.Env = append(cmd.Env, proxyEnv...)
	}
	if j.stdin != nil {
		cmd.Stdin = bytes.NewReader(j.stdin)
	}
	cmd.Stdout = stream.tee(o.stdout)
	cmd.Stderr = stream.tee(o.stderr)
	// Bounds how long Wait waits for the output pipes once the command's
	// processes are gone or killed.
	cmd.WaitDelay = 2 * time.Second
	child, err := sb.StartContext(cctx, cmd, tmp)
	if err != nil {
		return outcome{}, toolerr.Errorf(toolerr.ToolError, "could not start %s: %w", j.what, err)
	}
	eo := j.egress
	if eo == nil {
		eo = e.opts.Egress
	}
	proxy := serveEgress(child.Egress(), eo)
	if !e.track(child) {
		child.Kill()
	}
	err, o.contained = child.Wait()
	e.untrack(child)
	stream.stop()
	o.refused = proxy.stop()
	o.timedOut = cctx.Err() != nil && !exitedByItself(cmd.ProcessState)
	o.code = exitCode(cmd.ProcessState, err)
	return o, nil
}

// Program is a program to run in exec's sandbox by a tool other than exec.
type Program struct {
	Argv  []string // absolute program path and its arguments
	Stdin []byte   // nil: no input
	Env   []string // NAME=value added after exec's allowlisted environment
	// Sandbox runs it; nil: exec's. A tool whose network setting differs
	// from exec's passes a sandbox built with the same options but that.
	// For a call whose key has a folder, Run uses that sandbox's For.
	Sandbox *sandbox.Sandbox
	// Egress is the proxy's settings when Sandbox has Egress with an
	// allowlist of its own; nil: exec's.
	Egress  *egress.Options
	Timeout time.Duration // 0: exec's default
	// MaxOutput bounds each of Stdout and Stderr in characters; 0: exec's.
	MaxOutput int
}

// Ran is a Program's output, each stream cut in the middle to MaxOutput
// characters with a note, and its exit code (128+N for signal N).
type Ran struct {
	Stdout, Stderr string
	// Refused tells what the network allowlist refused; "" when nothing
	// was.
	Refused  string
	ExitCode int
	Waited   time.Duration // for a free slot
}

// Run runs p in the workspace (the key's own folder, for a call whose key
// has one, in a sandbox confined to it) through exec's run path: a slot
// among TOOLSVC_EXEC_MAX_CONCURRENT, a private temporary folder, the
// allowlisted environment, the sandbox, bounded output and time. A
// timeout, the call being canceled, no free slot or a program that cannot
// start is an error with the matching code; an exit code of its own is
// not.
func (e *Exec) Run(ctx context.Context, p Program) (Ran, error) {
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = e.opts.DefaultTimeout
	}
	max := p.MaxOutput
	if max <= 0 {
		max = e.opts.MaxOutput
	}
	pl, err := e.placeOf(ctx)
	if err != nil {
		return Ran{}, err
	}
	dir, err := e.workingDir(pl.ws, "")
	if err != nil {
		return Ran{}, err
	}
	sb := p.Sandbox
	if sb == nil {
		sb = e.opts.Sandbox
	}
	if sb, err = pl.sandbox(sb); err != nil {
		return Ran{}, err
	}
	release, waited, err := e.acquire(ctx, timeout)
	if err != nil {
		return Ran{}, err
	}
	defer release()
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	o, err := e.runJob(ctx, cctx, job{argv: p.Argv, dir: dir, stdin: p.Stdin, env: p.Env, sandbox: sb, egress: p.Egress, home: pl.home, what: p.Argv[0]})
	if err != nil {
		return Ran{}, err
	}
	r := Ran{Stdout: boundedStream(o.stdout, max, "stdout"), Stderr: boundedStream(o.stderr, max, "stderr"), ExitCode: o.code, Waited: waited, Refused: o.refused}
	switch {
	case ctx.Err() != nil:
		return Ran{}, canceled(o.contained)
	case o.timedOut:
		last := lastLines(r.Stdout+"\n"+r.Stderr, 2000)
		if strings.TrimSpace(last) == "" {
			last = "(no output)"
		}
		return Ran{}, toolerr.Errorf(toolerr.Timeout, "the program timed out after %s and was stopped; %s.\n\nLast output captured:\n%s\n\nNext: try a smaller piece of work.", timeout, killedText(o.contained), last)
	}
	return r, nil
}

// boundedStream renders one stream within budget characters, "" when it
// is empty.
func boundedStream(b *headtail.Buffer, budget int, name string) string {
	if b.Total() == 0 {
		return ""
	}
	return render(b, budget, name)
}
