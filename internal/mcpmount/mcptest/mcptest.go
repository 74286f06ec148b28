// Package mcptest gives tests the MCP servers from npm they run against:
// @modelcontextprotocol/server-everything and server-memory at pinned
// versions, installed once into a cache folder reused between runs, and
// server-everything's Streamable HTTP mode started on a loopback port.
package mcptest

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/countbot/toolsvc/internal/npmtest"
)

// Packages are the MCP servers from npm the tests run, at pinned versions.
var Packages = []string{
	"@modelcontextprotocol/server-everything@2026.8.31",
	"@modelcontextprotocol/server-memory@2026.8.31",
}

// NpmServers installs Packages once into npmtest's cache folder and
// returns its node_modules. Without node and npm the test is skipped,
// except under CI (CI=true), where it fails: the servers must be tested
// there.
func NpmServers(t testing.TB) string {
	t.Helper()
	return npmtest.Install(t, Packages...)
}

// EverythingJS is server-everything's entry point in node_modules nm.
func EverythingJS(nm string) string {
	return filepath.Join(nm, "@modelcontextprotocol", "server-everything", "dist", "index.js")
}

// MemoryJS is server-memory's entry point in node_modules nm.
func MemoryJS(nm string) string {
	return filepath.Join(nm, "@modelcontextprotocol", "server-memory", "dist", "index.js")
}

// EverythingHTTP starts server-everything in its Streamable HTTP mode on
// a free loopback port, waits until it says it listens, and returns its
// port. It is stopped when the test ends.
func EverythingHTTP(t testing.TB, nm string) int {
	t.Helper()
	port := FreePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "node", EverythingJS(nm), "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	listening := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			if !sent && strings.Contains(sc.Text(), "listening on port") {
				listening <- true
				sent = true
			}
		}
		if !sent {
			listening <- false
		}
	}()
	if !<-listening {
		t.Fatal("server-everything streamableHttp did not start")
	}
	return port
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// CopyModules copies node_modules nm into the folder dir (hard links where
// the file system allows) and returns the copy: a sandbox that hides the
// cache folder (bubblewrap hides /root and /home) still sees the servers
// in the workspace, where an operator would install them too.
func CopyModules(t testing.TB, nm, dir string) string {
	t.Helper()
	dst := filepath.Join(dir, "node_modules")
	if out, err := exec.Command("cp", "-al", nm, dst).CombinedOutput(); err != nil {
		os.RemoveAll(dst)
		if out, err := exec.Command("cp", "-a", nm, dst).CombinedOutput(); err != nil {
			t.Fatalf("copy %s: %v: %s", nm, err, out)
		}
		_ = out
	}
	return dst
}

// SystemDir returns a fresh folder under /opt, removed when the test
// ends, for the programs a key's own sandbox must run. Such a sandbox
// shows a key its folder, its HOME and the system, nothing else of the
// machine's writable places: Landlock grants the system folders (/opt
// among them), bubblewrap shows the system but hides /tmp, /root and
// /home. So a server every key runs belongs there, as an operator would
// install it (under /usr/local or /opt). Where /opt cannot be written
// (not root), the test is skipped, except under CI (CI=true), where it
// fails.
func SystemDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("/opt", "toolsvc-test-")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("a folder under /opt for programs every sandbox may run: %v", err)
		}
		t.Skipf("NOT TESTED in keys' own sandboxes: no folder under /opt for the programs they run: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
