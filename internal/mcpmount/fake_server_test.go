package mcpmount

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/sandbox"
	"github.com/countbot/toolsvc/internal/toolerr"
)

var validName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// TestFakeServerTools: names made valid for every model format, unusable
// schemas left out with a log line naming the tool, the rest registered
// as they are; results converted (text, isError, image and resource into
// the workspace); secrets from env never in a result.
func TestFakeServerTools(t *testing.T) {
	e := newEnv(t, sandbox.None)
	const secret = "s3cr3t-token-value-42"
	e.deps.LookupEnv = func(name string) (string, bool) {
		if name == "FAKE_TOKEN" {
			return secret, true
		}
		return "", false
	}
	s := e.start(t, "fake", fakeConfig(t, "raw", map[string]string{"FAKE_SECRET": "${FAKE_TOKEN}"}))
	reg := registryOf(t, s)

	names := map[string]bool{}
	for _, tool := range s.Tools() {
		if !validName.MatchString(tool.Name()) {
			t.Errorf("invalid name %q", tool.Name())
		}
		names[tool.Name()] = true
	}
	for _, want := range []string{"fake__echo", "fake__fail", "fake__untyped", "fake__dotted_name_with_space"} {
		if !names[want] {
			t.Errorf("tool %s missing; have %v", want, names)
		}
	}
	long := ToolName("fake", strings.Repeat("very_long_tool_name_", 5))
	if len(long) != 64 || !names[long] || long != ToolName("fake", strings.Repeat("very_long_tool_name_", 5)) {
		t.Errorf("long name %q (len %d) not mounted as a stable 64-character name", long, len(long))
	}
	for _, bad := range []string{"string_schema", "broken_schema", "remote_ref"} {
		if names["fake__"+bad] {
			t.Errorf("tool %s with an unusable schema was mounted", bad)
		}
		if !strings.Contains(e.logs.String(), `"tool":"`+bad+`"`) {
			t.Errorf("no log line names the left-out tool %s:\n%s", bad, e.logs.String())
		}
	}
	if p := string(toolByName(t, s, "fake__untyped").Parameters()); !strings.Contains(p, `"type":"object"`) {
		t.Errorf("untyped schema not normalized: %s", p)
	}

	ctx := context.Background()
	if r := invoke(reg, ctx, "fake__echo", `{"text":"hello"}`); r.Status != registry.StatusSuccess || r.Result != "hello" {
		t.Errorf("echo: %+v", r)
	}
	// Refused by the registry before the server sees it.
	if r := invoke(reg, ctx, "fake__echo", `{"text":5}`); r.Error == nil || r.Error.Code != toolerr.InvalidArguments {
		t.Errorf("echo with a number: %+v", r)
	}
	r := invoke(reg, ctx, "fake__fail", `{}`)
	if r.Status != registry.StatusError || r.Error.Code != toolerr.ToolError || !strings.Contains(r.Result, "the widget is broken") {
		t.Errorf("isError: %+v", r)
	}
	// The secret reached the server through env, and never the result.
	out, err := toolByName(t, s, "fake__echo").Execute(ctx, []byte(`{"text":"x","secret":true}`))
	if err != nil || strings.Contains(out, secret) || !strings.Contains(out, "x ") {
		t.Errorf("echo with secret: %q, %v", out, err)
	}
	if !strings.Contains(strings.Join(s.Secrets(), " "), secret) {
		t.Errorf("Secrets() misses the env value read from ${FAKE_TOKEN}: %v", s.Secrets())
	}

	r = invoke(reg, ctx, "fake__picture", `{}`)
	if r.Status != registry.StatusSuccess {
		t.Fatalf("picture: %+v", r)
	}
	files := regexp.MustCompile(`saved to (\S+)`).FindAllStringSubmatch(r.Result, -1)
	if len(files) != 2 || !strings.Contains(r.Result, "here it is") {
		t.Fatalf("picture result: %s", r.Result)
	}
	png, err := os.ReadFile(filepath.Join(e.ws.Dir(), files[0][1]))
	if err != nil || !strings.HasPrefix(string(png), "\x89PNG") || !strings.HasPrefix(files[0][1], "mcp/fake/picture-") || !strings.HasSuffix(files[0][1], ".png") {
		t.Errorf("image file %s: %v %q", files[0][1], err, png)
	}
	md, err := os.ReadFile(filepath.Join(e.ws.Dir(), files[1][1]))
	if err != nil || string(md) != "# Notes\n" || !strings.HasSuffix(files[1][1], ".md") {
		t.Errorf("resource file %s: %v %q", files[1][1], err, md)
	}
}

// TestListChanged: a list_changed notification lists the tools again and
// calls OnToolsChanged.
func TestListChanged(t *testing.T) {
	e := newEnv(t, sandbox.None)
	s := e.start(t, "fake", fakeConfig(t, "raw", nil))
	changed := make(chan struct{}, 1)
	s.OnToolsChanged(func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	})
	if _, err := toolByName(t, s, "fake__change").Execute(context.Background(), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(60 * time.Second):
		t.Fatal("OnToolsChanged was not called after list_changed")
	}
	toolByName(t, s, "fake__added")
}

