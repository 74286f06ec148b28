//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/netguard"
)

// readmeServers are the mcpServers entries the READMEs of four MCP
// servers on npm give, pasted as they are: npx, "-y", the package, no
// version and no "network". The filesystem server takes its allowed
// folders as arguments; ${WORKSPACE} stands for the workspace, where a
// README names a folder of the user's. Playwright's server is left out:
// its README entry makes it download a browser at its first use, which
// is not a package from the registry and takes minutes.
const readmeServers = `{
  "mcpServers": {
    "filesystem": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-filesystem", "${WORKSPACE}"]
    },
    "sequential-thinking": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-sequential-thinking"]
    },
    "memory": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-memory"]
    },
    "everything": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-everything"]
    }
  }
}`

// readmeServerNames are the servers of readmeServers.
var readmeServerNames = []string{"filesystem", "sequential-thinking", "memory", "everything"}

// npxReadyGuard bounds the wait for the four servers to list their
// tools: each npx downloads its package and its dependencies from the
// registry through the service's proxy first, which may take longer
// than the 30 s one attempt has (the server is then restarted in the
// background, and the next attempt finds what the first downloaded).
const npxReadyGuard = 3 * time.Minute

// needRegistry skips unless node and npx are installed and the npm
// registry answers this machine. It asks registry.npmjs.org by name, the
// registry the service gives the servers: it runs with an environment of
// its own, without the HOME whose .npmrc could name another.
func needRegistry(t *testing.T) {
	t.Helper()
	for _, prog := range []string{"node", "npm", "npx"} {
		if _, err := exec.LookPath(prog); err != nil {
			notTested(t, "%s is not installed", prog)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "npm", "view", "--registry=https://registry.npmjs.org/", "@modelcontextprotocol/server-memory", "version").CombinedOutput()
	if err != nil {
		notTested(t, "the npm registry does not answer this machine (npm view: %v): %s", err, out)
	}
}

// registryGuardEnv is the operator's setting this machine needs for the
// registry: none where registry.npmjs.org resolves to public addresses,
// as it does on the internet. Where the host's DNS sends it to a private
// or reserved address instead (a mirror or an intercepting proxy in the
// way), the network guard refuses it as it refuses any such address, and
// an operator opens it by name with TOOLSVC_NET_ALLOW_HOSTS; the entries
// stay as pasted.
func registryGuardEnv(t *testing.T) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", "registry.npmjs.org")
	if err != nil {
		notTested(t, "registry.npmjs.org does not resolve: %v", err)
	}
	guard, err := netguard.New(netguard.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if err := guard.Decide(netip.AddrFrom16(a.As16()).Unmap(), "registry.npmjs.org"); err != nil {
			t.Logf("this machine resolves registry.npmjs.org to %v, which the network guard refuses (%v): opened with TOOLSVC_NET_ALLOW_HOSTS=registry.npmjs.org, as its operator would", addrs, err)
			return map[string]string{"NET_ALLOW_HOSTS": "registry.npmjs.org"}
		}
	}
	return nil
}

// needEgress skips unless the machine can give a sandboxed command in
// mode a network namespace whose only way out is the service's proxy,
// as exec's allowlist tests check it: without one, a package runner gets
// no network at all, and npx cannot download.
func needEgress(t *testing.T, mode string) {
	t.Helper()
	err := startError(t, map[string]string{"EXEC_SANDBOX": mode, "EXEC_NET_ALLOW": "registry.npmjs.org:443"})
	if err != nil {
		notTested(t, "a network allowlist in %s mode: %v", mode, err)
	}
}

