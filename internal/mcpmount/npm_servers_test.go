package mcpmount

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/countbot/toolsvc/internal/mcpmount/mcptest"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/sandbox"
	"github.com/countbot/toolsvc/internal/toolerr"
)

// Tests against MCP servers nobody here wrote, installed from npm:
// @modelcontextprotocol/server-everything over stdio and over Streamable
// HTTP, and @modelcontextprotocol/server-memory over stdio.

func everythingJS(nm string) string { return mcptest.EverythingJS(nm) }

// sandboxModes are the modes the stdio servers are tested in: none, and
// each of Landlock and bubblewrap that works on this machine (under CI,
// bubblewrap must).
func sandboxModes(t *testing.T) []sandbox.Mode {
	modes := []sandbox.Mode{sandbox.None}
	for _, m := range []sandbox.Mode{sandbox.Landlock, sandbox.Bwrap} {
		sb, err := sandbox.New(sandbox.Options{Mode: m, Workspace: t.TempDir()})
		if err != nil {
			if m == sandbox.Bwrap && os.Getenv("CI") == "true" {
				t.Fatalf("bubblewrap unavailable under CI: %v", err)
			}
			t.Logf("MCP SERVER IN SANDBOX MODE %s NOT TESTED: %v", m, err)
			continue
		}
		sb.Close()
		modes = append(modes, m)
	}
	return modes
}

// TestEverythingStdio runs server-everything over stdio, in each sandbox
// mode: every tool listed with a valid name and a schema the registry
// takes; a call; arguments refused before the server sees them; an image
// saved into the workspace; a protocol-level refusal of bad arguments as
// an error result; a kill in the middle of a call gives a clean error,
// and the next call works after the restart.
func TestEverythingStdio(t *testing.T) {
	nm := npmServers(t)
	for _, mode := range sandboxModes(t) {
		t.Run(string(mode), func(t *testing.T) {
			e := newEnv(t, mode, filepath.Dir(nm))
			s := e.start(t, "everything", Config{Type: TypeStdio, Command: "node", Args: []string{everythingJS(nm), "stdio"}})
			checkEverything(t, e, s)

			reg := registryOf(t, s)
			// The call reports progress; the server is killed at the first.
			r := callKilled(t, s, reg, "everything__trigger-long-running-operation", `{"duration":30,"steps":30}`)
			if r.Error == nil || r.Error.Code != toolerr.Unavailable || !strings.Contains(r.Result, "restarted") {
				t.Fatalf("killed call: %+v", r)
			}
			if r := invoke(reg, context.Background(), "everything__echo", `{"message":"after restart"}`); r.Status != registry.StatusSuccess || !strings.Contains(r.Result, "after restart") {
				t.Errorf("echo after the restart: %+v\n%s", r, e.logs.String())
			}
			if err := s.Status(); err != nil {
				t.Errorf("Status after the restart: %v", err)
			}
		})
	}
}

// checkEverything checks what server-everything offers over either
// transport.
func checkEverything(t *testing.T, e *env, s *Server) {
	t.Helper()
	reg := registryOf(t, s)
	var names []string
	for _, tool := range s.Tools() {
		if !validName.MatchString(tool.Name()) || !strings.HasPrefix(tool.Name(), "everything__") {
			t.Errorf("tool name %q", tool.Name())
		}
		names = append(names, tool.Name())
	}
	for _, want := range []string{"everything__echo", "everything__get-sum", "everything__get-tiny-image", "everything__trigger-long-running-operation"} {
		if !reg.Has(want) {
			t.Errorf("tool %s missing; have %v", want, names)
		}
	}
	ctx := context.Background()
	if r := invoke(reg, ctx, "everything__echo", `{"message":"hello from toolsvc"}`); r.Status != registry.StatusSuccess || !strings.Contains(r.Result, "hello from toolsvc") {
		t.Errorf("echo: %+v", r)
	}
	if r := invoke(reg, ctx, "everything__get-sum", `{"a":2,"b":40}`); r.Status != registry.StatusSuccess || !strings.Contains(r.Result, "42") {
		t.Errorf("get-sum: %+v", r)
	}
	// The registry refuses what the schema forbids; the server never sees it.
	if r := invoke(reg, ctx, "everything__get-sum", `{"a":"two","b":40}`); r.Error == nil || r.Error.Code != toolerr.InvalidArguments {
		t.Errorf("get-sum with a string: %+v", r)
	}
	// Past the registry (a direct Execute), the server's own refusal is
	// an error result.
	if _, err := toolByName(t, s, "everything__get-sum").Execute(ctx, []byte(`{"a":"two"}`)); err == nil || toolerr.ErrorCode(err) != toolerr.ToolError {
		t.Errorf("get-sum refused by the server: %v", err)
	}
	r := invoke(reg, ctx, "everything__get-tiny-image", `{}`)
	m := regexp.MustCompile(`image saved to (\S+) \(image/png`).FindStringSubmatch(r.Result)
	if r.Status != registry.StatusSuccess || m == nil {
		t.Fatalf("get-tiny-image: %+v", r)
	}
	png, err := os.ReadFile(filepath.Join(e.ws.Dir(), m[1]))
	if err != nil || !strings.HasPrefix(string(png), "\x89PNG") || !strings.HasPrefix(m[1], "mcp/everything/get-tiny-image-") {
		t.Errorf("image %s: %v", m[1], err)
	}
}