// TestHugeResult: a 100 MB result is refused after MaxMessage bytes with
// a clear error, the server is restarted, and the next call works.
func TestHugeResult(t *testing.T) {
	e := newEnv(t, sandbox.None)
	s := e.start(t, "fake", fakeConfig(t, "raw", nil))
	reg := registryOf(t, s)
	r := invoke(reg, context.Background(), "fake__huge", `{"mb":100}`)
	t.Logf("result: %s", r.Result)
	if r.Status != registry.StatusError || r.Error.Code != toolerr.ToolError || !strings.Contains(r.Result, "larger than 16777216 bytes") || !strings.Contains(r.Result, "Next:") {
		t.Fatalf("huge: %+v", r)
	}
	if r := invoke(reg, context.Background(), "fake__echo", `{"text":"again"}`); r.Result != "again" {
		t.Errorf("echo after the restart: %+v", r)
	}
}

// kill kills the server's current process, as a crash would.
func kill(t testing.TB, s *Server) {
	t.Helper()
	s.mu.Lock()
	c := s.conn
	s.mu.Unlock()
	if c == nil || c.child == nil {
		t.Fatal("no running process to kill")
	}
	c.child.kill()
}

// TestKilledMidCall: the server dies during a call: the call ends with a
// clean error, the server is restarted, and the next call works.
func TestKilledMidCall(t *testing.T) {
	e := newEnv(t, sandbox.None)
	s := e.start(t, "fake", fakeConfig(t, "raw", nil))
	reg := registryOf(t, s)
	r := callKilled(t, s, reg, "fake__slow", `{}`)
	t.Logf("result: %s", r.Result)
	if r.Error == nil || r.Error.Code != toolerr.Unavailable || !strings.Contains(r.Result, "restarted") {
		t.Fatalf("killed call: %+v", r)
	}
	if r := invoke(reg, context.Background(), "fake__echo", `{"text":"alive"}`); r.Result != "alive" {
		t.Errorf("echo after the restart: %+v\n%s", r, e.logs.String())
	}
}

// callKilled calls a tool that reports progress, kills the server at the
// first progress event, and returns the call's result.
func callKilled(t testing.TB, s *Server, reg *registry.Registry, name, args string) registry.Result {
	t.Helper()
	started := make(chan struct{})
	var once bool
	ctx := registry.WithProgress(context.Background(), func(event, data string) {
		if event == "progress" && !once {
			once = true
			close(started)
		}
	})
	done := make(chan registry.Result, 1)
	go func() { done <- invoke(reg, ctx, name, args) }()
	select {
	case <-started:
	case r := <-done:
		t.Fatalf("the call ended before it reported progress: %+v", r)
	}
	kill(t, s)
	return <-done
}

// TestBadServers: a server that never starts, exits at once, hangs in
// initialize or writes garbage gives a clear Start error within the
// connect timeout, and Status says the same.
func TestBadServers(t *testing.T) {
	cases := []struct {
		name string
		cfg  func(t *testing.T) Config
		want []string
	}{
		{"missing program", func(*testing.T) Config { return Config{Type: TypeStdio, Command: "/nonexistent/mcp-server"} }, []string{`command "/nonexistent/mcp-server": not found`}},
		{"not in PATH", func(*testing.T) Config { return Config{Type: TypeStdio, Command: "no-such-mcp-server-xyz"} }, []string{`"no-such-mcp-server-xyz" was not found in PATH`}},
		{"exits at once", func(t *testing.T) Config { return fakeConfig(t, "exit", nil) }, []string{"exit status 3", "boom: the config file /nonexistent is missing"}},
		{"hangs in initialize", func(t *testing.T) Config { return fakeConfig(t, "hang", nil) }, []string{"no answer to initialize within 2s"}},
		{"garbage on stdout", func(t *testing.T) Config { return fakeConfig(t, "garbage", nil) }, []string{`"Welcome to my server v1.0! Listening on stdio..."`, "not a JSON-RPC message"}},
		{"unset variable", func(t *testing.T) Config {
			c := fakeConfig(t, "raw", nil)
			c.Env["TOKEN"] = "${NO_SUCH_VARIABLE_HERE}"
			return c
		}, []string{"NO_SUCH_VARIABLE_HERE is not set"}},
	}
	cases = append(cases, struct {
		name string
		cfg  func(t *testing.T) Config
		want []string
	}{"no sandbox", func(t *testing.T) Config { return fakeConfig(t, "raw", nil) }, []string{"sandbox, which is not available", "bubblewrap is not available"}})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, sandbox.None)
			if tc.name == "no sandbox" {
				e.deps.Sandbox = func(Net) (*sandbox.Sandbox, error) {
					return nil, errors.New("TOOLSVC_EXEC_SANDBOX=bwrap: bubblewrap is not available")
				}
			}
			e.deps.ConnectTimeout = 2 * time.Second
			s := New("bad", tc.cfg(t), e.deps)
			defer s.Close()
			err := s.Start(context.Background())
			if err == nil {
				t.Fatal("Start succeeded")
			}
			t.Logf("Start: %v", err)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Start error %q lacks %q", err, w)
				}
			}
			if st := s.Status(); st == nil {
				t.Error("Status is nil for a server that never started")
			}
			// A call gets a tool result, not a hang.
			tool := &Tool{s: s, name: "bad__x", remote: "x"}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if _, err := tool.Execute(ctx, []byte(`{}`)); toolerr.ErrorCode(err) != toolerr.Unavailable && toolerr.ErrorCode(err) != toolerr.Timeout {
				t.Errorf("call on a bad server: %v", err)
			}
		})
	}
}
