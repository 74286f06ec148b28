//go:build linux

package main

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/mcpmount/mcptest"
)

// npmPassThrough serves npm's registry protocol on loopback over plain
// HTTP by passing each request on to registry.npmjs.org, with the
// tarball addresses in the metadata pointed back at itself, so that
// every package npx downloads is a request it logs. Conditional requests
// pass too, so that npm's revalidation of its cached metadata is what it
// is against the real registry. It returns its address for npm
// ("http://localhost:PORT/"), the host the entry's network names
// ("localhost:PORT") and the log.
func npmPassThrough(t *testing.T) (registryURL, host string, log *requestLog) {
	t.Helper()
	log = &requestLog{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host = "localhost:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	registryURL = "http://" + host + "/"
	client := &http.Client{Timeout: 2 * time.Minute}
	srv := httptest.NewUnstartedServer(log.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := http.NewRequestWithContext(r.Context(), r.Method, "https://registry.npmjs.org"+r.URL.RequestURI(), nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, h := range []string{"Accept", "If-None-Match", "If-Modified-Since"} {
			if v := r.Header.Get(h); v != "" {
				req.Header.Set(h, v)
			}
		}
		resp, err := client.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for _, h := range []string{"Content-Type", "ETag", "Last-Modified", "Cache-Control"} {
			if v := resp.Header.Get(h); v != "" {
				w.Header().Set(h, v)
			}
		}
		if !strings.Contains(resp.Header.Get("Content-Type"), "json") {
			w.WriteHeader(resp.StatusCode)
			_, _ = io.Copy(w, resp.Body)
			return
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(bytes.ReplaceAll(body, []byte("https://registry.npmjs.org/"), []byte(registryURL)))
	})))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return registryURL, host, log
}

// tarballs are the package downloads among requests.
func tarballs(requests []string) []string {
	var out []string
	for _, r := range requests {
		if strings.Contains(r, "/-/") && strings.HasSuffix(r, ".tgz") {
			out = append(out, r)
		}
	}
	return out
}

// TestMCPPackageCacheKeptAcrossRestarts: an npx entry, without
// TOOLSVC_EXEC_HOME (so that each start of the server has a fresh HOME),
// downloads its package and dependencies at the service's first start,
// into the server's own cache below the data folder; the service is
// stopped and started again on the same data folder, and the server
// comes up again without downloading any package: the registry, a
// loopback pass-through to registry.npmjs.org that logs every request,
// gets no tarball request the second time, in each sandbox mode. (npx
// still asks the registry for the package's metadata at each start,
// which npm revalidates against its cache: that is not a download of
// the package.)
func TestMCPPackageCacheKeptAcrossRestarts(t *testing.T) {
	needRegistry(t)
	modes := sandboxModes(t)
	if len(modes) == 0 {
		notTested(t, "no sandbox mode for stdio servers on this machine")
	}
	registryURL, host, reqs := npmPassThrough(t)
	file := writeToolsFile(t, `{"mcpServers": {"everything": {
  "command": "npx",
  "args": ["-y", `+mustJSON(mcptest.Packages[0])+`],
  "env": {"npm_config_registry": `+mustJSON(registryURL)+`},
  "network": [`+mustJSON(host)+`]
}}}`)
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			needEgress(t, mode)
			base := t.TempDir()
			env := map[string]string{"TOOLS_FILE": file, "EXEC_SANDBOX": mode,
				"NET_ALLOW_HOSTS": "localhost", // the operator opens loopback for that name
				"WORKSPACE":       filepath.Join(base, "ws"), "DATA_DIR": filepath.Join(base, "data")}
			cache := filepath.Join(base, "data", "mcp-cache", "everything", "server")

			before := len(reqs.all())
			begin := time.Now()
			s := startServer(t, env)
			logMCPOnFailure(t, s)
			waitMCPUp(t, s, "everything")
			assertContains(t, "everything__echo", mustSucceed(t, s.invoke(t, "everything__echo", map[string]any{"message": "first start"})), "first start")
			first := reqs.all()[before:]
			t.Logf("%s: first start up in %s, %d registry requests, %d of them packages", mode, time.Since(begin).Round(time.Millisecond), len(first), len(tarballs(first)))
			if len(tarballs(first)) == 0 {
				t.Fatalf("the first start downloaded no package through the registry: %q\n%s", first, s.Logs())
			}
			for _, sub := range []string{"npm/_cacache", "npm/_npx"} {
				if fi, err := os.Stat(filepath.Join(cache, sub)); err != nil || !fi.IsDir() {
					t.Errorf("the server's cache holds no %s: %v", sub, err)
				}
			}
			if strings.Contains(s.Logs(), `"refused"`) {
				t.Errorf("the proxy refused a connection of the server:\n%s", s.Logs())
			}
			s.Stop(t)

			before = len(reqs.all())
			begin = time.Now()
			s = startServer(t, env)
			logMCPOnFailure(t, s)
			waitMCPUp(t, s, "everything")
			assertContains(t, "everything__echo", mustSucceed(t, s.invoke(t, "everything__echo", map[string]any{"message": "second start"})), "second start")
			second := reqs.all()[before:]
			t.Logf("%s: second start up in %s, registry requests: %q", mode, time.Since(begin).Round(time.Millisecond), second)
			if got := tarballs(second); len(got) > 0 {
				t.Errorf("the second start downloaded %d packages again: %q", len(got), got)
			}
		})
	}
}