// waitMCPUp waits until each named server is up ("ok" in /readyz),
// through the restarts of slow attempts, and fails with /readyz and the
// service's log when they are not within npxReadyGuard.
func waitMCPUp(t *testing.T, s *testServer, names ...string) {
	t.Helper()
	deadline := time.Now().Add(npxReadyGuard)
	for {
		checks := readyChecks(t, s)
		up := true
		for _, n := range names {
			up = up && checks["mcp:"+n] == "ok"
		}
		if up {
			return
		}
		// A refusal of the registry does not mend itself: no later
		// attempt can download either.
		refused := strings.Contains(s.Logs(), `"refused":"refused: registry.npmjs.org`)
		if refused || time.Now().After(deadline) {
			why := fmt.Sprintf("did not all list their tools within %s", npxReadyGuard)
			if refused {
				why = "cannot start: the proxy refused the registry"
			}
			_, body := s.do(t, "GET", "/readyz", nil, nil)
			t.Fatalf("the servers %s %s\n/readyz: %s\nthe service's log:\n%s", strings.Join(names, ", "), why, body, s.Logs())
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// logLines returns the service's log lines, each decoded.
func logLines(t *testing.T, s *testServer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(s.Logs(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// TestMCPServersPastedFromReadmes pastes the README entries of four MCP
// servers from npm (readmeServers) into the tools file, unchanged, and
// runs the service in each sandbox mode, with a TOOLSVC_EXEC_HOME of its
// own (npx keeps its downloads in each server's own cache, below the data
// folder, all the same). Each entry is a package runner without
// "network", so each server's only network is its registry: the start-up
// lines say "only registry.npmjs.org:443" for each, no refusal names the
// registry, and yet every server downloads, starts and lists its tools
// (GET /tools has at least one of each), and one call of a tool of each
// succeeds.
//
// It does not run in parallel with the other tests: npx downloads and
// unpacks four packages in each mode, through the proxy, which takes the
// CPUs of a small machine for half a minute and would slow the tests
// that time what they check. Run before the parallel ones, it adds its
// own time to the suite's, under a minute.
func TestMCPServersPastedFromReadmes(t *testing.T) {
	needRegistry(t)
	file := writeToolsFile(t, readmeServers)
	opened := registryGuardEnv(t)
	modes := sandboxModes(t)
	if len(modes) == 0 {
		notTested(t, "no sandbox mode for stdio servers on this machine")
	}
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			needEgress(t, mode)
			begin := time.Now()
			home := filepath.Join(t.TempDir(), "home")
			env := map[string]string{"TOOLS_FILE": file, "EXEC_SANDBOX": mode, "EXEC_HOME": home}
			for k, v := range opened {
				env[k] = v
			}
			s := startServer(t, env)
			logMCPOnFailure(t, s)
			waitMCPUp(t, s, readmeServerNames...)
			t.Logf("%s: start to four servers up (npx downloading into an empty cache): %s", mode, time.Since(begin).Round(time.Millisecond))

			// Listed: at least one tool of each.
			resp, body := s.do(t, "GET", "/tools", nil, nil)
			if resp.StatusCode != 200 {
				t.Fatalf("GET /tools: %d %s", resp.StatusCode, body)
			}
			for _, n := range readmeServerNames {
				if !strings.Contains(string(body), `"`+n+`__`) {
					t.Errorf("GET /tools lists no tool of %s", n)
				}
			}

			// One call of each.
			s.writeWS(t, "hello.txt", "pasted from a README\n")
			assertContains(t, "filesystem__list_allowed_directories",
				mustSucceed(t, s.invoke(t, "filesystem__list_allowed_directories", map[string]any{})), s.Workspace)
			assertContains(t, "filesystem__list_directory",
				mustSucceed(t, s.invoke(t, "filesystem__list_directory", map[string]any{"path": s.Workspace})), "hello.txt")
			assertContains(t, "sequential-thinking__sequentialthinking",
				mustSucceed(t, s.invoke(t, "sequential-thinking__sequentialthinking", map[string]any{
					"thought": "One step is enough here.", "nextThoughtNeeded": false, "thoughtNumber": 1, "totalThoughts": 1,
				})), "thoughtNumber")
			mustSucceed(t, s.invoke(t, "memory__create_entities", map[string]any{"entities": []any{
				map[string]any{"name": "toolsvc", "entityType": "service", "observations": []string{"runs pasted README entries"}}}}))
			assertContains(t, "memory__read_graph", mustSucceed(t, s.invoke(t, "memory__read_graph", map[string]any{})), "runs pasted README entries")
			assertContains(t, "everything__echo", mustSucceed(t, s.invoke(t, "everything__echo", map[string]any{"message": "pasted as is"})), "pasted as is")

			// The log: each server's lines (starting, up) say its network
			// is its registry, and nothing it asked of the registry was
			// refused. Refusals of other hosts are shown, not failed: a
			// server may try more than the registry, which the allowlist
			// is there to stop.
			// On a busy machine npx can outlast the first attempt's
			// time to answer: that attempt's line says down, and a later
			// attempt's "connected" line says the server came up.
			nets := map[string][]string{}
			for _, m := range logLines(t, s) {
				name, _ := m["mcp_server"].(string)
				if nw, ok := m["network"].(string); ok && name != "" {
					nets[name] = append(nets[name], fmt.Sprint(m["state"])+": "+nw)
				}
				if m["message"] == "mcp server: connected" && name != "" {
					nets[name] = append(nets[name], "connected")
				}
				if r, ok := m["refused"].(string); ok {
					if strings.Contains(r, "registry.npmjs.org") {
						t.Errorf("the proxy refused a connection of %s to the registry: %s", name, r)
					} else {
						t.Logf("the proxy refused a connection of %s: %s", name, r)
					}
				}
			}
			for _, n := range readmeServerNames {
				lines := nets[n]
				if !slices.Contains(lines, "up: only registry.npmjs.org:443") &&
					!(slices.Contains(lines, "down: only registry.npmjs.org:443") && slices.Contains(lines, "connected")) {
					t.Errorf("%s's start-up lines, as they name its network: %q; want \"up: only registry.npmjs.org:443\" (or down, then connected)", n, lines)
				}
				for _, l := range lines {
					if l != "connected" && !strings.HasSuffix(l, ": only registry.npmjs.org:443") {
						t.Errorf("%s's network, as a line of the log says it: %q, want only registry.npmjs.org:443", n, l)
					}
				}
			}
			if strings.Contains(s.Logs(), "cannot be its only network here") {
				t.Errorf("a server got no network instead of its registry:\n%s", s.Logs())
			}
		})
	}
}
