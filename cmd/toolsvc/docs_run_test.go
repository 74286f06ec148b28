//go:build unix

package main

// TestDocsRun follows README.md and every docs/*.md page as a script: each
// command of their shell blocks runs as written, and what it prints is
// compared with what the page shows. Conventions for a page:
//
//   - Shell blocks are the fenced blocks whose info string is sh, bash,
//     shell or console. Every one is run, unless the line before its fence
//     is <!-- not run: needs ... -->, naming what this machine lacks (a
//     Docker engine, a model server, a live Telegram bot, macOS), or
//     <!-- not run: is the suite ... --> for scripts/test.sh, the suite this
//     test is part of. "Too slow" is not a reason. Other blocks (yaml, go,
//     json...) are not run.
//   - A page is one session, from the top: a copy of the checkout (tracked
//     and untracked files, not ignored ones) as the working directory, with
//     ./toolsvc already built there as the README's quick start leaves it;
//     HOME and TMPDIR in the test's temporary folder; no TOOLSVC_* variable
//     but TOOLSVC_ADDR (below) and what the page's commands set. Each
//     command runs in a fresh bash that starts from the variables (exported
//     or not) and the directory the one before left: export, cd and KEY=...
//     carry over as in a terminal.
//   - The port: the runner picks a free port P, sets TOOLSVC_ADDR to
//     127.0.0.1:P, and rewrites localhost:8080, 127.0.0.1:8080, 0.0.0.0:8080
//     and :8080 to port P in commands and in the outputs shown.
//   - Servers: a command that is ./toolsvc with no arguments (after
//     variable assignments), or any command ending in &, keeps running in
//     the background; for toolsvc the runner waits until /healthz answers.
//     Starting toolsvc stops the toolsvc the page started before on the
//     same port, with SIGINT as Ctrl-C does (a page says "stop it
//     (Ctrl-C)" and starts it again with other settings); a toolsvc given
//     TOOLSVC_ADDR=host:port on its line (replicas) is waited for there.
//     Every server is stopped at the end of the page, by its process group.
//     kill %N (or %N %M...) stops background jobs as the terminal that
//     started them numbers them: the signal given (-INT, -TERM; TERM
//     without one) to their processes, and the page waits for them to end.
//   - Outputs: after a command, comment lines starting "# {" or "# [" show
//     its JSON output (continued on the next comment lines until the
//     brackets close); "# => text", on its own line or at the end of the
//     command's line, shows a line of text; a fenced block (json, text,
//     console...) after the line <!-- output --> shows the output of the
//     last command before it; in a console block, the lines after a
//     "$ command" are its output. What a command prints on stdout and
//     stderr is compared with it. JSON is compared on the fields shown: a
//     bare ... stands for those left out, "..." for any value, and ids,
//     times and durations (id, *_id, *_ms, *_at, time) need only be there.
//     Text is compared line by line: ... in a line is any text, a line ...
//     any lines. Other comments are prose.
//   - A command that exits non-zero fails the page, unless a comment line
//     "# exit status N" after it says so.
//   - Hidden set-up, a step a reader would have taken that the page does
//     not show, goes in an HTML comment <!-- run: setup, newline, the
//     commands, newline, -->. Prefer writing the step into the page.
//
// One page: go test -race -run 'TestDocsRun/README.md' ./cmd/toolsvc/
// (a docs page: TestDocsRun/docs/tools.md).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestDocsRun runs README.md and each docs page as a script, one subtest
// per page (see the conventions above).
func TestDocsRun(t *testing.T) {
	pages, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	rels := []string{"README.md"}
	for _, p := range pages {
		rels = append(rels, "docs/"+filepath.Base(p))
	}
	for _, rel := range rels {
		t.Run(rel, func(t *testing.T) {
			t.Parallel()
			blocks, err := parsePage(readDoc(t, rel), bashComplete)
			if err != nil {
				t.Fatalf("%s: %v", rel, err)
			}
			s := newDocSession(t)
			for _, b := range blocks {
				if b.skip != "" {
					t.Logf("%s:%d: not run: %s", rel, b.line, b.skip)
					continue
				}
				for _, c := range b.cmds {
					s.run(t, rel, c)
				}
			}
		})
	}
}

// docSession is the terminal a page's commands run in.
type docSession struct {
	dir, root, state string
	port             int
	env              []string
	servers          []*docServer
	jobs             int // the last job number given, as bash numbers them
	n                int // commands run, to name their files
}

// docServer is a command left running in the background.
type docServer struct {
	cmd     *exec.Cmd
	done    chan struct{}
	log     string
	toolsvc bool
	port    int // toolsvc's
	job     int // its number for kill %N: bash's, for a command ending in &
}

