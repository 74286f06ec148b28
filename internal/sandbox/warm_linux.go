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

// warm is bubblewrap started ahead by a spare's thread: its namespaces,
// mounts and seccomp filter are built while no call waits, which is most
// of what a command costs in this mode (milliseconds: each mount, the
// PID namespace, bubblewrap's own start). Inside it a shell waits on its
// standard input for a few lines that the call writes: the command's
// environment, its folder, and an exec of its program with standard input
// from /dev/null, as a command started on the spot gets them. The
// program then runs as the same process, the one bubblewrap started, so
// nothing of the shell is left.
//
// bubblewrap is started with an empty environment and no folder of the
// call's: what a call decides is in the lines it writes, never in how the
// sandbox was built, and the sandbox is the one Command describes for
// the call (StartContext checks that the call's command line has the
// very arguments this bubblewrap was started with).
type warm struct {
	args   []string // bubblewrap's arguments before the program (prefix of Command's)
	cmd    *exec.Cmd
	script *os.File // the shell's standard input, write end
	stdout *os.File // read ends of the output pipes
	stderr *os.File
}

// warmShell is the shell that reads the call's lines inside the sandbox.
const warmShell = "/bin/sh"

// warmWriteTimeout bounds the wait for the warm shell to take the call's
// lines; past it the command is started on the spot.
const warmWriteTimeout = 10 * time.Second

// startWarm starts bubblewrap for a spare, on the spare's confined
// thread (the parent-death signal and the v1 control groups are the
// thread's). It returns nil when it cannot: the spare is then a confined
// thread only, and the call starts bubblewrap itself.
func (s *Sandbox) startWarm(sp *spare) *warm {
	path, args, _ := s.Command("", []string{warmShell})
	cmd := exec.Command(path, args...)
	prefix := args[:len(args)-1]
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
	for range 3 {
		r, w, err := os.Pipe()
		if err != nil {
			return fail()
		}
		if len(parent) == 0 {
			parent, child = append(parent, w), append(child, r) // stdin: the call writes
		} else {
			parent, child = append(parent, r), append(child, w) // stdout, stderr: the call reads
		}
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = child[0], child[1], child[2]
	if s.seccomp != nil {
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
	return &warm{args: prefix, cmd: cmd, script: parent[0], stdout: parent[1], stderr: parent[2]}
}

// end kills an unused warm bubblewrap and reaps it.
func (w *warm) end(s *Sandbox) {
	w.script.Close()
	_ = procgroup.Kill(w.cmd.Process.Pid)
	_ = w.cmd.Wait()
	s.leaders.Delete(w.cmd.Process.Pid)
	w.stdout.Close()
	w.stderr.Close()
}

// warmFits reports whether cmd, about to be started, can run in a warm
// bubblewrap, and returns the lines that run it there and the bubblewrap
// arguments it asks for (up to and with bubblewrap's "--", which no
// argument before it can be: paths are absolute). It can when its
// standard input is empty and its output goes to writers (which get
// pipes either way), it sets none of the process attributes Start sets,
// and every variable of its environment can be set by a shell. Whether
// the arguments are those the warm bubblewrap was started with,
// startInWarm checks.
func (s *Sandbox) warmFits(cmd *exec.Cmd) (script string, prefix []string, ok bool) {
	if s.mode != Bwrap || cmd.Stdin != nil || cmd.SysProcAttr != nil || len(cmd.ExtraFiles) > 0 || cmd.Dir == "" {
		return "", nil, false
	}
	if _, ok := cmd.Stdout.(*os.File); ok {
		return "", nil, false
	}
	if _, ok := cmd.Stderr.(*os.File); ok {
		return "", nil, false
	}
	args := cmd.Args[1:]
	end := slices.Index(args, "--")
	if end < 0 {
		return "", nil, false
	}
	script, ok = warmScript(args[end+1:], cmd.Env, cmd.Dir)
	return script, args[:end+1], ok
}

// warmScript is what the waiting shell reads: export the environment,
// go to the folder as bubblewrap does (else HOME, else /, with PWD set to
// where it went), and replace itself by the program. Every word is
// quoted: nothing in it is read as shell syntax.
func warmScript(argv, env []string, dir string) (string, bool) {
	if len(argv) == 0 {
		return "", false
	}
	var b strings.Builder
	for _, kv := range env {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || !shellName(name) || name == "PWD" || name == "OLDPWD" {
			return "", false
		}
		b.WriteString("export " + shellQuote(kv) + "\n")
	}
	b.WriteString("cd -- " + shellQuote(dir) + ` 2>/dev/null || cd -- "${HOME:-/}" 2>/dev/null || cd /` + "\n")
	b.WriteString("export PWD\nunset OLDPWD\nexec")
	for _, a := range argv {
		if strings.IndexByte(a, 0) >= 0 {
			return "", false
		}
		b.WriteString(" " + shellQuote(a))
	}
	b.WriteString(" </dev/null\n")
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

// startInWarm gives the call's command to the warm bubblewrap of sp: it
// writes the script and connects the output pipes to cmd's writers. The
// spare's thread then waits until the command has ended, as a launching
// thread does. An error means the warm bubblewrap is gone or could not
// take the script; it has been ended, and the caller starts the command
// on the spot.
func (s *Sandbox) startInWarm(ctx context.Context, c *Child, sp *spare, cmd *exec.Cmd, script string, prefix []string) error {
	w := sp.warm
	sp.warm = nil
	if cmd.Path != w.cmd.Path || !slices.Equal(w.args, prefix) {
		// Built with other arguments (a private path made or removed
		// since): not the sandbox this command asks for.
		w.end(s)
		return errors.New("the bubblewrap started ahead has other arguments")
	}
	// The pipe holds 64 KiB; a longer script waits for the shell to read
	// it, which a bubblewrap gone wrong might never do.
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

// warmState is what a Child started in a warm bubblewrap keeps besides
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