// unnamed is out without the paths below dir, which the errors of the
// attempts on it name.
func unnamed(out, dir string) string {
	return regexp.MustCompile(regexp.QuoteMeta(dir)+`[^\s':]*`).ReplaceAllString(out, "PATH")
}

// TestMCPPackageCacheConfined: each stdio server's cache is its own. A
// server (started by a shell that tries the other's cache first, then
// runs server-everything) can neither list, read nor write the cache of
// another server, nor list the caches or the data folder; it can write
// its own; and exec's commands reach no cache at all, in each sandbox
// mode. The owner planted a file in its cache at an earlier start of the
// service, as a cached package would be.
func TestMCPPackageCacheConfined(t *testing.T) {
	modes := sandboxModes(t)
	if len(modes) == 0 {
		notTested(t, "no sandbox mode for stdio servers on this machine")
	}
	ws, nm := npmWorkspace(t)
	everything := mustJSON(mcptest.EverythingJS(nm))
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			caches := filepath.Join(data, "mcp-cache")
			owners := filepath.Join(caches, "owner", "server")
			secret := filepath.Join(owners, "npm", "owner-secret")
			owner := `"owner": {"command": "/bin/sh", "args": ["-c", "mkdir -p \"$npm_config_cache\" && echo OWNER-SECRET > \"$npm_config_cache/owner-secret\" && exec node \"$0\"", ` + everything + `]}`
			env := map[string]string{"EXEC_SANDBOX": mode, "WORKSPACE": ws, "DATA_DIR": data,
				"TOOLS_FILE": writeToolsFile(t, `{"mcpServers": {`+owner+`}}`)}
			s := startServer(t, env)
			logMCPOnFailure(t, s)
			waitMCPUp(t, s, "owner")
			s.Stop(t)
			if b, err := os.ReadFile(secret); err != nil || string(b) != "OWNER-SECRET\n" {
				t.Fatalf("the owner did not keep its file in its cache: %q, %v", b, err)
			}

			report := filepath.Join(ws, "intruder-"+mode+".txt")
			attack := strings.NewReplacer("OWN", owners, "CACHES", caches, "DATA", data, "REPORT", report).Replace(
				`{ echo "mine: $XDG_CACHE_HOME"; ` +
					`ls -a OWN/npm && echo LISTED-OWNER; cat OWN/npm/owner-secret && echo READ-OWNER; ` +
					`echo evil > OWN/npm/planted && echo WROTE-OWNER; mkdir OWN/npm/_npx && echo PLANTED-OWNER; ` +
					`ls -a CACHES; ls -a DATA; ` +
					`echo mine > "$XDG_CACHE_HOME/mine" && echo WROTE-MINE; } > REPORT 2>&1; exec node "$0"`)
			intruder := `"intruder": {"command": "/bin/sh", "args": ["-c", ` + mustJSON(attack) + `, ` + everything + `]}`
			env["TOOLS_FILE"] = writeToolsFile(t, `{"mcpServers": {`+owner+`, `+intruder+`}}`)
			s = startServer(t, env)
			logMCPOnFailure(t, s)
			waitMCPUp(t, s, "owner", "intruder")
			b, err := os.ReadFile(report)
			if err != nil {
				t.Fatal(err)
			}
			out := string(b)
			t.Logf("the intruder's attempts:\n%s", out)
			assertContains(t, "the intruder's report", out, "mine: "+filepath.Join(caches, "intruder", "server"), "WROTE-MINE")
			for _, leak := range []string{"OWNER-SECRET", "LISTED-OWNER", "READ-OWNER", "WROTE-OWNER", "PLANTED-OWNER", "audit_logs"} {
				if strings.Contains(out, leak) {
					t.Errorf("the intruder got %q", leak)
				}
			}
			// The paths it tried are named in its errors; beyond them,
			// "owner" is what a listing of the caches or of the owner's
			// would show. Under bubblewrap the data folder is an empty
			// tmpfs holding the intruder's own cache's mount point:
			// "intruder" may be listed, never "owner".
			if strings.Contains(unnamed(out, owners), "owner") {
				t.Errorf("the intruder listed the owner's cache")
			}

			res := s.invoke(t, "exec", execArgs(strings.NewReplacer("OWN", owners, "CACHES", caches).Replace(
				`ls -a OWN/npm; cat OWN/npm/owner-secret; echo evil > OWN/npm/planted-by-exec; ls -a CACHES; echo done`)))
			if !strings.Contains(res.Result, "done") {
				t.Fatalf("exec: %s", res.Result)
			}
			if r := unnamed(res.Result, owners); strings.Contains(r, "OWNER-SECRET") || strings.Contains(r, "owner") || strings.Contains(r, "intruder") {
				t.Errorf("exec reached a cache: %s", res.Result)
			}
			for _, p := range []string{"planted", "planted-by-exec", "_npx"} {
				if _, err := os.Lstat(filepath.Join(owners, "npm", p)); err == nil {
					t.Errorf("%s was made in the owner's cache", p)
				}
			}
			if b, err := os.ReadFile(secret); err != nil || string(b) != "OWNER-SECRET\n" {
				t.Errorf("the owner's file changed: %q, %v", b, err)
			}
		})
	}
}
