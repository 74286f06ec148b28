//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/registry"
)

// docEntry returns the mcpServers entry named server of the JSON that
// docs/custom-tools.md holds between <!-- e2e:<block>:begin --> and
// <!-- e2e:<block>:end -->, a json block or a shell block that writes it
// to a file: the tests below paste the entries the page gives, so that
// the page cannot drift from what was run.
func docEntry(t *testing.T, block, server string) map[string]any {
	t.Helper()
	begin, end := "<!-- e2e:"+block+":begin -->", "<!-- e2e:"+block+":end -->"
	_, rest, ok := strings.Cut(readDoc(t, "docs/custom-tools.md"), begin)
	if !ok {
		t.Fatalf("docs/custom-tools.md has no %s", begin)
	}
	body, _, ok := strings.Cut(rest, end)
	if !ok {
		t.Fatalf("docs/custom-tools.md: %s is not closed by %s", begin, end)
	}
	if i, j := strings.Index(body, "{"), strings.LastIndex(body, "}"); i >= 0 && j > i {
		body = body[i : j+1]
	}
	var file struct {
		MCPServers map[string]map[string]any `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(body), &file); err != nil {
		t.Fatalf("docs/custom-tools.md: the %s block is not JSON: %v\n%s", block, err, body)
	}
	e, ok := file.MCPServers[server]
	if !ok {
		t.Fatalf("docs/custom-tools.md: the %s block has no server %q", block, server)
	}
	return e
}

// entryFile writes a tools file holding the one entry.
func entryFile(t *testing.T, server string, entry map[string]any) string {
	t.Helper()
	b, err := json.MarshalIndent(map[string]any{"mcpServers": map[string]any{server: entry}}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return writeToolsFile(t, string(b))
}

// entryArgs returns an entry's args as strings.
func entryArgs(t *testing.T, entry map[string]any) []string {
	t.Helper()
	raw, _ := entry["args"].([]any)
	var out []string
	for _, a := range raw {
		s, ok := a.(string)
		if !ok {
			t.Fatalf("an argument of the entry is not a string: %v", a)
		}
		out = append(out, s)
	}
	return out
}

// needPlaywright skips unless what the documented Playwright entry runs
// is here: the npm registry (npx downloads @playwright/mcp), the browser
// it names, and a Node.js that package accepts.
func needPlaywright(t *testing.T, chromium string) {
	t.Helper()
	needRegistry(t)
	if _, err := exec.LookPath(chromium); err != nil {
		notTested(t, "Chromium is not installed at %s (Debian package chromium; scripts/test.sh installs it): %v", chromium, err)
	}
	out, err := exec.Command("node", "--version").Output()
	if err != nil {
		notTested(t, "node --version: %v", err)
	}
	v := strings.TrimSpace(string(out))
	major, _ := strconv.Atoi(strings.TrimPrefix(strings.Split(v, ".")[0], "v"))
	if major < 20 {
		notTested(t, "@playwright/mcp needs Node.js 20 or newer; node is %s", v)
	}
}

// loopbackSite is an HTTP server of the test on 127.0.0.1 with one page,
// which records the paths it was asked for.
type loopbackSite struct {
	srv   *httptest.Server
	port  int
	mu    sync.Mutex
	paths []string
}

const (
	sitePageTitle  = "toolsvc loopback page"
	sitePageMarker = "The marker on this page is zebra-42."
)

func newLoopbackSite(t *testing.T) *loopbackSite {
	t.Helper()
	s := &loopbackSite{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.paths = append(s.paths, r.URL.Path)
		s.mu.Unlock()
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, "<!doctype html><html><head><title>%s</title></head><body><h1>Hello from the test</h1><p>%s</p></body></html>", sitePageTitle, sitePageMarker)
	}))
	t.Cleanup(s.srv.Close)
	s.port = s.srv.Listener.Addr().(*net.TCPAddr).Port
	return s
}

// asked reports whether the site was asked for path.
func (s *loopbackSite) asked(path string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Contains(s.paths, path)
}

// snapshotFile finds the page snapshot a browser_navigate answer names.
var snapshotFile = regexp.MustCompile(`\[Snapshot\]\(([^)]+\.yml)\)`)

// TestMCPPlaywright pastes the Playwright entries of docs/custom-tools.md
// into the real service, run as its binary, and drives Chromium through
// them, in each sandbox mode:
//
//   - bwrap: the entry with a list of hosts, to which the test adds the
//     localhost:PORT of a loopback server of its own, with loopback
//     opened for that name by TOOLSVC_NET_ALLOW_HOSTS=localhost as an
//     operator would. browser_navigate loads the page (its title in the
//     answer), browser_snapshot returns its text, and the snapshot file
//     the answer names is in the workspace's playwright/ (the entry's
//     --output-dir). The same server named 127.0.0.1, not on the list, is
//     refused: the answer and the log name the host and the rule, and the
//     server is never asked.
//   - landlock: the same entry cannot start Chromium (its profile lock
//     needs a Unix socket, which Landlock mode refuses a server with a
//     list of hosts), and the call's error says so, as the page does; the
//     page's "network": true entry loads the page.
//
// The modes share one data folder, as an operator's service keeps it
// between starts: the server's package cache is there, so npx downloads
// @playwright/mcp once. It does not run
// in parallel with other tests: Chromium and npx take the CPUs of a small
// machine for seconds, which would slow the tests that time what they
// check.
func TestMCPPlaywright(t *testing.T) {
	listed := docEntry(t, "playwright", "playwright")
	unlisted := docEntry(t, "playwright-landlock", "playwright")
	args := entryArgs(t, listed)
	chromium := ""
	if i := slices.Index(args, "--executable-path"); i >= 0 && i+1 < len(args) {
		chromium = args[i+1]
	}
	if chromium == "" {
		t.Fatalf("the documented entry names no --executable-path: %q", args)
	}
	if network, _ := listed["network"].([]any); !slices.Contains(network, any("registry.npmjs.org")) {
		t.Fatalf("the documented entry's network %v lacks registry.npmjs.org, which npx needs once the entry names hosts", listed["network"])
	}
	if unlisted["network"] != true || slices.Contains(entryArgs(t, unlisted), "--proxy-server") {
		t.Fatalf("the documented Landlock entry is not \"network\": true without --proxy-server: %v", unlisted)
	}
	needPlaywright(t, chromium)
	modes := sandboxModes(t)
	if len(modes) == 0 {
		notTested(t, "no sandbox mode for stdio servers on this machine")
	}
	site := newLoopbackSite(t)
	page := fmt.Sprintf("http://localhost:%d/", site.port)
	// The entry as a user who wants the browser on that page completes
	// it: the page's host added to the list.
	withSite := map[string]any{}
	for k, v := range listed {
		withSite[k] = v
	}
	withSite["network"] = append(slices.Clone(listed["network"].([]any)), fmt.Sprintf("localhost:%d", site.port))
	listedFile := entryFile(t, "playwright", withSite)
	unlistedFile := entryFile(t, "playwright", unlisted)
	home := filepath.Join(t.TempDir(), "home")
	data := filepath.Join(t.TempDir(), "data")
	guard := map[string]string{"NET_ALLOW_HOSTS": "localhost"}
	if opened := registryGuardEnv(t)["NET_ALLOW_HOSTS"]; opened != "" {
		guard["NET_ALLOW_HOSTS"] += "," + opened
	}

	start := func(t *testing.T, mode, file string, guard map[string]string) *testServer {
		t.Helper()
		env := map[string]string{"TOOLS_FILE": file, "EXEC_SANDBOX": mode, "EXEC_HOME": home, "DATA_DIR": data}
		for k, v := range guard {
			env[k] = v
		}
		s := startServer(t, env, asProcess())
		logMCPOnFailure(t, s)
		waitMCPUp(t, s, "playwright")
		return s
	}
	loads := func(t *testing.T, s *testServer) {
		t.Helper()
		nav := mustSucceed(t, s.invoke(t, "playwright__browser_navigate", map[string]any{"url": page}))
		assertContains(t, "browser_navigate's answer", nav, "Page URL: "+page, "Page Title: "+sitePageTitle)
		snap := mustSucceed(t, s.invoke(t, "playwright__browser_snapshot", map[string]any{}))
		assertContains(t, "browser_snapshot's answer", snap, sitePageMarker)
		m := snapshotFile.FindStringSubmatch(nav)
		if m == nil {
			t.Errorf("browser_navigate's answer names no snapshot file:\n%s", nav)
			return
		}
		if !strings.HasPrefix(m[1], "playwright/") {
			t.Errorf("the snapshot file %s is not in playwright/, where the entry's --output-dir puts it", m[1])
		}
		if data, err := os.ReadFile(filepath.Join(s.Workspace, m[1])); err != nil || !strings.Contains(string(data), sitePageMarker) {
			t.Errorf("the snapshot file %s in the workspace: %v, %q", m[1], err, data)
		}
	}

	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			needEgress(t, mode)
			begin := time.Now()
			s := start(t, mode, listedFile, guard)
			t.Logf("%s: start to server up: %s", mode, time.Since(begin).Round(time.Millisecond))

			if mode == "landlock" {
				res := s.invoke(t, "playwright__browser_navigate", map[string]any{"url": page})
				if res.Status == registry.StatusSuccess {
					t.Errorf("Chromium started under Landlock with a list of hosts, which docs/custom-tools.md says it cannot: update the page (\"Only under bubblewrap\"). Answer:\n%s", res.Result)
				} else {
					assertContains(t, "the error of browser_navigate under Landlock with a list of hosts", res.Result, "socket() failed: Operation not permitted")
				}
				s.Stop(t)
				// The entry the page gives for Landlock: every address,
				// no proxy.
				s = start(t, mode, unlistedFile, nil)
				loads(t, s)
				t.Logf("%s: both services, start to the page loaded with \"network\": true: %s", mode, time.Since(begin).Round(time.Millisecond))
				return
			}

			loads(t, s)
			t.Logf("%s: start to the page loaded: %s", mode, time.Since(begin).Round(time.Millisecond))

			// The same server under a name the list does not have.
			refusedURL := fmt.Sprintf("http://127.0.0.1:%d/not-listed", site.port)
			// The proxy's refusal names the host and the rule ("no allow
			// rule matches", and for an address a hint at CIDR rules).
			rule := fmt.Sprintf("refused: 127.0.0.1:%d (no allow rule matches", site.port)
			res := s.invoke(t, "playwright__browser_navigate", map[string]any{"url": refusedURL})
			assertContains(t, "browser_navigate's answer for a host not on the list", res.Result, rule)
			if site.asked("/not-listed") {
				t.Errorf("the page at %s, whose host is not on the list, was reached", refusedURL)
			}
			found := false
			for _, m := range logLines(t, s) {
				r, _ := m["refused"].(string)
				found = found || (m["mcp_server"] == "playwright" && strings.HasPrefix(r, rule))
			}
			if !found {
				t.Errorf("no log line names the refusal %q with the server", rule)
			}
			t.Logf("%s: start to the refusal checked: %s", mode, time.Since(begin).Round(time.Millisecond))
		})
	}
}

// TestMCPPythonServer runs the Python entry of docs/custom-tools.md as
// the page gives it: the stdlib-only server testdata/mcp_clock.py
// installed under /opt (in a folder of its own there, removed after),
// started by the system's /usr/bin/python3, in each sandbox mode, with no
// network. Its tool answers, and its error (an unknown time zone) is the
// call's error.
func TestMCPPythonServer(t *testing.T) {
	t.Parallel()
	entry := docEntry(t, "python", "clock")
	python, _ := entry["command"].(string)
	args := entryArgs(t, entry)
	if len(args) != 1 || !strings.HasPrefix(args[0], "/opt/") {
		t.Fatalf("the documented entry's args are %q, want one script under /opt", args)
	}
	if _, err := exec.LookPath(python); err != nil {
		notTested(t, "%s is not installed (Debian package python3): %v", python, err)
	}
	modes := sandboxModes(t)
	if len(modes) == 0 {
		notTested(t, "no sandbox mode for stdio servers on this machine")
	}
	dir, err := os.MkdirTemp("/opt", "toolsvc-e2e-")
	if err != nil {
		notTested(t, "the place the page installs the server, /opt, is not writable here (%v): run as root", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	script, err := os.ReadFile(filepath.Join("testdata", "mcp_clock.py"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	installed := filepath.Join(dir, filepath.Base(args[0]))
	if err := os.WriteFile(installed, script, 0o755); err != nil {
		t.Fatal(err)
	}
	entry["args"] = []string{installed}
	file := entryFile(t, "clock", entry)
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			begin := time.Now()
			s := startServer(t, map[string]string{"TOOLS_FILE": file, "EXEC_SANDBOX": mode}, asProcess())
			logMCPOnFailure(t, s)
			waitMCPUp(t, s, "clock")
			assertContains(t, "clock__now", mustSucceed(t, s.invoke(t, "clock__now", map[string]any{"timezone": "Asia/Tokyo"})), "Asia/Tokyo: ", "+09:00")
			mustFail(t, s.invoke(t, "clock__now", map[string]any{"timezone": "Mars/Olympus_Mons"}), "tool_error", "unknown time zone")
			if strings.Contains(s.Logs(), `"refused"`) {
				t.Errorf("a server with no network asked for one:\n%s", s.Logs())
			}
			t.Logf("%s: start to both calls answered: %s", mode, time.Since(begin).Round(time.Millisecond))
		})
	}
}
