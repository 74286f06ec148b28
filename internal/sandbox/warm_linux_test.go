package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// warmModes are the modes whose spares can start a command's sandbox
// ahead: bubblewrap, and as root (a PID namespace per command) the others.
var warmModes = []Mode{None, Landlock, Bwrap}

// forWarmModes runs f for each of modes as a subtest.
func forWarmModes(t *testing.T, modes []Mode, f func(t *testing.T, mode Mode)) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) { f(t, mode) })
	}
}

// newWarm returns a sandbox in mode over a fresh workspace whose spare
// has the command's sandbox started, or skips where there is none.
func newWarm(t *testing.T, mode Mode, opts Options) (*Sandbox, attackFixture) {
	t.Helper()
	af := newAttackFixture(t)
	opts.Workspace = af.ws
	s := newForTest(t, mode, opts)
	t.Cleanup(s.Close)
	if _, ok := s.FreshTemp(); !ok {
		t.Skipf("no temporary folder made by the sandbox here (uid %d; bubblewrap without --size): no spares", os.Geteuid())
	}
	if !s.warmable() {
		t.Skipf("commands are not started ahead in this sandbox: %s", s.Describe())
	}
	runIn(t, s, af.ws, "true") // the first command leaves a spare behind
	awaitWarm(t, s)
	return s, af
}

// awaitWarm waits until the sandbox's spare has the command's sandbox
// started.
func awaitWarm(t *testing.T, s *Sandbox) {
	t.Helper()
	if !waitSpare(s) {
		t.Fatal("no spare was made")
	}
	s.spareMu.Lock()
	defer s.spareMu.Unlock()
	if s.spare.warm == nil {
		t.Fatal("the spare has no sandbox started ahead")
	}
}

// startProbe starts argv in s as exec does, warm when warm is true (the
// spare is then taken), else on the spot, and returns the child, its
// command and its outputs.
func startProbe(t *testing.T, s *Sandbox, dir string, env []string, argv []string, warm bool) (*Child, *exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	tmp := tempFor(t, s)
	path, args, childTmp := s.Command(tmp, argv)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp/home", "TMPDIR=" + childTmp}, env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	var c *Child
	var err error
	if warm {
		c, err = s.StartContext(ctx, cmd, tmp)
	} else {
		c, err = s.Start(cmd, tmp)
	}
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	if got := c.call != nil; got != warm {
		t.Fatalf("started warm: %v, want %v", got, warm)
	}
	return c, cmd, &out, &errOut
}

// startIn starts argv in s through StartContext with exactly env, in
// dir, with stdin when not empty, and returns the child and its output;
// whether it ran warm is for the caller to check (child.call).
func startIn(t *testing.T, ctx context.Context, s *Sandbox, tmp, dir string, env, argv []string, stdin string) (*Child, *bytes.Buffer) {
	t.Helper()
	path, args, _ := s.Command(tmp, argv)
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir, cmd.Env = dir, env
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	child, err := s.StartContext(ctx, cmd, tmp)
	if err != nil {
		t.Fatal(err)
	}
	return child, &out
}

