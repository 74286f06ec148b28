//go:build linux

package mcpmount

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/sandbox"
)

// TestLikelyCauses: a stdio server that does not start gets an error that
// names the likely cause from what it printed and how it ended: the
// network (npm's EAI_AGAIN, pip's "Failed to establish a new
// connection", or npx waiting for a download with the network off), a
// program the sandbox cannot run (exit 127; where the service finds it,
// under HOME as nvm installs it), a file in a folder the sandbox hides
// (/root, /tmp); and none when nothing points at one.
func TestLikelyCauses(t *testing.T) {
	exe := mustExe(t)
	bin := t.TempDir()
	for _, name := range []string{"npx", "uvx"} {
		if err := os.Symlink(exe, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	// A HOME where nvm installed a program, which the service finds on
	// its PATH but a server's sandbox does not show.
	home := t.TempDir()
	nvm := filepath.Join(home, ".nvm", "versions", "node", "v22.1.0", "bin")
	if err := os.MkdirAll(nvm, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(nvm, "fakenode"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	hostEnv := []string{"PATH=" + nvm + ":/usr/bin:/bin", "HOME=" + home}
	// The sandbox's PATH, without HOME's folders.
	sandboxPath := map[string]string{"PATH": "/usr/bin:/bin"}
	fake := func(mode string, command string, args ...string) Config {
		return Config{Type: TypeStdio, Command: command, Args: args, Env: map[string]string{fakeVar: mode}}
	}
	sh := func(script string) Config {
		return Config{Type: TypeStdio, Command: "/bin/sh", Args: []string{"-c", script}, Env: sandboxPath}
	}
	cases := []struct {
		name    string
		cfg     Config
		connect time.Duration
		want    []string
		not     []string
	}{
		{"npm without network", offline(fake("npmnet", filepath.Join(bin, "npx"), "-y", "@modelcontextprotocol/server-filesystem", "/data")), 0, []string{
			`likely cause: the server needs the network, which is off for it (its stderr says "npm error code EAI_AGAIN")`,
			"npm install -g @modelcontextprotocol/server-filesystem", `"network" with the hosts it needs, such as ["registry.npmjs.org"]`}, nil},
		{"npm with its registry only", fake("npmnet", filepath.Join(bin, "npx"), "-y", "@modelcontextprotocol/server-filesystem", "/data"), 0, []string{
			`likely cause: the server could not reach what it needs: its network is only registry.npmjs.org:443 (its stderr says "npm error code EAI_AGAIN")`,
			`add the hosts it needs to the entry's "network"`}, nil},
		{"pip without network", offline(fake("pipnet", filepath.Join(bin, "uvx"), "mcp-server-fetch")), 0, []string{
			`likely cause: the server needs the network, which is off for it (its stderr says "...`, `Failed to establish a new connection: [Errno -3] Temporary failure in name resolution`, "pip install mcp-server-fetch"}, nil},
		{"network on but unreachable", func() Config {
			c := fake("npmnet", filepath.Join(bin, "npx"), "-y", "@scope/pkg")
			c.Network = Network{On: true, Given: true}
			return c
		}(), 0, []string{`although the entry has "network": true`, "EAI_AGAIN", "npm install -g @scope/pkg"}, nil},
		{"npx waiting for the network", offline(fake("hang", filepath.Join(bin, "npx"), "-y", "@modelcontextprotocol/server-filesystem", "/data")), time.Second, []string{
			"no answer to initialize within 1s (likely cause: the server needs the network, which is off for it (npx downloads @modelcontextprotocol/server-filesystem when it starts)"},
			[]string{"did not speak MCP"}},
		{"a program under HOME", sh("exec fakenode --stdio"), 0, []string{
			"likely cause: the program fakenode is not in the sandbox: the service finds it at " + filepath.Join(nvm, "fakenode") + ", under the service's HOME (" + home + ")",
			"install it system-wide", `"command": "/usr/local/bin/fakenode"`}, nil},
		{"a program nowhere", sh("exec no-such-program-xyz"), 0, []string{
			"likely cause: the program no-such-program-xyz is not installed where the server runs (nor on the service's PATH)"}, nil},
		{"the command under HOME, not on the sandbox's PATH", Config{Type: TypeStdio, Command: "fakenode", Env: sandboxPath}, 0, []string{
			`"fakenode" was not found in PATH`, "likely cause: it is at " + filepath.Join(nvm, "fakenode") + ", under the service's HOME"}, nil},
		{"a file under /root", Config{Type: TypeStdio, Command: "/bin/cat", Args: []string{"/root/toolsvc-test-no-such/server.js"}}, 0, []string{
			"likely cause: /root/toolsvc-test-no-such/server.js lies under /root, which the sandbox hides from servers", "${WORKSPACE}"}, nil},
		{"a module under /tmp", sh(`echo "Error: Cannot find module '/tmp/toolsvc-test-gone/dist/index.js'" >&2; exit 1`), 0, []string{
			"likely cause: /tmp/toolsvc-test-gone/dist/index.js lies under /tmp"}, nil},
		{"no cause to name", sh("echo the config is invalid >&2; exit 2"), 0, []string{"exit status 2", "the config is invalid"}, []string{"likely cause"}},
		{"silent hang", fake("hang", exe), time.Second, []string{"did not speak MCP on its stdout"}, []string{"likely cause"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, sandbox.None)
			e.deps.Environ = func() []string { return hostEnv }
			e.deps.ConnectTimeout = 20 * time.Second
			if tc.connect > 0 {
				e.deps.ConnectTimeout = tc.connect
			}
			s := New("srv", tc.cfg, e.deps)
			defer s.Close()
			err := s.Start(context.Background())
			if err == nil {
				t.Fatal("Start succeeded")
			}
			t.Logf("Start: %v", err)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("lacks %q", w)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(err.Error(), w) {
					t.Errorf("holds %q", w)
				}
			}
		})
	}
}

// offline is c with "network": false given, which a package runner's
// entry needs to have no network at all (its default is its registry).
func offline(c Config) Config {
	c.Network = Network{Given: true}
	return c
}
