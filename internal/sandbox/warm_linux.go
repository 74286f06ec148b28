package sandbox

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/countbot/toolsvc/internal/procgroup"
)

// warm is a command's sandbox started ahead by a spare's thread, with a
// shell inside it waiting on its standard input for a few lines that the
// call writes: the command's environment, its folder, and its program
// with standard input from /dev/null, as a command started on the spot
// gets them.
//
// Under bubblewrap that is bubblewrap's namespaces, mounts and seccomp
// filter, most of what a command costs in that mode (milliseconds: each
// mount, the PID namespace, bubblewrap's own start), with a shell inside
// that replaces itself with the program: the program runs as the process
// bubblewrap started, and nothing of that shell is left. Elsewhere (as
// root) it is the command's PID namespace and the shell that stays first
// in it, with the resource limits set: that shell reads the lines itself
// and runs the program as its child, as it does for a command started on
// the spot.
//
// The sandbox is started with an empty environment and no folder of the
// call's: what a call decides is in the lines it writes, never in how the
// sandbox was built, and the sandbox is the one Command describes for
// the call (startInWarm checks that the call's command line begins with
// the very arguments this one was started with).
type warm struct {
	path   string    // the program of Command's command line
	args   []string  // its arguments before the call's program
	cmd    *exec.Cmd // the sandbox started ahead
	script *os.File  // the call's end of the shell's standard input
	stdout *os.File  // read ends of the output pipes
	stderr *os.File
}

// warmShell is the shell that reads the call's lines inside the sandbox.
const warmShell = "/bin/sh"

// warmWriteTimeout bounds the wait for the warm shell to take the call's
// lines; past it the command is started on the spot.
const warmWriteTimeout = 10 * time.Second

// warmable reports whether commands can be started ahead: where every
// command line is the same up to the program (see Command), that is under
// bubblewrap or where a shell stays first in each command's PID
// namespace. Where the service finds a command's processes by a mark in
// their environment instead, the mark is the call's own: not there.
//
// Nor where each command's first program makes its network namespace and
// hands its listener over (Egress without CAP_SYS_ADMIN): the sandbox
// started ahead would hold a listener the spare has no way to receive.
func (s *Sandbox) warmable() bool {
	return (s.mode == Bwrap || s.pidns && !s.subreaper) && s.netinit == ""
}

