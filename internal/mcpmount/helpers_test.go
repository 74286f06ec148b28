package mcpmount

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/mcpmount/mcptest"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/sandbox"
	"github.com/countbot/toolsvc/internal/workspace"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeVar); mode != "" {
		runFake(mode)
		return
	}
	os.Exit(m.Run())
}

// npmServers installs the MCP servers from npm (see mcptest).
func npmServers(t testing.TB) string { return mcptest.NpmServers(t) }

// logBuf is a log sink safe for the server's goroutines.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type env struct {
	deps Deps
	ws   *workspace.Workspace
	logs *logBuf
}

// newEnv returns Deps for a test: a fresh workspace, the sandbox of mode
// (extra folders readable and writable, for the npm cache and the test
// binary), a quick backoff.
func newEnv(t testing.TB, mode sandbox.Mode, extra ...string) *env {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws, err := workspace.Open(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	home := t.TempDir()
	sbs := NewSandboxes(sandbox.Options{Mode: mode, Workspace: dir, Writable: append([]string{home}, extra...), MaxProcs: 256, MaxMemory: 2 << 30})
	t.Cleanup(sbs.Close)
	logs := &logBuf{}
	return &env{ws: ws, logs: logs, deps: Deps{
		Sandbox:        sbs.For,
		Workspace:      ws,
		Home:           home,
		TempDir:        t.TempDir(),
		Log:            zerolog.New(logs),
		ConnectTimeout: 20 * time.Second,
		MinBackoff:     50 * time.Millisecond,
		MaxBackoff:     time.Second,
	}}
}

// start starts a server and closes it when the test ends.
func (e *env) start(t testing.TB, name string, cfg Config) *Server {
	t.Helper()
	s := New(name, cfg, e.deps)
	t.Cleanup(func() { s.Close() })
	if err := s.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v\nlog:\n%s", err, e.logs.String())
	}
	return s
}

// fakeConfig runs the test binary as the fake server of mode.
func fakeConfig(t testing.TB, mode string, env map[string]string) Config {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]string{fakeVar: mode}
	for k, v := range env {
		all[k] = v
	}
	return Config{Type: TypeStdio, Command: exe, Env: all}
}

// registryOf registers the server's tools in a fresh registry, failing
// the test on any error: every mounted tool must be accepted as it is.
func registryOf(t testing.TB, s *Server) *registry.Registry {
	t.Helper()
	reg := registry.New(registry.Options{DefaultTimeout: 30 * time.Second})
	for _, tool := range s.Tools() {
		if err := reg.Register(tool); err != nil {
			t.Fatalf("Register: %v", err)
		}
	}
	return reg
}

func toolByName(t testing.TB, s *Server, name string) *Tool {
	t.Helper()
	for _, tool := range s.Tools() {
		if tool.Name() == name {
			return tool.(*Tool)
		}
	}
	var names []string
	for _, tool := range s.Tools() {
		names = append(names, tool.Name())
	}
	t.Fatalf("no tool %s among %v", name, names)
	return nil
}

func invoke(reg *registry.Registry, ctx context.Context, name, args string) registry.Result {
	return reg.Invoke(ctx, name, json.RawMessage(args), registry.Meta{})
}

// settled waits until the first attempt to start of every server of m
// has ended, up or not: what start-up waited for before it stopped
// waiting for servers. Their tools are published by then.
func settled(t testing.TB, m *Mount) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		m.mu.Lock()
		done := true
		for _, s := range m.servers {
			done = done && s.outcome
		}
		m.mu.Unlock()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the servers' first attempts to start did not end within a minute")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
