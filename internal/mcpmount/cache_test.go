//go:build linux

package mcpmount

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/homedir"
	"github.com/countbot/toolsvc/internal/mcpmount/mcptest"
	"github.com/countbot/toolsvc/internal/pkgcache"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/sandbox"
	"github.com/countbot/toolsvc/internal/workspace"
)

// TestCacheEnv: a stdio server with a package cache gets the variables
// that point npm, uv, pip, pnpm and bun at it, unless its entry or the
// service's allowlisted environment sets one (the operator's choice);
// without caches it gets none of them.
func TestCacheEnv(t *testing.T) {
	const dir = "/data/mcp-cache/memory/server"
	cases := []struct {
		name     string
		entry    map[string]string // the entry's env
		allow    []string          // TOOLSVC_EXEC_ENV_ALLOW
		service  []string          // the service's environment
		noCaches bool
		want     map[string]string // "" for absent
	}{
		{name: "cache", want: map[string]string{
			"npm_config_cache": dir + "/npm", "XDG_CACHE_HOME": dir, "BUN_INSTALL_CACHE_DIR": dir + "/bun"}},
		{name: "entry sets XDG_CACHE_HOME", entry: map[string]string{"XDG_CACHE_HOME": "/srv/cache"}, want: map[string]string{
			"npm_config_cache": dir + "/npm", "XDG_CACHE_HOME": "/srv/cache", "BUN_INSTALL_CACHE_DIR": dir + "/bun"}},
		{name: "entry sets npm's cache", entry: map[string]string{"npm_config_cache": "/srv/npm"}, want: map[string]string{
			"npm_config_cache": "/srv/npm", "XDG_CACHE_HOME": dir, "BUN_INSTALL_CACHE_DIR": dir + "/bun"}},
		{name: "allowlisted from the service", allow: []string{"BUN_*"}, service: []string{"BUN_INSTALL_CACHE_DIR=/opt/bun", "XDG_CACHE_HOME=/root/.cache"},
			want: map[string]string{"npm_config_cache": dir + "/npm", "XDG_CACHE_HOME": dir, "BUN_INSTALL_CACHE_DIR": "/opt/bun"}},
		{name: "not allowlisted from the service", service: []string{"npm_config_cache=/root/.npm"}, want: map[string]string{
			"npm_config_cache": dir + "/npm", "XDG_CACHE_HOME": dir, "BUN_INSTALL_CACHE_DIR": dir + "/bun"}},
		{name: "no caches", noCaches: true, service: []string{"XDG_CACHE_HOME=/root/.cache"}, want: map[string]string{
			"npm_config_cache": "", "XDG_CACHE_HOME": "", "BUN_INSTALL_CACHE_DIR": ""}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, sandbox.None)
			e.deps.EnvAllow = tc.allow
			e.deps.Environ = func() []string { return append([]string{"PATH=/usr/bin:/bin"}, tc.service...) }
			s := New("memory", Config{Type: TypeStdio, Command: "x", Env: tc.entry}, e.deps)
			defer s.Close()
			env := s.env()
			if !tc.noCaches {
				env = withCacheEnv(env, dir)
			}
			for name, want := range tc.want {
				n := 0
				for _, kv := range env {
					if strings.HasPrefix(kv, name+"=") {
						n++
					}
				}
				if got := envValue(env, name); got != want || n > 1 {
					t.Errorf("%s = %q (set %d times), want %q once; env %q", name, got, n, want, env)
				}
			}
		})
	}
}

// cacheEnv is an env whose stdio servers run in the sandboxes of mode,
// the data folder private, with package caches below it.
type cacheEnv struct {
	*env
	data   string
	caches *pkgcache.Caches
}

func newCacheEnv(t *testing.T, mode sandbox.Mode) cacheEnv {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, mode, filepath.Dir(exe))
	data, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sbs := NewSandboxes(sandbox.Options{Mode: mode, Workspace: e.ws.Dir(), Private: []string{data},
		Writable: []string{e.deps.Home, filepath.Dir(exe)}, MaxProcs: 256, MaxMemory: 2 << 30})
	t.Cleanup(sbs.Close)
	e.deps.Sandbox = sbs.For
	caches, err := pkgcache.New(filepath.Join(data, "mcp-cache"), nil)
	if err != nil {
		t.Fatal(err)
	}
	e.deps.Caches = caches
	return cacheEnv{env: e, data: data, caches: caches}
}