// startWarm starts a command's sandbox for a spare, on the spare's
// confined thread (the parent-death signal, the v1 control groups and,
// outside bubblewrap, the thread's mounts, Landlock domain and seccomp
// filter are the thread's). It returns nil when it cannot: the spare is
// then a confined thread only, and the call starts its command itself.
func (s *Sandbox) startWarm(sp *spare, tmpDir string) *warm {
	w := &warm{}
	var argv []string
	if s.mode == Bwrap {
		var args []string
		w.path, args, _ = s.Command(tmpDir, []string{warmShell})
		w.args = args[:len(args)-1]
		argv = append([]string{w.path}, args...)
	} else {
		// The shell that stays first in the PID namespace is the one
		// that waits: its own command line (Command's with no program)
		// would have it run the program as its child.
		w.path, w.args, _ = s.Command(tmpDir, nil)
		argv = s.limited([]string{warmShell})
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{}
	cmd.Dir = "/"
	s.prepareAttr(cmd)
	if sp.group != nil {
		sp.group.Prepare(cmd.SysProcAttr)
	}
	var parent, child []*os.File
	defer func() {
		for _, f := range child {
			f.Close()
		}
	}()
	fail := func() *warm {
		for _, f := range parent {
			f.Close()
		}
		return nil
	}
	// stdin, where the call writes: a socket, not a pipe. A pipe can be
	// opened again through /proc/<pid>/fd/0 by any process allowed to
	// look at the shell's (outside bubblewrap and Landlock, a command of
	// the same account running meanwhile), which could then write lines
	// of its own ahead of the call's; a socket cannot be opened that way.
	callEnd, shellEnd, err := scriptSocket()
	if err != nil {
		return fail()
	}
	parent, child = append(parent, callEnd), append(child, shellEnd)
	for range 2 {
		r, wr, err := os.Pipe()
		if err != nil {
			return fail()
		}
		parent, child = append(parent, r), append(child, wr) // stdout, stderr: the call reads
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = child[0], child[1], child[2]
	if s.mode == Bwrap && s.seccomp != nil {
		r, err := s.seccompPipe()
		if err != nil {
			return fail()
		}
		child = append(child, r)
		cmd.ExtraFiles = []*os.File{r} // fd 3, named by bwrapArgs
	}
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil && !errors.Is(err, unix.ENOSYS) {
		return fail()
	}
	if err := cmd.Start(); err != nil {
		return fail()
	}
	s.leaders.Store(cmd.Process.Pid, true)
	w.cmd, w.script, w.stdout, w.stderr = cmd, parent[0], parent[1], parent[2]
	return w
}

// scriptSocket returns a connected pair of stream sockets: the call's end
// (non-blocking, so that a write can time out) and the shell's.
func scriptSocket() (call, shell *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	// The shell only reads, the call only writes.
	_ = unix.Shutdown(fds[0], unix.SHUT_RD)
	_ = unix.Shutdown(fds[1], unix.SHUT_WR)
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, nil, err
	}
	return os.NewFile(uintptr(fds[0]), "warm-script"), os.NewFile(uintptr(fds[1]), "warm-stdin"), nil
}

// end kills an unused warm sandbox and reaps it.
func (w *warm) end(s *Sandbox) {
	w.script.Close()
	_ = procgroup.Kill(w.cmd.Process.Pid)
	_ = w.cmd.Wait()
	s.leaders.Delete(w.cmd.Process.Pid)
	w.stdout.Close()
	w.stderr.Close()
}

// warmFits reports whether cmd, about to be started, can run in a warm
// sandbox: its standard input is empty and its output goes to writers
// (which get pipes either way), it sets none of the process attributes
// Start sets, and every variable of its environment can be set by a
// shell. Whether its arguments are those the warm sandbox was started
// with, startInWarm checks.
func (s *Sandbox) warmFits(cmd *exec.Cmd) bool {
	if !s.warmable() || cmd.Stdin != nil || cmd.SysProcAttr != nil || len(cmd.ExtraFiles) > 0 || cmd.Dir == "" {
		return false
	}
	if _, ok := cmd.Stdout.(*os.File); ok {
		return false
	}
	if _, ok := cmd.Stderr.(*os.File); ok {
		return false
	}
	for _, kv := range cmd.Env {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || !shellName(name) || name == "PWD" || name == "OLDPWD" {
			return false
		}
	}
	return true
}

// warmScript is what the waiting shell reads: export the environment, go
// to the folder, and run the program: under bubblewrap by replacing
// itself with it, elsewhere as its child, ending with its status. Every
// word is quoted: nothing in it is read as shell syntax. A folder that
// cannot be entered is, under bubblewrap, what bubblewrap makes of it
// (HOME, else /, with PWD set to where it went); elsewhere it ends the
// command with status 126 and the shell's message, where a command
// started on the spot would fail to start. A word holding a NUL, which no
// command can be given, leaves the command to be started on the spot,
// which reports it.
func warmScript(argv, env []string, dir string, bwrap bool) (string, bool) {
	if len(argv) == 0 {
		return "", false
	}
	var b strings.Builder
	for _, kv := range env {
		if strings.IndexByte(kv, 0) >= 0 {
			return "", false
		}
		b.WriteString("export " + shellQuote(kv) + "\n")
	}
	if bwrap {
		b.WriteString("cd -- " + shellQuote(dir) + ` 2>/dev/null || cd -- "${HOME:-/}" 2>/dev/null || cd /` + "\n")
	} else {
		b.WriteString("cd -P -- " + shellQuote(dir) + " || exit 126\n")
	}
	b.WriteString("export PWD\nunset OLDPWD\n")
	if bwrap {
		b.WriteString("exec ")
	}
	for i, a := range argv {
		if strings.IndexByte(a, 0) >= 0 {
			return "", false
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(shellQuote(a))
	}
	b.WriteString(" </dev/null\n")
	if !bwrap {
		// Quoted: the environment just exported may have set IFS.
		b.WriteString("exit \"$?\"\n")
	}
	return b.String(), true
}

// shellName reports whether name can be a shell variable's name.
func shellName(name string) bool {
	if name == "" || name[0] >= '0' && name[0] <= '9' {
		return false
	}
	for _, c := range []byte(name) {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// shellQuote quotes s as one word for a POSIX shell: in single quotes,
// inside which nothing is special, each single quote of s closing the
// quotes, escaped, and opening them again.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// startInWarm gives the call's command to the warm sandbox of sp: it
// writes the script and connects the output pipes to cmd's writers. The
// spare's thread then waits until the command has ended, as a launching
// thread does. An error means the warm sandbox is not the one the call
// asks for, is gone or could not take the script; it has been ended, and
// the caller starts the command on the spot.
func (s *Sandbox) startInWarm(ctx context.Context, c *Child, sp *spare, cmd *exec.Cmd) error {
	w := sp.warm
	sp.warm = nil
	// Command's arguments are the sandbox's, then the program's. The
	// sandbox's end the same way for every call: bubblewrap's with its
	// "--", which none of its other arguments can be (they are options,
	// numbers and absolute paths), the shells' with their scripts, fixed
	// for the sandbox. A command line that begins with the warm one's
	// arguments therefore asks for that very sandbox; one built with
	// other arguments (a private path made or removed since) does not.
	n := len(w.args)
	if cmd.Path != w.path || len(cmd.Args) < n+2 || !slices.Equal(w.args, cmd.Args[1:n+1]) {
		w.end(s)
		return errors.New("the sandbox started ahead has other arguments")
	}
	script, ok := warmScript(cmd.Args[n+1:], cmd.Env, cmd.Dir, s.mode == Bwrap)
	if !ok {
		w.end(s)
		return errors.New("the command cannot be written to a shell")
	}
	// The pipe holds 64 KiB; a longer script waits for the shell to read
	// it, which a sandbox gone wrong might never do.
	_ = w.script.SetWriteDeadline(time.Now().Add(warmWriteTimeout))
	_, err := io.WriteString(w.script, script)
	if cerr := w.script.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		w.end(s)
		return err
	}
	c.cmd = w.cmd
	c.group = sp.group
	c.egress, sp.egress = sp.egress, nil // the warm sandbox is in its namespace
	c.call = cmd
	c.outputs = []*os.File{w.stdout, w.stderr}
	c.watchDone = make(chan struct{})
	cmd.Process = w.cmd.Process
	outs := []io.Writer{cmd.Stdout, cmd.Stderr}
	if cmd.Stdout != nil && sameWriter(cmd.Stdout, cmd.Stderr) {
		// One writer for both, which exec.Cmd would give one pipe: here
		// the two pipes are copied one write at a time (in the order the
		// reads end, which may differ a little from the command's).
		shared := &lockedWriter{w: cmd.Stdout}
		outs = []io.Writer{shared, shared}
	}
	for i, dst := range outs {
		if dst == nil {
			dst = io.Discard
		}
		src := c.outputs[i]
		c.copies.Add(1)
		go func() {
			defer c.copies.Done()
			_, _ = io.Copy(dst, src)
		}()
	}
	// The caller's context ends the command, as exec.CommandContext
	// would have.
	go func() {
		select {
		case <-ctx.Done():
			c.kill()
		case <-c.watchDone:
		}
	}()
	sp.run <- func() { <-c.release }
	return nil
}

// finishWarm, after the command has ended, waits for its output to be
// copied (at most the call's WaitDelay, as exec.Cmd does) and gives the
// caller's command the process state.
func (c *Child) finishWarm() {
	close(c.watchDone)
	copied := make(chan struct{})
	go func() {
		c.copies.Wait()
		close(copied)
	}()
	var timeout <-chan time.Time
	if c.call.WaitDelay > 0 {
		t := time.NewTimer(c.call.WaitDelay)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-copied:
	case <-timeout:
	}
	for _, f := range c.outputs {
		f.Close()
	}
	<-copied
	c.call.ProcessState = c.cmd.ProcessState
}

// sameWriter reports whether a and b are the same writer, as exec.Cmd
// judges it: a writer of a type that cannot be compared (a func) is
// never the same.
func sameWriter(a, b io.Writer) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}

// lockedWriter passes writes to w one at a time.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// warmState is what a Child started in a warm sandbox keeps besides
// the fields every Child has.
type warmState struct {
	call      *exec.Cmd  // the caller's command, never started itself
	outputs   []*os.File // read ends of the command's stdout and stderr
	copies    sync.WaitGroup
	watchDone chan struct{} // closed once the command has ended
}

// bwrapMarks records the paths bubblewrap's arguments depend on, for a
// spare whose bubblewrap is started ahead: the folders bound into the
// sandbox (a folder replaced since would leave the old one bound), and
// the paths hidden by mounts, each folder of hiddenByDefault as its link
// (bwrapArgs looks at it without following it) and the private paths
// followed, as bubblewrap follows them (one made since would not be
// covered).
func (s *Sandbox) bwrapMarks() []fileMark {
	var out []fileMark
	for _, p := range append(append([]string{s.ws}, s.writable...), s.private...) {
		out = append(out, markPath(p, true))
	}
	for _, d := range hiddenByDefault {
		out = append(out, markPath(d, false))
	}
	if s.network {
		out = append(out, markPath("/run/systemd/resolve", true))
	}
	return out
}
