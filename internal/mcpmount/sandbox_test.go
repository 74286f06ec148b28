package mcpmount

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countbot/toolsvc/internal/sandbox"
)

// TestStdioServerConfined: a stdio server runs confined like exec's
// commands. In every sandbox mode it starts in its cwd inside the
// workspace, gets HOME but none of the service's variables; in the modes
// that confine, it cannot read a private path (the data folder) and
// cannot connect anywhere unless its entry says "network": true.
func TestStdioServerConfined(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	t.Setenv("SERVICE_SECRET", "service-secret-value")
	for _, mode := range sandboxModes(t) {
		for _, network := range []bool{false, true} {
			name := string(mode) + "/network-off"
			if network {
				name = string(mode) + "/network-on"
			}
			t.Run(name, func(t *testing.T) {
				data := t.TempDir()
				secret := filepath.Join(data, "audit.json")
				if err := os.WriteFile(secret, []byte("AUDIT-RECORD"), 0o600); err != nil {
					t.Fatal(err)
				}
				e := newEnv(t, mode, filepath.Dir(exe))
				ws := e.ws.Dir()
				sbs := NewSandboxes(sandbox.Options{Mode: mode, Workspace: ws, Private: []string{data}, Writable: []string{e.deps.Home, filepath.Dir(exe)}})
				t.Cleanup(sbs.Close)
				e.deps.Sandbox = sbs.For
				if err := os.Mkdir(filepath.Join(ws, "sub"), 0o755); err != nil {
					t.Fatal(err)
				}
				cfg := fakeConfig(t, "raw", nil)
				cfg.Cwd, cfg.Network = "sub", Network{On: network, Given: true}
				s := e.start(t, "fake", cfg)
				out, err := toolByName(t, s, "fake__probe").Execute(context.Background(), []byte(`{"read":"`+secret+`","dial":"`+ln.Addr().String()+`"}`))
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%s", out)
				if !strings.Contains(out, "cwd: "+filepath.Join(ws, "sub")) || !strings.Contains(out, "home: "+e.deps.Home) {
					t.Errorf("cwd or HOME: %s", out)
				}
				if strings.Contains(out, "service-secret-value") {
					t.Errorf("the service's environment reached the server: %s", out)
				}
				if mode == sandbox.None {
					return
				}
				if strings.Contains(out, "AUDIT-RECORD") {
					t.Errorf("the server read a private path: %s", out)
				}
				if connected := strings.Contains(out, "dial: connected"); connected != network {
					t.Errorf("network %v, connected %v: %s", network, connected, out)
				}
			})
		}
	}
}

// TestCwdOutsideWorkspace: a cwd that leaves the workspace is refused.
func TestCwdOutsideWorkspace(t *testing.T) {
	e := newEnv(t, sandbox.None)
	cfg := fakeConfig(t, "raw", nil)
	cfg.Cwd = "../.."
	s := New("fake", cfg, e.deps)
	defer s.Close()
	if err := s.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "outside the workspace") {
		t.Fatalf("Start: %v", err)
	}
}

// TestStderrLog: a server's stderr reaches the log line by line, each
// line cut, secrets removed, at most linesPerMinute lines a minute.
func TestStderrLog(t *testing.T) {
	e := newEnv(t, sandbox.None)
	e.deps.LookupEnv = func(string) (string, bool) { return "hunter2-secret-value", true }
	s := New("fake", Config{Type: TypeStdio, Command: "x", Env: map[string]string{"TOKEN": "${T}"}}, e.deps)
	l := &stderrLog{s: s}
	l.Write([]byte("starting with hunter2-secret-value\npartial "))
	l.Write([]byte("line\n" + strings.Repeat("z", 5000) + "\n"))
	for i := 0; i < linesPerMinute+50; i++ {
		l.Write([]byte("spam\n"))
	}
	logs := e.logs.String()
	if strings.Contains(logs, "hunter2-secret-value") || !strings.Contains(logs, "starting with") || !strings.Contains(logs, `"stderr":"partial line"`) {
		t.Errorf("log:\n%.2000s", logs)
	}
	if strings.Contains(logs, strings.Repeat("z", maxLine+1)) || !strings.Contains(logs, strings.Repeat("z", maxLine)) {
		t.Error("a long line was not cut at maxLine")
	}
	if n := strings.Count(logs, `"stderr":"spam"`); n != linesPerMinute-3 {
		t.Errorf("%d spam lines logged, want %d", n, linesPerMinute-3)
	}
	if tail := l.tailText(); !strings.HasSuffix(tail, "spam") || len(tail) > tailBytes {
		t.Errorf("tail: %q", tail)
	}
}