// probe calls the fake server's probe and returns what it printed.
func probe(t *testing.T, tool registry.Tool, ctx context.Context, args string) string {
	t.Helper()
	out, err := tool.Execute(ctx, []byte(args))
	if err != nil {
		t.Fatalf("probe %s: %v", args, err)
	}
	return out
}

// probed returns the value a probe printed for label ("XDG_CACHE_HOME").
func probed(out, label string) string {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(label) + `: (.*)$`).FindStringSubmatch(out)
	if m == nil {
		return ""
	}
	return m[1]
}

// TestStdioServerCache: in every sandbox mode each stdio server gets a
// package cache of its own below the data folder, kept when the server
// restarts (its process killed, as the watchdog restarts it) and when it
// is made anew (a service restart); in the modes that confine, another
// server can neither read nor write it, though both run in the same
// sandbox with the same data folder hidden.
func TestStdioServerCache(t *testing.T) {
	for _, mode := range sandboxModes(t) {
		t.Run(string(mode), func(t *testing.T) {
			e := newCacheEnv(t, mode)
			cfg := fakeConfig(t, "raw", nil)
			first := e.start(t, "first", cfg)
			second := e.start(t, "second", cfg)
			ctx := context.Background()
			cache := filepath.Join(e.data, "mcp-cache", "first", "server")
			kept := filepath.Join(cache, "npm", "_cacache", "kept")

			out := probe(t, toolByName(t, first, "first__probe"), ctx, `{"write":"`+kept+`"}`)
			if got := probed(out, "XDG_CACHE_HOME"); got != cache {
				t.Errorf("first's XDG_CACHE_HOME = %q, want %s", got, cache)
			}
			if got := probed(out, "npm_config_cache"); got != filepath.Join(cache, "npm") {
				t.Errorf("first's npm_config_cache = %q", got)
			}
			if got := probed(out, "write"); got != "ok" {
				t.Fatalf("first cannot write its own cache: %s", out)
			}
			if fi, err := os.Stat(cache); err != nil || fi.Mode().Perm() != 0o700 {
				t.Errorf("the cache %s: %v, %v; want mode 0700", cache, fi, err)
			}

			// Restarted: the same cache, with what it kept.
			kill(t, first)
			waitUntil(t, "the restart", func() bool {
				out, err := toolByName(t, first, "first__probe").Execute(ctx, []byte(`{"read":"`+kept+`"}`))
				return err == nil && probed(out, "pid") != "" && !strings.Contains(out, "ended")
			})
			out = probe(t, toolByName(t, first, "first__probe"), ctx, `{"read":"`+kept+`"}`)
			if probed(out, "read") != "WRITTEN" || probed(out, "XDG_CACHE_HOME") != cache {
				t.Errorf("after a restart the cache is not the same: %s", out)
			}
			// Made anew, as the service makes it after its own restart.
			first.Close()
			again := e.start(t, "first", cfg)
			if out := probe(t, toolByName(t, again, "first__probe"), ctx, `{"read":"`+kept+`"}`); probed(out, "read") != "WRITTEN" {
				t.Errorf("a new server of the same name does not find its cache: %s", out)
			}

			out = probe(t, toolByName(t, second, "second__probe"), ctx, `{"read":"`+kept+`"}`)
			if got, want := probed(out, "XDG_CACHE_HOME"), filepath.Join(e.data, "mcp-cache", "second", "server"); got != want {
				t.Errorf("second's XDG_CACHE_HOME = %q, want %s", got, want)
			}
			if mode == sandbox.None {
				return // nothing is confined
			}
			if strings.Contains(out, "WRITTEN") {
				t.Errorf("the second server read the first's cache: %s", out)
			}
			// Under bubblewrap the write may land in the empty tmpfs that
			// covers the data folder in the second server's own mounts,
			// gone with its process: the first's folder is what counts.
			planted := filepath.Join(cache, "npm", "_npx", "planted")
			out = probe(t, toolByName(t, second, "second__probe"), ctx, `{"write":"`+planted+`"}`)
			if _, err := os.Stat(planted); err == nil {
				t.Errorf("the second server wrote into the first's cache: %s", out)
			}
		})
	}
}