// TestEverythingHTTP runs server-everything in its Streamable HTTP mode
// behind a loopback proxy that checks the configured header, whose value
// comes from a variable, reaches the server.
func TestEverythingHTTP(t *testing.T) {
	nm := npmServers(t)
	port := mcptest.EverythingHTTP(t, nm)

	const token = "tok-1234567890-abcdef"
	var authorized, refused atomic.Int64
	target, _ := url.Parse("http://127.0.0.1:" + strconv.Itoa(port))
	proxy := httputil.NewSingleHostReverseProxy(target)
	front := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			refused.Add(1)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		authorized.Add(1)
		proxy.ServeHTTP(w, r)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go front.Serve(ln)
	t.Cleanup(func() { front.Close() })

	e := newEnv(t, sandbox.None)
	e.deps.LookupEnv = func(name string) (string, bool) {
		if name == "EVERYTHING_TOKEN" {
			return token, true
		}
		return "", false
	}
	cfg, err := ParseConfig([]byte(`{"type":"http","url":"http://` + ln.Addr().String() + `/mcp","headers":{"Authorization":"Bearer ${EVERYTHING_TOKEN}"}}`))
	if err != nil {
		t.Fatal(err)
	}
	s := e.start(t, "everything", cfg)
	checkEverything(t, e, s)
	if authorized.Load() == 0 || refused.Load() != 0 {
		t.Errorf("requests with the header: %d, without: %d", authorized.Load(), refused.Load())
	}
	if !strings.Contains(strings.Join(s.Secrets(), "\n"), token) {
		t.Errorf("the header's value is not among the secrets")
	}
	if strings.Contains(e.logs.String(), token) {
		t.Errorf("the token is in the log")
	}
}

// TestMemoryServer runs server-memory over stdio in the strongest sandbox
// here, its knowledge graph file in the workspace: an entity created by
// one call is read back by another.
func TestMemoryServer(t *testing.T) {
	nm := npmServers(t)
	modes := sandboxModes(t)
	mode := modes[len(modes)-1]
	e := newEnv(t, mode, filepath.Dir(nm))
	js := filepath.Join(nm, "@modelcontextprotocol", "server-memory", "dist", "index.js")
	s := e.start(t, "memory", Config{Type: TypeStdio, Command: "node", Args: []string{js},
		Env: map[string]string{"MEMORY_FILE_PATH": filepath.Join(e.ws.Dir(), "memory.jsonl")}})
	reg := registryOf(t, s)
	ctx := context.Background()
	r := invoke(reg, ctx, "memory__create_entities", `{"entities":[{"name":"toolsvc","entityType":"service","observations":["serves tools over HTTP"]}]}`)
	if r.Status != registry.StatusSuccess {
		t.Fatalf("create_entities: %+v", r)
	}
	r = invoke(reg, ctx, "memory__read_graph", `{}`)
	if r.Status != registry.StatusSuccess || !strings.Contains(r.Result, "serves tools over HTTP") {
		t.Fatalf("read_graph: %+v", r)
	}
	if b, err := os.ReadFile(filepath.Join(e.ws.Dir(), "memory.jsonl")); err != nil || !strings.Contains(string(b), "toolsvc") {
		t.Errorf("memory file in the workspace: %v %q", err, b)
	}
	// Bad arguments are refused before the server sees them.
	if r := invoke(reg, ctx, "memory__create_entities", `{"entities":"nope"}`); r.Error == nil || r.Error.Code != toolerr.InvalidArguments {
		t.Errorf("create_entities with a string: %+v", r)
	}
}