// stateSave is the end of every command's script: it writes the variables
// and the directory for the next command, leaving out bash's own.
const stateSave = `__docrun_save() {
  { declare -p $(compgen -v | grep -Ev '^(BASH.*|EUID|PPID|UID|SHELLOPTS|PIPESTATUS|FUNCNAME|GROUPS|RANDOM|SRANDOM|SECONDS|LINENO|EPOCHREALTIME|EPOCHSECONDS|HISTCMD|DIRSTACK|COMP_.*|_|PWD|OLDPWD|SHLVL|OPTIND|OPTERR|IFS|PS[0-9]|HOSTNAME|HOSTTYPE|MACHTYPE|OSTYPE|__docrun.*)$') 2>/dev/null
    printf 'cd %q\n' "$PWD"; } > "$__docrun_state.new" && mv "$__docrun_state.new" "$__docrun_state"
}
`

func newDocSession(t *testing.T) *docSession {
	bin, err := docsBinary()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s := &docSession{dir: dir, root: filepath.Join(dir, "checkout"), state: filepath.Join(dir, "state.sh"), port: freePort(t)}
	for _, d := range []string{s.root, filepath.Join(dir, "home"), filepath.Join(dir, "tmp")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := copyCheckout(filepath.Join("..", ".."), s.root); err != nil {
		t.Fatal(err)
	}
	if err := copyFile(bin, filepath.Join(s.root, "toolsvc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.state, []byte(fmt.Sprintf("cd %q\n", s.root)), 0o644); err != nil {
		t.Fatal(err)
	}
	s.env, err = docEnv(dir, s.port)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.stopServers(t, 0) })
	return s
}

// run runs one command of page as the conventions say, and fails the page
// at the first command that does not do what the page shows.
func (s *docSession) run(t *testing.T, page string, c docCmd) {
	t.Helper()
	text := withPort(c.text, s.port)
	where := fmt.Sprintf("%s:%d", page, c.line)
	if sig, jobs, ok := killCommand(text); ok {
		s.killJobs(t, where, sig, jobs)
		t.Logf("%s: $ %s", where, text)
		return
	}
	if fg, bg, toolsvc := serverCommand(text); fg || bg {
		port := 0
		if toolsvc {
			port = serverPort(text, s.port)
			s.stopServers(t, port)
		}
		s.startServer(t, where, text, bg, port)
		t.Logf("%s: $ %s (left running)", where, text)
		return
	}
	start := time.Now()
	out, code, err := s.command(text)
	t.Logf("%s: $ %s (%s)\n%s", where, text, time.Since(start).Round(time.Millisecond), firstBytes(out, 300))
	if err != nil {
		t.Fatalf("%s: %v\n$ %s", where, err, text)
	}
	if code != c.wantExit {
		t.Fatalf("%s: exit status %d, the page says %d\n$ %s\n%s", where, code, c.wantExit, text, out)
	}
	if d := checkOutput(c, out, s.port); d != "" {
		t.Fatalf("%s: %s\n$ %s\n%s", where, d, text, out)
	}
}

// script writes a command's script: the state the one before left, the
// command, and what saves the state after it (at its exit for a command
// run to its end; for a server, once it is started in the background).
func (s *docSession) script(text string, server, bg bool) (string, error) {
	s.n++
	path := filepath.Join(s.dir, fmt.Sprintf("cmd-%d.sh", s.n))
	var b strings.Builder
	fmt.Fprintf(&b, "__docrun_state=%q\n%s. \"$__docrun_state\" 2>/dev/null\n", s.state, stateSave)
	switch {
	case !server:
		b.WriteString("trap __docrun_save EXIT\n" + text + "\n")
	case bg:
		// bash stays the server's parent, to be stopped with it; SIGINT
		// is for the server, which then ends the wait. path.saved tells
		// startServer the state is saved: the next command's is not
		// overwritten.
		fmt.Fprintf(&b, "trap '' INT\n%s\n__docrun_save\n: > %q\nwait\n", text, path+".saved")
	default:
		b.WriteString("trap '' INT\n" + text + "\n")
	}
	return path, os.WriteFile(path, []byte(b.String()), 0o644)
}

// bash returns the process that runs a script, in a process group of its
// own, its output (stdout and stderr, as a terminal shows them) to out.
func (s *docSession) bash(ctx context.Context, script string, out *os.File) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "bash", "--noprofile", "--norc", script)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = s.root, s.env, out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// command runs a command to its end and returns what it printed and its
// exit status.
func (s *docSession) command(text string) (string, int, error) {
	script, err := s.script(text, false, false)
	if err != nil {
		return "", 0, err
	}
	outPath := strings.TrimSuffix(script, ".sh") + ".out"
	out, err := os.Create(outPath)
	if err != nil {
		return "", 0, err
	}
	defer out.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := s.bash(ctx, script, out)
	err = cmd.Run()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // what it left behind
	code := 0
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit) && ctx.Err() == nil:
		code = exit.ExitCode()
	case err != nil:
		return "", 0, err
	}
	b, err := os.ReadFile(outPath)
	return string(b), code, err
}

