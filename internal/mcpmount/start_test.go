//go:build linux

package mcpmount

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/sandbox"
	"github.com/countbot/toolsvc/internal/toolerr"
)

// sandboxMount is a Mount over a fresh registry, which answers names of
// its servers through Resolve, with exec's sandbox of mode none.
func sandboxMount(t *testing.T, connect time.Duration) (*Mount, *registry.Registry, *env) {
	t.Helper()
	e := newEnv(t, sandbox.None)
	e.deps.ConnectTimeout = connect
	reg := registry.New(registry.Options{DefaultTimeout: 30 * time.Second, Log: zerolog.Nop()})
	if err := reg.Register(stubTool("builtin")); err != nil {
		t.Fatal(err)
	}
	m := NewMount(MountOptions{Registry: reg, Deps: e.deps, Log: zerolog.New(e.logs), CallTimeout: time.Second,
		Sandbox: &sandbox.Options{Mode: sandbox.None, Workspace: e.ws.Dir(), Writable: []string{e.deps.Home}, MaxProcs: 256, MaxMemory: 2 << 30}})
	reg.SetFallback(m.Resolve)
	return m, reg, e
}

// hangEntry is an entry of the fake server that never answers
// initialize, its processes marked with marker.
func hangEntry(exe, marker string) string {
	return `{"command":` + strconv.Quote(exe) + `,"env":{"` + fakeVar + `":"hang","FAKE_MARK":` + strconv.Quote(marker) + `}}`
}