// TestWarmMatchesCold: a command run in a bubblewrap started ahead sees
// what one started on the spot sees: the same environment, folder,
// identity, capabilities, seccomp and no_new_privs, open descriptors,
// standard input, exit status and outputs.
func TestWarmMatchesCold(t *testing.T) {
	forWarmModes(t, warmModes, func(t *testing.T, mode Mode) {
		s, af := newWarm(t, mode, Options{})
		sub := filepath.Join(af.ws, "sub dir")
		if err := os.Mkdir(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		probe := `env | sort; pwd; id; echo "pid $$ ppid $PPID";
grep -E '^(Cap|NoNewPrivs|Seccomp)' /proc/self/status; ls /proc/self/fd;
[ -t 0 ] && echo tty; wc -c; ls -ld /dev/stdin | sed 's/.*-> //'; echo err >&2; exit 7`
		results := map[bool]string{}
		for _, warm := range []bool{false, true} {
			if warm {
				awaitWarm(t, s)
			}
			c, cmd, out, errOut := startProbe(t, s, sub, []string{"EXTRA=it's $x"}, []string{"/bin/sh", "-c", probe}, warm)
			err, contained := c.Wait()
			if !contained || cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 7 {
				t.Fatalf("warm %v: err %v, contained %v, state %v", warm, err, contained, cmd.ProcessState)
			}
			results[warm] = out.String() + "STDERR:" + errOut.String()
		}
		if results[true] != results[false] {
			t.Errorf("warm and cold commands differ:\ncold:\n%s\nwarm:\n%s", results[false], results[true])
		}
		for _, want := range []string{"EXTRA=it's $x\n", "PWD=" + sub + "\n", "\n0\n", "STDERR:err\n"} {
			if !strings.Contains(results[true], want) {
				t.Errorf("warm output lacks %q:\n%s", want, results[true])
			}
		}
	})
}

// TestWarmArgumentsAreWords: whatever a command line holds (quotes,
// newlines, substitutions, options), it reaches the program as the same
// words, none of it read by the waiting shell.
func TestWarmArgumentsAreWords(t *testing.T) {
	forWarmModes(t, warmModes, func(t *testing.T, mode Mode) {
		s, af := newWarm(t, mode, Options{})
		words := []string{
			"plain", "", " spaced  out ", "it's", `"double"`, `'\''`, "$(touch pwned1)", "`touch pwned2`",
			"${HOME}", "a\nb\n", "\\", "-n", "--", "; touch pwned3", "' ; touch pwned4 ; '", "ünïcödé ✓", "\t\r",
		}
		argv := append([]string{"/bin/sh", "-c", `for w; do printf '[%s]' "$w"; done`, "sh"}, words...)
		c, _, out, errOut := startProbe(t, s, af.ws, nil, argv, true)
		c.Wait()
		var want strings.Builder
		for _, w := range words {
			fmt.Fprintf(&want, "[%s]", w)
		}
		if out.String() != want.String() {
			t.Errorf("words arrived as\n%q\nwant\n%q\nstderr: %s", out.String(), want.String(), errOut.String())
		}
		for i := 1; i <= 4; i++ {
			if _, err := os.Stat(filepath.Join(af.ws, fmt.Sprintf("pwned%d", i))); err == nil {
				t.Errorf("pwned%d was made: a word was run as shell syntax", i)
			}
		}
	})
}

// TestWarmCanceled: the caller's context ends a command run warm, and
// everything it started.
func TestWarmCanceled(t *testing.T) {
	forWarmModes(t, warmModes, func(t *testing.T, mode Mode) {
		s, af := newWarm(t, mode, Options{})
		tmp := tempFor(t, s)
		path, args, _ := s.Command(tmp, []string{"/bin/sh", "-c", "sleep 600 & sleep 600"})
		ctx, cancel := context.WithCancel(context.Background())
		cmd := exec.CommandContext(ctx, path, args...)
		cmd.Dir = af.ws
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		cmd.Stdout = &bytes.Buffer{}
		c, err := s.StartContext(ctx, cmd, tmp)
		if err != nil || c.call == nil {
			t.Fatalf("start: %v (warm %v)", err, c != nil && c.call != nil)
		}
		time.AfterFunc(200*time.Millisecond, cancel)
		done := make(chan bool)
		go func() {
			_, contained := c.Wait()
			done <- contained
		}()
		select {
		case contained := <-done:
			if !contained {
				t.Error("the canceled command was not known to be gone")
			}
		case <-time.After(time.Minute):
			t.Fatal("the canceled command was not ended")
		}
		if cmd.ProcessState == nil || cmd.ProcessState.Success() {
			t.Errorf("process state of the canceled command: %v", cmd.ProcessState)
		}
	})
}

// TestWarmNotUsedWhenPathsChanged: a workspace replaced, or a private path
// made, after a sandbox was started ahead leaves that sandbox unused: its
// mounts (and Landlock rules) were made for what was there before. Without
// a file-system sandbox there is nothing of the kind to go stale.
func TestWarmNotUsedWhenPathsChanged(t *testing.T) {
	forWarmModes(t, []Mode{Landlock, Bwrap}, func(t *testing.T, mode Mode) {
		for _, c := range []struct {
			name   string
			change func(t *testing.T, af attackFixture)
		}{
			{"workspace replaced", func(t *testing.T, af attackFixture) {
				if err := os.Rename(af.ws, af.ws+".old"); err != nil {
					t.Fatal(err)
				}
				if err := os.Mkdir(af.ws, 0o777); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(af.ws, "new.txt"), []byte("new\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}},
			{"private folder made again", func(t *testing.T, af attackFixture) {
				if err := os.MkdirAll(filepath.Join(af.ws, "later"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(af.ws, "later", "secret"), []byte("SECRET\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}},
		} {
			t.Run(c.name, func(t *testing.T) {
				af := newAttackFixture(t)
				// A private path must exist when the sandbox is made; it is
				// gone when the spare's sandbox is started, then made again.
				later := filepath.Join(af.ws, "later")
				if err := os.Mkdir(later, 0o755); err != nil {
					t.Fatal(err)
				}
				s := newForTest(t, mode, Options{Workspace: af.ws, Private: []string{later}})
				t.Cleanup(s.Close)
				if _, ok := s.FreshTemp(); !ok || !s.warmable() {
					t.Skip("no sandbox started ahead here")
				}
				if err := os.Remove(later); err != nil {
					t.Fatal(err)
				}
				runIn(t, s, af.ws, "true")
				awaitWarm(t, s)
				c.change(t, af)
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				child, out := startIn(t, ctx, s, tempFor(t, s), af.ws, []string{"PATH=/usr/bin:/bin"},
					[]string{"/bin/sh", "-c", "cat new.txt later/secret 2>&1; true"}, "")
				if child.call != nil {
					t.Error("the command ran in the sandbox started before the change")
				}
				child.Wait()
				if strings.Contains(out.String(), "SECRET") {
					t.Errorf("a private path made after the spare reached the command:\n%s", out.String())
				}
				if c.name == "workspace replaced" && !strings.Contains(out.String(), "new\n") {
					t.Errorf("the command did not see the new workspace:\n%s", out.String())
				}
			})
		}
	})
}

// TestWarmReusesGroups: commands run warm give their control group back,
// as others do: many calls leave a few groups, not one each.
func TestWarmReusesGroups(t *testing.T) {
	forWarmModes(t, warmModes, func(t *testing.T, mode Mode) {
		s, af := newWarm(t, mode, Options{})
		if s.cg == nil {
			t.Skip("no control groups here")
		}
		for range 8 {
			awaitWarm(t, s)
			c, _, _, _ := startProbe(t, s, af.ws, nil, []string{"/bin/true"}, true)
			if c.group == nil {
				t.Fatal("a command run warm has no control group")
			}
			c.Wait()
		}
		if n := callGroups(t); n > 3 {
			t.Errorf("%d control groups were made for 9 commands: run warm, they are not given back", n)
		}
	})
}

// callGroups counts the call groups this process made in the first
// hierarchy where it finds its folder.
func callGroups(t *testing.T) int {
	prefix := fmt.Sprintf("toolsvc-%d-", os.Getpid())
	most := 0
	_ = filepath.WalkDir("/sys/fs/cgroup", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if strings.Count(p, "/") > 7 {
			return fs.SkipDir
		}
		if strings.HasPrefix(d.Name(), prefix) {
			calls, _ := filepath.Glob(filepath.Join(p, "call-*"))
			most = max(most, len(calls))
			return fs.SkipDir
		}
		return nil
	})
	return most
}

// TestWarmFallsBack: a command that cannot run warm (a variable a shell
// cannot set, input of its own) starts on the spot and works. Under
// bubblewrap it leaves the warm spare for the next; elsewhere it takes
// the spare's confined thread, and the shell started ahead goes.
func TestWarmFallsBack(t *testing.T) {
	forWarmModes(t, warmModes, func(t *testing.T, mode Mode) {
		s, af := newWarm(t, mode, Options{})
		s.spareMu.Lock()
		ready := s.spare
		s.spareMu.Unlock()
		tmp := tempFor(t, s)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, c := range []struct {
			name  string
			argv  []string
			env   []string
			stdin string
			want  string
		}{
			// A shell drops such a variable, the program gets it (but
			// for the shell that stays first in the PID namespace, which
			// drops it in any case).
			{"odd variable", []string{"/usr/bin/env"}, []string{"PATH=/usr/bin:/bin", "odd.name=1"}, "", "odd.name=1\n"},
			{"input", []string{"/bin/cat"}, []string{"PATH=/usr/bin:/bin"}, "input\n", "input\n"},
		} {
			child, out := startIn(t, ctx, s, tmp, af.ws, c.env, c.argv, c.stdin)
			if child.call != nil {
				t.Errorf("%s: the command ran warm", c.name)
			}
			child.Wait()
			if (mode == Bwrap || c.stdin != "") && !strings.Contains(out.String(), c.want) {
				t.Errorf("%s: output %q, want %q in it", c.name, out.String(), c.want)
			}
		}
		s.spareMu.Lock()
		defer s.spareMu.Unlock()
		switch {
		case mode == Bwrap && (s.spare != ready || ready.warm == nil):
			t.Error("a command that could not run warm used the warm spare")
		case mode != Bwrap && (s.spare == ready || ready.warm != nil):
			t.Error("a command that could not run warm did not take the spare's thread, or left its shell")
		}
	})
}

// TestWarmFitsEnvironment: a variable a shell cannot set, or one the
// waiting shell would set itself, keeps a command from running warm.
func TestWarmFitsEnvironment(t *testing.T) {
	s := &Sandbox{mode: Bwrap}
	for _, c := range []struct {
		env []string
		ok  bool
	}{
		{[]string{"A=1", "B_2=x y", "_=z", "a1="}, true},
		{nil, true},
		{[]string{"2A=1"}, false},
		{[]string{"A-B=1"}, false},
		{[]string{"odd.name=1"}, false},
		{[]string{"=1"}, false},
		{[]string{"NOEQUALS"}, false},
		{[]string{"PWD=/x"}, false},
		{[]string{"OLDPWD=/x"}, false},
	} {
		cmd := exec.Command("/bin/true")
		cmd.Dir, cmd.Env, cmd.Stdout = "/", c.env, &bytes.Buffer{}
		if got := s.warmFits(cmd); got != c.ok {
			t.Errorf("warmFits with %q: %v, want %v", c.env, got, c.ok)
		}
	}
}

func TestWarmScript(t *testing.T) {
	for _, c := range []struct {
		argv, env []string
		ok        bool
	}{
		{[]string{"/bin/sh", "-c", "echo 'hi'"}, []string{"A=1", "B_2=x y"}, true},
		{[]string{"/bin/sh"}, nil, true},
		{nil, nil, false},
		{[]string{"/bin/sh", "a\x00b"}, nil, false},
		{[]string{"/bin/sh"}, []string{"A=a\x00b"}, false},
	} {
		script, ok := warmScript(c.argv, c.env, "/w", true)
		if ok != c.ok {
			t.Errorf("warmScript(%q, %q): ok %v, want %v\n%s", c.argv, c.env, ok, c.ok, script)
		}
	}
	for _, c := range []struct {
		bwrap          bool
		cd, run, after string
	}{
		{true, "cd -- '/w d' 2>/dev/null || cd -- \"${HOME:-/}\" 2>/dev/null || cd /\n", "exec ", ""},
		{false, "cd -P -- '/w d' || exit 126\n", "", "exit \"$?\"\n"},
	} {
		got, _ := warmScript([]string{"/bin/sh", "-c", "echo 'hi'"}, []string{"A=it's"}, "/w d", c.bwrap)
		want := "export 'A=it'\\''s'\n" + c.cd + "export PWD\nunset OLDPWD\n" + c.run + "'/bin/sh' '-c' 'echo '\\''hi'\\''' </dev/null\n" + c.after
		if got != want {
			t.Errorf("script (bubblewrap %v):\n%s\nwant:\n%s", c.bwrap, got, want)
		}
	}
}

// TestWarmFolderGone: a command whose folder is gone by the time it runs
// warm runs nothing: outside bubblewrap it ends with status 126 and the
// shell's message, as bubblewrap's own choice is to go to HOME.
func TestWarmFolderGone(t *testing.T) {
	forWarmModes(t, []Mode{None, Landlock}, func(t *testing.T, mode Mode) {
		s, af := newWarm(t, mode, Options{})
		gone := filepath.Join(af.ws, "gone")
		c, cmd, out, errOut := startProbe(t, s, gone, nil, []string{"/bin/sh", "-c", "echo ran"}, true)
		c.Wait()
		if code := cmd.ProcessState.ExitCode(); code != 126 {
			t.Errorf("exit status %d, want 126", code)
		}
		if out.Len() != 0 || !strings.Contains(errOut.String(), gone) {
			t.Errorf("stdout %q, stderr %q: want nothing, and a message naming the folder", out, errOut)
		}
	})
}

// TestWarmScriptCannotBeForged tries the attack: while a shell waits
// ahead for the next call's lines, a command of the same account running
// in another sandbox writes lines of its own into that shell's standard
// input through /proc/<pid>/fd/0. They must not run. Without a sandbox
// or a Landlock domain the attacker can see the waiting shell (the
// refusal is the socket's); in a Landlock domain of its own (Landlock
// mode, or None where the kernel scopes signals) it cannot even see it:
// Landlock refuses it access to processes outside its domain.
func TestWarmScriptCannotBeForged(t *testing.T) {
	forWarmModes(t, []Mode{None, Landlock}, func(t *testing.T, mode Mode) {
		s, af := newWarm(t, mode, Options{})
		s.spareMu.Lock()
		pid := s.spare.warm.cmd.Process.Pid
		s.spareMu.Unlock()
		other := newForTest(t, mode, Options{Workspace: af.ws})
		t.Cleanup(other.Close)
		out := runIn(t, other, af.ws, fmt.Sprintf(`p=/proc/%d
echo "comm: $(cat $p/comm 2>&1)"
if echo 'echo FORGED' > $p/fd/0; then echo WROTE; fi`, pid))
		t.Logf("the attacker, %s:\n%s", mode, out)
		if strings.Contains(out, "WROTE") {
			t.Errorf("a command wrote into the waiting shell's input")
		}
		if mode == None && !other.scoped && !strings.Contains(out, "comm: sh") {
			t.Errorf("the attacker could not see the waiting shell, so the test tried nothing:\n%s", out)
		}
		c, _, victim, _ := startProbe(t, s, af.ws, nil, []string{"/bin/sh", "-c", "echo victim"}, true)
		c.Wait()
		if victim.String() != "victim\n" {
			t.Errorf("the call's command printed %q, want only its own line", victim.String())
		}
	})
}
