package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/headtail"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/sandbox"
	"github.com/countbot/toolsvc/internal/toolerr"
	"github.com/countbot/toolsvc/internal/workspace"
)

// execFakeGuard refuses scripts containing one of its words. The real
// guard (internal/shellguard) has its own tests; here only the wiring is
// checked.
type execFakeGuard []string

func (g execFakeGuard) Check(script string) error {
	for _, w := range g {
		if strings.Contains(script, w) {
			return toolerr.Errorf(toolerr.PolicyDenied, "Command blocked by safety guard (%s)", w)
		}
	}
	return nil
}

func newTestExec(t testing.TB, o ExecOptions) (*Exec, *workspace.Workspace) {
	t.Helper()
	ws, err := workspace.Open(filepath.Join(t.TempDir(), "ws"), true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	if o.Guard == nil {
		o.Guard = execFakeGuard{"mkfs"}
	}
	if o.Sandbox == nil {
		sb, err := sandbox.New(sandbox.Options{Mode: sandbox.None, Network: true, Workspace: ws.Dir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(sb.Close)
		o.Sandbox = sb
	}
	e := NewExec(ws, o)
	t.Cleanup(e.Close)
	return e, ws
}

// runExec calls Execute as the registry would, with a registry-style
// deadline.
func runExec(t *testing.T, ctx context.Context, e *Exec, args map[string]any) (string, error) {
	t.Helper()
	raw, _ := json.Marshal(args)
	ctx, cancel := context.WithTimeout(ctx, e.Timeout())
	defer cancel()
	return e.Execute(ctx, raw)
}

func errCode(err error) string {
	var e *toolerr.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

func TestExecResults(t *testing.T) {
	e, ws := newTestExec(t, ExecOptions{MaxOutput: 200})
	os.MkdirAll(filepath.Join(ws.Dir(), "sub"), 0o755)
	os.WriteFile(filepath.Join(ws.Dir(), "f.txt"), []byte("x"), 0o644)
	tests := []struct {
		name    string
		args    map[string]any
		code    string   // expected error code, "" for success
		want    []string // substrings of the result or error
		notWant []string
		exact   string
	}{
		{name: "stdout", args: map[string]any{"command": "echo hello"}, exact: "hello\n"},
		{name: "no output", args: map[string]any{"command": "true"}, exact: "(no output)"},
		{name: "stderr", args: map[string]any{"command": "echo out; echo err >&2"}, exact: "out\n\nSTDERR:\nerr\n"},
		{name: "blank stderr hidden", args: map[string]any{"command": "echo out; echo '  ' >&2"}, exact: "out\n"},
		{name: "failure first and last", args: map[string]any{"command": "echo partial; exit 3"},
			exact: "COMMAND FAILED (exit code 3)\npartial\n\n\nExit code: 3"},
		{name: "signal", args: map[string]any{"command": "kill -9 $$"}, want: []string{"COMMAND FAILED (exit code 137)"}},
		{name: "invalid utf8 repaired", args: map[string]any{"command": `printf 'a\377b'`}, exact: "a\uFFFDb"},
		{name: "cut with note", args: map[string]any{"command": "seq 1 1000"},
			want: []string{"1\n2\n3\n", "1000\n", "bytes of stdout cut here (3893 bytes in all)"}},
		{name: "cut counts characters", args: map[string]any{"command": "for i in $(seq 1 300); do printf '中'; done"},
			want: []string{strings.Repeat("中", 100) + "\n\n... [300 bytes of stdout cut here (900 bytes in all); the first 100 and last 100 characters"}},
		{name: "working dir", args: map[string]any{"command": "pwd", "working_dir": "sub"}, want: []string{"/sub\n"}},
		{name: "home in private tmpdir", args: map[string]any{"command": `test "$HOME" = "$TMPDIR/home" && test -d "$HOME" && test -w "$HOME" && echo ok`}, exact: "ok\n"},
		{name: "private tmpdir", args: map[string]any{"command": `case "$TMPDIR" in */toolsvc-exec-*) echo ok;; esac`}, exact: "ok\n"},
		{name: "empty command", args: map[string]any{"command": "   "}, code: toolerr.InvalidArguments},
		{name: "working dir outside", args: map[string]any{"command": "pwd", "working_dir": "../"}, code: toolerr.PathDenied},
		{name: "working dir absolute outside", args: map[string]any{"command": "pwd", "working_dir": "/etc"}, code: toolerr.PathDenied},
		{name: "working dir home", args: map[string]any{"command": "pwd", "working_dir": "~/x"}, code: toolerr.PathDenied},
		{name: "working dir file", args: map[string]any{"command": "pwd", "working_dir": "f.txt"}, code: toolerr.InvalidArguments},
		{name: "working dir missing", args: map[string]any{"command": "pwd", "working_dir": "nope"}, code: toolerr.NotFound},
		{name: "guard", args: map[string]any{"command": "mkfs /dev/sda"}, code: toolerr.PolicyDenied,
			want: []string{"Command blocked by safety guard (mkfs)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runExec(t, context.Background(), e, tc.args)
			if tc.code != "" {
				if errCode(err) != tc.code {
					t.Fatalf("err = %v (code %q), want code %s; out %q", err, errCode(err), tc.code, out)
				}
				out = err.Error()
			} else if err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			if tc.exact != "" && out != tc.exact {
				t.Errorf("got %q, want %q", out, tc.exact)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("result lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// TestExecHome checks that, by default, what one command leaves in HOME
// is gone in the next, and the call's folder with it; with Home set, it
// lasts.
func TestExecHome(t *testing.T) {
	plant := `echo planted > "$HOME/.gitconfig" && echo "$HOME"`
	check := `if test -e "$HOME/.gitconfig"; then echo present; else echo absent; fi`

	e, _ := newTestExec(t, ExecOptions{})
	first, err := runExec(t, context.Background(), e, map[string]any{"command": plant})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(strings.TrimSpace(first)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the call's HOME %s is still there: %v", first, err)
	}
	if out, err := runExec(t, context.Background(), e, map[string]any{"command": check}); err != nil || out != "absent\n" {
		t.Errorf("a file planted in HOME reached the next call: %q, %v", out, err)
	}
	if !strings.Contains(e.Description(), "$HOME and $TMPDIR are private folders deleted after the call") {
		t.Errorf("the description does not say HOME is per call:\n%s", e.Description())
	}

	home := t.TempDir()
	e, _ = newTestExec(t, ExecOptions{Home: home})
	if _, err := runExec(t, context.Background(), e, map[string]any{"command": plant}); err != nil {
		t.Fatal(err)
	}
	if out, err := runExec(t, context.Background(), e, map[string]any{"command": check}); err != nil || out != "present\n" {
		t.Errorf("a configured HOME did not last between calls: %q, %v", out, err)
	}
	if !strings.Contains(e.Description(), "$HOME is kept between calls") {
		t.Errorf("the description does not say HOME is kept:\n%s", e.Description())
	}
}

func TestExecSymlinkWorkingDirEscape(t *testing.T) {
	e, ws := newTestExec(t, ExecOptions{})
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(ws.Dir(), "link")); err != nil {
		t.Fatal(err)
	}
	_, err := runExec(t, context.Background(), e, map[string]any{"command": "pwd", "working_dir": "link"})
	if errCode(err) != toolerr.PathDenied {
		t.Fatalf("symlink out of the workspace accepted as working_dir: %v", err)
	}
}

func TestExecEnvironmentAllowlist(t *testing.T) {
	env := []string{
		"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "LC_ALL=C", "TZ=UTC", "TERM=dumb",
		"TOOLSVC_API_KEYS=sk-service-key-123456", "OPENAI_API_KEY=sk-llm-key", "TELEGRAM_TOKEN=tg-token",
		"HOME=/root", "MY_VAR=visible", "GOFLAGS_X=prefixed", "TMPDIR=/var/tmp/leak",
	}
	e, ws := newTestExec(t, ExecOptions{Environ: func() []string { return env }, EnvAllow: []string{"MY_VAR", "GOFLAGS_*", "TOOLSVC_API_KEYS"}})
	out, err := runExec(t, context.Background(), e, map[string]any{"command": "env"})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "LC_ALL=C", "TZ=UTC", "TERM=dumb", "MY_VAR=visible", "GOFLAGS_X=prefixed"} {
		if !strings.Contains(out, w+"\n") {
			t.Errorf("env lacks %s:\n%s", w, out)
		}
	}
	// HOME is the call's own, in its private temporary folder.
	home := regexp.MustCompile(`(?m)^HOME=` + regexp.QuoteMeta(filepath.Join(os.TempDir(), "toolsvc-exec-")) + `[^/\n]+/home$`)
	if !home.MatchString(out) || strings.Contains(out, "HOME="+ws.Dir()+"\n") {
		t.Errorf("HOME is not the call's own folder:\n%s", out)
	}
	for _, bad := range []string{"sk-service-key", "sk-llm-key", "tg-token", "TOOLSVC_", "HOME=/root", "/var/tmp/leak"} {
		if strings.Contains(out, bad) {
			t.Errorf("env leaks %s:\n%s", bad, out)
		}
	}
}

// assertGroupGone checks that no process the command started is alive
// once the call has returned: the grandchild is found by the unique
// duration it sleeps, in the host's /proc (inside a PID namespace, the
// command's own process numbers mean nothing here).
func assertGroupGone(t *testing.T, idsFile string) {
	t.Helper()
	b, err := os.ReadFile(idsFile)
	if err != nil {
		t.Fatal(err)
	}
	marker := strings.TrimSpace(string(b))
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if cl, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && strings.Contains(string(cl), marker) {
			t.Errorf("process %s (%q) is alive after the call", e.Name(), cl)
		}
	}
}

// The grandchild sleeps with the pipes open; the call must neither wait for
// it nor leave it behind. It sleeps a unique time, its marker.
const spawnScript = `m=1000.$(od -An -N3 -tu4 /dev/urandom | tr -d ' '); sleep $m & echo "$m" > ids; echo started; `

func TestExecTimeoutKillsGroup(t *testing.T) {
	e, ws := newTestExec(t, ExecOptions{})
	out, err := runExec(t, context.Background(), e, map[string]any{"command": spawnScript + "wait", "timeout": 1})
	if errCode(err) != toolerr.Timeout {
		t.Fatalf("err = %v, out %q", err, out)
	}
	for _, w := range []string{"timed out after 1s", "Last output captured:\nstarted"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("timeout message lacks %q: %s", w, err)
		}
	}
	assertGroupGone(t, filepath.Join(ws.Dir(), "ids"))
}

func TestExecBackgroundJobKilledAtExit(t *testing.T) {
	e, ws := newTestExec(t, ExecOptions{})
	out, err := runExec(t, context.Background(), e, map[string]any{"command": spawnScript + "exit 0", "timeout": 60})
	if err != nil || out != "started\n" {
		t.Fatalf("got %q, %v", out, err)
	}
	assertGroupGone(t, filepath.Join(ws.Dir(), "ids"))
}

func TestExecCancelKillsGroup(t *testing.T) {
	e, ws := newTestExec(t, ExecOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	ids := filepath.Join(ws.Dir(), "ids")
	done := make(chan error, 1)
	go func() {
		_, err := runExec(t, ctx, e, map[string]any{"command": spawnScript + "wait", "timeout": 60})
		done <- err
	}()
	waitFile(t, ids)
	cancel()
	if err := <-done; errCode(err) != toolerr.Canceled {
		t.Fatalf("err = %v", err)
	}
	assertGroupGone(t, ids)
}

func TestExecCloseKillsRunning(t *testing.T) {
	e, ws := newTestExec(t, ExecOptions{})
	ids := filepath.Join(ws.Dir(), "ids")
	done := make(chan string, 1)
	go func() {
		out, _ := runExec(t, context.Background(), e, map[string]any{"command": spawnScript + "wait", "timeout": 60})
		done <- out
	}()
	waitFile(t, ids)
	e.Close()
	if out := <-done; !strings.Contains(out, "COMMAND FAILED (exit code 137)") {
		t.Errorf("out = %q", out)
	}
	assertGroupGone(t, ids)
}

// waitFile waits for a command to reach a point it marks by writing a
// file: an event, not a fixed sleep.
func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil && strings.HasSuffix(string(b), "\n") {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s never appeared", path)
}

func TestExecBusy(t *testing.T) {
	e, ws := newTestExec(t, ExecOptions{MaxConcurrent: 1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ids := filepath.Join(ws.Dir(), "ids")
	done := make(chan struct{})
	go func() {
		defer close(done)
		runExec(t, ctx, e, map[string]any{"command": spawnScript + "wait", "timeout": 60})
	}()
	waitFile(t, ids)
	_, err := runExec(t, context.Background(), e, map[string]any{"command": "echo second", "timeout": 1})
	if errCode(err) != toolerr.Busy || !strings.Contains(err.Error(), "TOOLSVC_EXEC_MAX_CONCURRENT") {
		t.Fatalf("err = %v", err)
	}
	cancel()
	<-done
	if out, err := runExec(t, context.Background(), e, map[string]any{"command": "echo third"}); err != nil || out != "third\n" {
		t.Fatalf("after the slot freed: %q %v", out, err)
	}
}

// TestExecSlotWaitKeepsTimeout: a command that waited for a free slot
// still gets its whole timeout once it starts, and the result says how
// long it waited. Under one deadline for both, this command (a wait of
// about 1.2 s, then 2 s of work, with a 3 s timeout) would time out.
func TestExecSlotWaitKeepsTimeout(t *testing.T) {
	e, ws := newTestExec(t, ExecOptions{MaxConcurrent: 1})
	started := filepath.Join(ws.Dir(), "started")
	done := make(chan struct{})
	go func() {
		defer close(done)
		runExec(t, context.Background(), e, map[string]any{"command": "echo x > started; sleep 1.2", "timeout": 60})
	}()
	waitFile(t, started)
	out, err := runExec(t, context.Background(), e, map[string]any{"command": "sleep 2; echo second", "timeout": 3})
	<-done
	if err != nil || !strings.HasPrefix(out, "second\n") {
		t.Fatalf("after waiting for a slot: %q %v", out, err)
	}
	if !strings.Contains(out, "waited") || !strings.Contains(out, "for a free slot") {
		t.Errorf("the result does not say the command waited: %q", out)
	}
}

func TestExecStreamsProgress(t *testing.T) {
	tests := []struct {
		name, command string
		whole         bool // every byte streamed
	}{
		{"small", "echo first; echo second >&2; printf 'caf\\303\\251'", true},
		{"burst beyond the rate bound", "seq 1 200000", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := newTestExec(t, ExecOptions{MaxOutput: 100})
			var mu sync.Mutex
			var events []string
			ctx := registry.WithProgress(context.Background(), func(event, data string) {
				mu.Lock()
				defer mu.Unlock()
				if event != "output" {
					t.Errorf("event %q", event)
				}
				events = append(events, data)
			})
			if _, err := runExec(t, ctx, e, map[string]any{"command": tc.command}); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			all := strings.Join(events, "")
			for _, ev := range events {
				if len(ev) > streamMaxEvent+200 {
					t.Errorf("an event holds %d bytes", len(ev))
				}
			}
			if tc.whole {
				for _, w := range []string{"first\n", "second\n", "café"} {
					if !strings.Contains(all, w) {
						t.Errorf("stream lacks %q: %q", w, all)
					}
				}
				return
			}
			if !strings.HasPrefix(all, "1\n2\n3\n") || !strings.Contains(all, "bytes of output not streamed") {
				t.Errorf("streamed %d bytes: %.100q ... %q", len(all), all, all[max(0, len(all)-100):])
			}
		})
	}
}

func TestRenderCut(t *testing.T) {
	tests := []struct {
		in     string
		budget int
		want   string
	}{
		{"short", 100, "short"},
		{strings.Repeat("a", 50) + strings.Repeat("b", 50), 20, "aaaaaaaaaa" + "\n\n... [80 bytes of stdout cut here (100 bytes in all); the first 10 and last 10 characters"},
		{"ééééééééééé", 5, "éé\n\n... [12 bytes of stdout cut here (22 bytes in all); the first 2 and last 3 characters"},
	}
	for i, tc := range tests {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			b := headtail.New(40, 40)
			b.Write([]byte(tc.in))
			got := render(b, tc.budget, "stdout")
			if !strings.HasPrefix(got, tc.want) {
				t.Errorf("got %q, want prefix %q", got, tc.want)
			}
			if !strings.Contains(got, "bbbbbbbbbb") && strings.Contains(tc.in, "b") {
				t.Errorf("tail missing: %q", got)
			}
		})
	}
}