// TestStdioServerCacheAsAnotherUser: for a root service whose servers run
// as another account (TOOLSVC_EXEC_USER), each cache belongs to that
// account, the service's folders above it let it through, and in each
// sandbox mode the server writes its own cache and not another's.
func TestStdioServerCacheAsAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("NOT TESTED: TOOLSVC_EXEC_USER needs a root service")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The account cannot reach the test's own temporary folders: the
	// server is installed under /opt, as an operator would.
	prog := filepath.Join(mcptest.SystemDir(t), "fake-mcp-server")
	if out, err := exec.Command("cp", exe, prog).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	nobody := &sandbox.User{Name: "nobody", Uid: 65534, Gid: 65534}
	for _, mode := range sandboxModes(t)[1:] {
		t.Run(string(mode), func(t *testing.T) {
			base := t.TempDir()
			for _, d := range []string{filepath.Dir(base), base} {
				if err := os.Chmod(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			ws, data, tmp := filepath.Join(base, "ws"), filepath.Join(base, "data"), filepath.Join(base, "tmp")
			for d, mode := range map[string]os.FileMode{ws: 0o755, data: 0o711, tmp: 0o1777} {
				if err := os.Mkdir(d, mode); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(d, mode); err != nil {
					t.Fatal(err)
				}
			}
			e := newEnv(t, mode)
			w, err := workspace.Open(ws, true)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { w.Close() })
			sbs := NewSandboxes(sandbox.Options{Mode: mode, Workspace: ws, Private: []string{data}, User: nobody, MaxProcs: 256, MaxMemory: 2 << 30})
			t.Cleanup(sbs.Close)
			caches, err := pkgcache.New(filepath.Join(data, "mcp-cache"), &homedir.User{Uid: nobody.Uid, Gid: nobody.Gid})
			if err != nil {
				t.Fatal(err)
			}
			e.deps.Workspace, e.deps.Sandbox, e.deps.Caches, e.deps.Owner, e.deps.TempDir, e.deps.Home = w, sbs.For, caches, nobody, tmp, ""
			cfg := Config{Type: TypeStdio, Command: prog, Env: map[string]string{fakeVar: "raw"}}
			first, second := e.start(t, "first", cfg), e.start(t, "second", cfg)
			cache := filepath.Join(data, "mcp-cache", "first", "server")
			kept := filepath.Join(cache, "npm", "kept")
			if out := probe(t, toolByName(t, first, "first__probe"), context.Background(), `{"write":"`+kept+`"}`); probed(out, "write") != "ok" {
				t.Fatalf("the server cannot write its own cache as %s: %s", nobody.Name, out)
			}
			if fi, err := os.Stat(kept); err != nil || fi.Sys().(*syscall.Stat_t).Uid != nobody.Uid {
				t.Errorf("%s: %v, %v; want a file of uid %d", kept, fi, err, nobody.Uid)
			}
			out := probe(t, toolByName(t, second, "second__probe"), context.Background(), `{"read":"`+kept+`","write":"`+filepath.Join(cache, "planted")+`"}`)
			if strings.Contains(out, "WRITTEN") {
				t.Errorf("the second server read the first's cache: %s", out)
			}
			if _, err := os.Stat(filepath.Join(cache, "planted")); err == nil {
				t.Error("the second server wrote into the first's cache")
			}
		})
	}
}

// TestPerKeyCache: a per_key server's instance for a key gets the key's
// own cache, whether the key works in the whole workspace or in a folder
// of its own; in the modes that confine, another key's instance can
// neither read nor write it. The listing instance keeps the server's
// own.
func TestPerKeyCache(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A key's folder's sandbox shows the system, not the test's
	// temporary folders (see TestPerKeyFolders).
	prog := filepath.Join(mcptest.SystemDir(t), "fake-mcp-server")
	if out, err := exec.Command("cp", exe, prog).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	for _, mode := range sandboxModes(t) {
		for _, folders := range []bool{false, true} {
			if folders && mode == sandbox.None {
				continue // a key's folder needs a sandbox that confines
			}
			name := string(mode) + "/whole-workspace"
			if folders {
				name = string(mode) + "/own-folders"
			}
			t.Run(name, func(t *testing.T) { testPerKeyCache(t, mode, prog, folders) })
		}
	}
}