// startServer starts a command that keeps running, and for toolsvc (on
// port, else 0) waits until it answers /healthz.
func (s *docSession) startServer(t *testing.T, where, text string, bg bool, port int) {
	t.Helper()
	script, err := s.script(text, true, bg)
	if err != nil {
		t.Fatal(err)
	}
	log := strings.TrimSuffix(script, ".sh") + ".log"
	out, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	srv := &docServer{cmd: s.bash(context.Background(), script, out), done: make(chan struct{}), log: log, toolsvc: port != 0, port: port}
	if bg {
		s.jobs = 0 // bash numbers a job one past the highest still running
		for _, o := range s.servers {
			select {
			case <-o.done:
			default:
				s.jobs = max(s.jobs, o.job)
			}
		}
		s.jobs++
		srv.job = s.jobs
	}
	if err := srv.cmd.Start(); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	go func() { _ = srv.cmd.Wait(); close(srv.done) }()
	s.servers = append(s.servers, srv)
	if bg {
		waitSaved(script+".saved", srv.done)
	}
	if port == 0 {
		return
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/healthz", port)
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		select {
		case <-srv.done:
			t.Fatalf("%s: the server ended before it answered /healthz\n$ %s\n%s", where, text, readTail(log))
		case <-time.After(100 * time.Millisecond):
		}
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
	}
	t.Fatalf("%s: no answer from %s within a minute\n$ %s\n%s", where, url, text, readTail(log))
}

// waitSaved waits until a background command's script has saved the
// state (the file saved exists) or has ended.
func waitSaved(saved string, done <-chan struct{}) {
	for {
		if _, err := os.Stat(saved); err == nil {
			return
		}
		select {
		case <-done:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// stopServers stops the page's servers as Ctrl-C does (SIGINT to the
// process group), killing a group that has not ended within 15 seconds;
// only the toolsvc on port when port is not 0.
func (s *docSession) stopServers(t *testing.T, port int) {
	kept := s.servers[:0]
	for _, srv := range s.servers {
		if port != 0 && srv.port != port {
			kept = append(kept, srv)
			continue
		}
		pgid := srv.cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGINT)
		if !srv.toolsvc {
			// A command bash runs in the background ignores SIGINT, as a
			// shell without job control leaves it (python3 -m http.server
			// would wait out the 15 seconds); SIGTERM ends it.
			_ = syscall.Kill(-pgid, syscall.SIGTERM)
		}
		select {
		case <-srv.done:
		case <-time.After(15 * time.Second):
			t.Logf("a server did not end within 15s of SIGINT; killed\n%s", readTail(srv.log))
		}
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-srv.done
	}
	s.servers = kept
}

// killJobs stops the background jobs numbered jobs with sig, as a
// terminal's kill %n does: the signal goes to each job's processes but not
// to the bash that waits for them, which then ends.
func (s *docSession) killJobs(t *testing.T, where string, sig syscall.Signal, jobs []int) {
	t.Helper()
	var stop []*docServer
	for _, n := range jobs {
		var srv *docServer
		for _, o := range s.servers {
			select {
			case <-o.done:
			default:
				if o.job == n {
					srv = o
				}
			}
		}
		if srv == nil {
			t.Fatalf("%s: kill %%%d: no such job running", where, n)
		}
		stop = append(stop, srv)
	}
	for _, srv := range stop {
		pgid := srv.cmd.Process.Pid
		signalled := false
		if ents, err := os.ReadDir("/proc"); err == nil {
			for _, e := range ents {
				pid, err := strconv.Atoi(e.Name())
				if err != nil || pid == pgid {
					continue
				}
				if g, err := syscall.Getpgid(pid); err == nil && g == pgid {
					signalled = syscall.Kill(pid, sig) == nil || signalled
				}
			}
		}
		if !signalled { // no /proc: the whole group, bash too
			_ = syscall.Kill(-pgid, sig)
		}
	}
	for _, srv := range stop {
		pgid := srv.cmd.Process.Pid
		select {
		case <-srv.done:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-srv.done
			t.Fatalf("%s: kill %%%d: the job did not end within 15s\n%s", where, srv.job, readTail(srv.log))
		}
		_ = syscall.Kill(-pgid, syscall.SIGKILL) // what it left behind
	}
	kept := s.servers[:0]
	for _, o := range s.servers {
		select {
		case <-o.done:
		default:
			kept = append(kept, o)
		}
	}
	s.servers = kept
}

// serverPort returns the port a toolsvc command listens on: that of a
// TOOLSVC_ADDR=host:port among its assignments, else def.
func serverPort(text string, def int) int {
	for _, w := range shellFields(strings.ReplaceAll(text, "\\\n", " ")) {
		if !isAssignment(w) {
			break
		}
		if v, ok := strings.CutPrefix(w, "TOOLSVC_ADDR="); ok {
			_, p, _ := strings.Cut(strings.Trim(v, `"'`), ":")
			if n, err := strconv.Atoi(p); err == nil {
				return n
			}
		}
	}
	return def
}

// serverCommand tells whether a command keeps running: ./toolsvc alone in
// the foreground (fg), or any command ending in & (bg); and whether it is
// toolsvc without arguments, the server.
func serverCommand(text string) (fg, bg, toolsvc bool) {
	words := shellFields(strings.ReplaceAll(text, "\\\n", " "))
	if len(words) > 0 && words[len(words)-1] == "&" {
		bg, words = true, words[:len(words)-1]
	}
	i := 0
	for i < len(words) && isAssignment(words[i]) {
		i++
	}
	toolsvc = i == len(words)-1 && filepath.Base(words[i]) == "toolsvc"
	return !bg && toolsvc, bg, toolsvc
}

func isAssignment(w string) bool {
	name, _, ok := strings.Cut(w, "=")
	if !ok || name == "" {
		return false
	}
	for i, r := range name {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// shellFields splits a command line into its words as written (quotes
// kept), & and ; as words of their own, up to an unquoted comment.
func shellFields(line string) []string {
	var words []string
	var w strings.Builder
	var quote byte
	depth := 0
	flush := func() {
		if w.Len() > 0 {
			words = append(words, w.String())
			w.Reset()
		}
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '(':
			depth++
		case c == ')':
			depth--
		case depth > 0:
		case c == ' ' || c == '\t' || c == '\n':
			flush()
			continue
		case c == '#' && w.Len() == 0:
			flush()
			return words
		case c == '&' || c == ';':
			flush()
			words = append(words, string(c))
			continue
		}
		w.WriteByte(c)
	}
	flush()
	return words
}

// docsBinary builds toolsvc once for every page, with -trimpath as the
// pages' own go build runs (GOFLAGS in docEnv): the build cache then
// serves the copy of the checkout as it serves the checkout.
var docsBinary = sync.OnceValues(func() (string, error) {
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", err
	}
	out := filepath.Join(binDir, "toolsvc-docs")
	if b, err := exec.Command("go", "build", "-trimpath", "-o", out, ".").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, b)
	}
	return out, nil
})