// TestStartDoesNotWait: four servers that never answer initialize, with a
// connect timeout of a minute: Prepare and commit return at once; /readyz
// says each is starting; a call of any name of theirs says the server is
// starting, never that the tool is unknown, while a name of no server,
// or one the switches leave out, is unknown; Close kills the starting
// processes at once, and no process or goroutine of theirs is left.
func TestStartDoesNotWait(t *testing.T) {
	goroutines := runtime.NumGoroutine()
	m, reg, e := sandboxMount(t, time.Minute)
	exe, _ := os.Executable()
	marker := t.Name() + strconv.Itoa(os.Getpid())
	var kv []string
	for _, name := range []string{"fs", "fetch", "git", "memory"} {
		kv = append(kv, name, hangEntry(exe, marker))
	}
	off := func(server, tool string) (string, bool) { return "switched off", tool == "git__push" }
	begin := time.Now()
	commit, _, err := m.Prepare(entries(kv...), off, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := commit(); err != nil {
		t.Fatal(err)
	}
	took := time.Since(begin)
	t.Logf("Prepare and commit of four servers that never answer: %s", took)
	if took > 5*time.Second {
		t.Errorf("Prepare and commit took %s: they waited for the servers", took)
	}
	waitUntil(t, "the four processes to run", func() bool { return instancesOf(marker, exe) == 4 })

	checks := map[string]string{}
	m.Ready(checks)
	for _, name := range []string{"fs", "fetch", "git", "memory"} {
		if !strings.HasPrefix(checks["mcp:"+name], "starting (since ") {
			t.Errorf("/readyz of %s: %q", name, checks["mcp:"+name])
		}
	}
	r := invoke(reg, context.Background(), "fs__read_file", `{"path":"a"}`)
	if r.Error == nil || r.Error.Code != toolerr.Unavailable || !strings.Contains(r.Result, "MCP server fs is starting (since ") || !strings.Contains(r.Result, "try again in a few seconds") {
		t.Errorf("a call of a starting server's tool: %+v", r)
	}
	for _, name := range []string{"other__x", "git__push", "fs__"} {
		if r := invoke(reg, context.Background(), name, `{}`); r.Error == nil || r.Error.Code != toolerr.UnknownTool {
			t.Errorf("%s: %+v", name, r)
		}
	}
	if names := reg.Names(); len(names) != 1 {
		t.Errorf("listed: %v", names)
	}

	begin = time.Now()
	m.Close()
	took = time.Since(begin)
	t.Logf("Close with four servers starting: %s", took)
	if took > 5*time.Second {
		t.Errorf("Close took %s", took)
	}
	if n := instancesOf(marker, exe); n != 0 {
		t.Errorf("%d processes left after Close", n)
	}
	waitUntil(t, "the servers' goroutines to end", func() bool { return runtime.NumGoroutine() <= goroutines+2 })
	if r := invoke(reg, context.Background(), "fs__read_file", `{}`); r.Error == nil || r.Error.Code != toolerr.UnknownTool {
		t.Errorf("after Close: %+v", r)
	}
	_ = e
}

// TestDownThenUp: a server whose first start fails is down in /readyz
// with the reason, and a call of a name of its says so and when it is
// tried again; a server that is up answers an unknown name of its as an
// unknown tool, and its tools work.
func TestDownThenUp(t *testing.T) {
	m, reg, e := sandboxMount(t, 20*time.Second)
	e.deps.MinBackoff = time.Minute // no second attempt while the test looks
	m.deps.MinBackoff, m.deps.MaxBackoff = time.Minute, time.Minute
	mountAndSettle(t, m, entries("bad", `{"command":"/bin/sh","args":["-c","echo cannot open the config >&2; exit 3"]}`,
		"good", fakeEntry(mustExe(t), t.Name(), "")), nil)

	checks := map[string]string{}
	m.Ready(checks)
	if v := checks["mcp:bad"]; !strings.HasPrefix(v, "down, restarting in the background: ") || !strings.Contains(v, "exit status 3") || !strings.Contains(v, "cannot open the config") {
		t.Errorf("/readyz of bad: %q", v)
	}
	if checks["mcp:good"] != "ok" {
		t.Errorf("/readyz of good: %q", checks["mcp:good"])
	}
	r := invoke(reg, context.Background(), "bad__anything", `{}`)
	if r.Error == nil || r.Error.Code != toolerr.Unavailable || !strings.Contains(r.Result, "MCP server bad is down: ") ||
		!strings.Contains(r.Result, "exit status 3") || !strings.Contains(r.Result, "the next attempt is in ") || strings.Contains(r.Result, "MCP server bad: ") {
		t.Errorf("a call of a down server's tool: %+v", r)
	}
	if r := invoke(reg, context.Background(), "good__no_such_tool", `{}`); r.Error == nil || r.Error.Code != toolerr.UnknownTool {
		t.Errorf("an unknown name of a server that is up: %+v", r)
	}
	if r := invoke(reg, context.Background(), "good__echo", `{"text":"hi"}`); r.Result != "hi" {
		t.Errorf("echo: %+v", r)
	}
	if !logSays(e.logs.String(), "starting in the background") || !logSays(e.logs.String(), "retried in the background") {
		t.Errorf("the log lacks the starting and down lines:\n%s", e.logs.String())
	}
}

// TestNotListedAnswers: what a call of a server that has not listed its
// tools is told, in each state.
func TestNotListedAnswers(t *testing.T) {
	now := time.Now()
	s := New("mem", Config{Type: TypeStdio, Command: "x"}, Deps{})
	s.begun = now.Add(-3 * time.Second)
	for _, tc := range []struct {
		name  string
		setup func()
		code  string
		want  string
	}{
		{"starting", func() {}, toolerr.Unavailable, "MCP server mem is starting (since 3 s): its tools are not known yet. Next: try again in a few seconds."},
		{"down, waiting", func() {
			s.tried, s.status, s.retryAt = true, errFor("MCP server mem: the server process ended (exit status 1)"), now.Add(4*time.Second+time.Millisecond)
		}, toolerr.Unavailable, "MCP server mem is down: the server process ended (exit status 1). It is restarted in the background; the next attempt is in 5 s. Next: try again later, or use another tool."},
		{"down, trying", func() { s.retryAt = now.Add(-time.Second) }, toolerr.Unavailable, "It is being restarted now."},
		{"broken", func() { s.broken = true }, toolerr.Unavailable, "cannot start"},
		{"stopped", func() { s.closed = true }, toolerr.Unavailable, "was stopped"},
	} {
		tc.setup()
		err := notListedError(s, "mem__x", now)
		if toolerr.ErrorCode(err) != tc.code || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v (%s), want %q", tc.name, err, toolerr.ErrorCode(err), tc.want)
		}
	}
}

type errFor string

func (e errFor) Error() string { return string(e) }

func mustExe(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}