func testPerKeyCache(t *testing.T, mode sandbox.Mode, prog string, folders bool) {
	e := newCacheEnv(t, mode)
	reg := registry.New(registry.Options{DefaultTimeout: 30 * time.Second, Log: zerolog.Nop()})
	m := NewMount(MountOptions{Registry: reg, Deps: e.deps, Log: zerolog.New(e.logs), CallTimeout: time.Second,
		Sandbox: &sandbox.Options{Mode: mode, Workspace: e.ws.Dir(), Private: []string{e.data},
			Writable: []string{e.deps.Home}, MaxProcs: 256, MaxMemory: 2 << 30}})
	t.Cleanup(m.Close)
	mountEntries(t, m, "notes", fakeEntry(prog, t.Name(), `,"per_key":true`))
	tool := mountedTool(t, m, "notes", "notes__probe")
	caches := filepath.Join(e.data, "mcp-cache", "notes")
	aliceFolder, bobFolder := "", ""
	if folders {
		aliceFolder, bobFolder = "tenants/alice", "tenants/bob"
	}

	alices := filepath.Join(caches, "key-alice", "npm", "kept")
	out := probe(t, tool, as("alice", aliceFolder), `{"write":"`+alices+`"}`)
	if probed(out, "XDG_CACHE_HOME") != filepath.Join(caches, "key-alice") || probed(out, "write") != "ok" {
		t.Fatalf("alice's instance: %s", out)
	}
	out = probe(t, tool, as("bob", bobFolder), `{"read":"`+alices+`"}`)
	if probed(out, "XDG_CACHE_HOME") != filepath.Join(caches, "key-bob") {
		t.Errorf("bob's instance: %s", out)
	}
	// The listing instance started first, with the server's own.
	if fi, err := os.Stat(filepath.Join(caches, "server")); err != nil || !fi.IsDir() {
		t.Errorf("the listing instance's cache: %v, %v", fi, err)
	}
	if mode == sandbox.None {
		return
	}
	if strings.Contains(out, "WRITTEN") {
		t.Errorf("bob's instance read alice's cache: %s", out)
	}
	planted := filepath.Join(caches, "key-alice", "npm", "_npx", "planted")
	probe(t, tool, as("bob", bobFolder), `{"write":"`+planted+`"}`)
	if _, err := os.Stat(planted); err == nil {
		t.Error("bob's instance wrote into alice's cache")
	}
}

// TestCacheStartCutShort: npx killed in the middle of an install leaves
// a half-made one that every later npx would take for done: a start the
// service cut short (no answer within the connect timeout) has npx's
// installs removed before the next start, so that each attempt begins
// afresh; an attempt that ended on its own (npm rolls a failed install
// back) leaves them alone.
func TestCacheStartCutShort(t *testing.T) {
	for _, tc := range []struct {
		name string
		exit bool
		want string // the attempts after the first
		// connect is the time a start has to answer: short where the
		// service is to cut the start short, long where the server is
		// to end on its own first (on a loaded machine a process can
		// take longer than a short one only to start and exit).
		connect time.Duration
	}{
		{"killed while starting", false, "fresh", 300 * time.Millisecond},
		{"exited on its own", true, "found", 30 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newCacheEnv(t, sandbox.None)
			e.deps.ConnectTimeout = tc.connect
			env := map[string]string{"FAKE_WS": e.ws.Dir()}
			if tc.exit {
				env["FAKE_EXIT"] = "1"
			}
			s := New("half", fakeConfig(t, "npxhalf", env), e.deps)
			t.Cleanup(func() { s.Close() })
			if err := s.Begin(nil); err != nil {
				t.Fatal(err)
			}
			attempts := filepath.Join(e.ws.Dir(), "attempts")
			var lines []string
			waitUntil(t, "three attempts", func() bool {
				b, _ := os.ReadFile(attempts)
				lines = strings.Fields(string(b))
				return len(lines) >= 3
			})
			if lines[0] != "fresh" {
				t.Errorf("the first attempt found %s", lines[0])
			}
			for i, l := range lines[1:] {
				if l != tc.want {
					t.Errorf("attempt %d found %q, want %q (all: %v)", i+2, l, tc.want, lines)
				}
			}
		})
	}
}