// docEnv is a page's environment: this process's without TOOLSVC_*, HOME
// and TMPDIR in dir, the Go command's settings as this process has them
// (its caches, its settings file) with -trimpath, and TOOLSVC_ADDR on
// port.
func docEnv(dir string, port int) ([]string, error) {
	goenv, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE", "GOPATH", "GOENV", "GOFLAGS").Output()
	if err != nil {
		return nil, fmt.Errorf("go env: %v", err)
	}
	v := strings.Split(strings.TrimRight(string(goenv), "\n"), "\n")
	if len(v) != 5 {
		return nil, fmt.Errorf("go env printed %q", goenv)
	}
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(name, "TOOLSVC_"), strings.HasPrefix(name, "GO") && name != "GOROOT" && name != "GOTOOLCHAIN",
			name == "HOME", name == "TMPDIR", name == "PWD", name == "OLDPWD":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+filepath.Join(dir, "home"), "TMPDIR="+filepath.Join(dir, "tmp"),
		"GOCACHE="+v[0], "GOMODCACHE="+v[1], "GOPATH="+v[2], "GOENV="+v[3],
		"GOFLAGS="+strings.TrimSpace(v[4]+" -trimpath"),
		fmt.Sprintf("TOOLSVC_ADDR=127.0.0.1:%d", port)), nil
}

// copyCheckout copies the files git knows in repo, tracked or not but not
// ignored, to dst.
func copyCheckout(repo, dst string) error {
	out, err := exec.Command("git", "-C", repo, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		return fmt.Errorf("git ls-files: %v", err)
	}
	for _, rel := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		src := filepath.Join(repo, filepath.FromSlash(rel))
		fi, err := os.Lstat(src)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted, not yet committed
		} else if err != nil {
			return err
		}
		to := filepath.Join(dst, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(src)
			if err == nil {
				err = os.Symlink(target, to)
			}
			if err != nil {
				return err
			}
			continue
		}
		if err := copyFile(src, to, fi.Mode().Perm()); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string, perm os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// firstBytes returns the start of a command's output, for the log.
func firstBytes(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// readTail returns the end of a server's log, for a failure message.
func readTail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}
