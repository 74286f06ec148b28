package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/countbot/toolsvc/internal/sandbox"
)

// mirror is a loopback HTTP server that counts the requests it gets.
func mirror(t *testing.T) (port int, hits *atomic.Int64) {
	t.Helper()
	hits = &atomic.Int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "hello from the mirror")
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().(*net.TCPAddr).Port, hits
}

// startAllowlisted starts the service with a network allowlist for exec,
// or skips where this machine cannot give commands a network namespace
// (the start-up error says so).
func startAllowlisted(t *testing.T, env map[string]string) *testServer {
	t.Helper()
	if err := startError(t, env); err != nil {
		if errors.Is(err, sandbox.ErrEgressUnavailable) || strings.Contains(err.Error(), "network allowlist is not available") {
			if os.Getenv("CI") == "true" {
				t.Fatalf("the allowlist must be tested under CI: %v", err)
			}
			t.Skipf("NOT TESTED: %v", err)
		}
	}
	return startServer(t, env)
}

// TestExecNetAllow: with TOOLSVC_EXEC_NET_ALLOW, a command reaches a
// listed host through the service's proxy and nothing else: an unlisted
// host, the same server by its IP address, a direct connection around the
// proxy and a DNS query all fail, the mirror counts no request of theirs,
// and the result names each refusal and its rule.
func TestExecNetAllow(t *testing.T) {
	t.Parallel()
	port, hits := mirror(t)
	s := startAllowlisted(t, map[string]string{
		"EXEC_NET_ALLOW":  fmt.Sprintf("localhost:%d", port),
		"NET_ALLOW_HOSTS": "localhost", // the operator opens loopback for that name
	})
	out := mustSucceed(t, s.invoke(t, "exec", map[string]string{"command": fmt.Sprintf("curl -sS http://localhost:%d/", port)}))
	if !strings.Contains(out, "hello from the mirror") || hits.Load() != 1 {
		t.Fatalf("the listed host through the proxy: %s (mirror hits %d)", out, hits.Load())
	}
	for _, c := range []struct{ cmd, want string }{
		{fmt.Sprintf("curl -sS http://127.0.0.1:%d/", port), "an IP address is allowed only by a CIDR rule"},
		{"curl -sS http://example.com/", "refused: example.com:80 (no allow rule matches)"},
		{fmt.Sprintf("curl -sS --noproxy '*' http://127.0.0.1:%d/", port), "COMMAND FAILED"},
		{fmt.Sprintf("python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", %d), 3)'", port), "COMMAND FAILED"},
		{"getent hosts example.com", "COMMAND FAILED"},
	} {
		before := hits.Load()
		out := s.invoke(t, "exec", map[string]string{"command": c.cmd}).Result
		if !strings.Contains(out, c.want) {
			t.Errorf("%s: %s\nwant it to say %q", c.cmd, out, c.want)
		}
		if hits.Load() != before {
			t.Errorf("%s reached the mirror: %s", c.cmd, out)
		}
	}
	out = s.invoke(t, "exec", map[string]string{"command": "curl -sS http://example.com/"}).Result
	if !strings.Contains(out, "NETWORK: the allowlist refused 1 connection(s)") {
		t.Errorf("no refusal note in the result: %s", out)
	}
	desc := s.toolDescription(t, "exec")
	if !strings.Contains(desc, fmt.Sprintf("only to localhost:%d", port)) {
		t.Errorf("exec's description does not name the allowlist: %s", desc)
	}
}

// TestExecNetAllowGuard: a listed name that resolves to loopback is still
// refused by the network guard when the operator has not opened it, and
// the refusal says so.
func TestExecNetAllowGuard(t *testing.T) {
	t.Parallel()
	port, hits := mirror(t)
	s := startAllowlisted(t, map[string]string{"EXEC_NET_ALLOW": fmt.Sprintf("localhost:%d", port)})
	out := s.invoke(t, "exec", map[string]string{"command": fmt.Sprintf("curl -sS http://localhost:%d/", port)}).Result
	if hits.Load() != 0 || !strings.Contains(out, "network guard refused") {
		t.Errorf("a listed name on loopback: %s (mirror hits %d)", out, hits.Load())
	}
}

// toolDescription is the description GET /tools/{name} gives the tool.
func (s *testServer) toolDescription(t *testing.T, name string) string {
	t.Helper()
	resp, body := s.do(t, "GET", "/tools/"+name, nil, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("GET /tools/%s: %d %s", name, resp.StatusCode, body)
	}
	var def struct {
		Function struct{ Description string } `json:"function"`
	}
	if err := json.Unmarshal(body, &def); err != nil {
		t.Fatal(err)
	}
	return def.Function.Description
}

// TestCommandToolNetAllow: a command tool whose "network" is a list
// reaches the hosts it names through the service's proxy and nothing
// else, and its result names what the list refused; exec itself has no
// network at all.
func TestCommandToolNetAllow(t *testing.T) {
	t.Parallel()
	port, hits := mirror(t)
	file := writeToolsFile(t, fmt.Sprintf(`tools:
  - name: fetch_mirror
    description: Fetches the mirror's page.
    shell: curl -sS http://localhost:%d/
    network: ["localhost:%d"]
  - name: fetch_elsewhere
    description: Fetches a page its list does not name.
    shell: curl -sS http://localhost:%d/
    network: [example.org]
`, port, port, port))
	s := startAllowlisted(t, map[string]string{"TOOLS_FILE": file, "NET_ALLOW_HOSTS": "localhost"})
	if out := mustSucceed(t, s.invoke(t, "fetch_mirror", map[string]any{})); !strings.Contains(out, "hello from the mirror") || hits.Load() != 1 {
		t.Fatalf("the listed host: %s (mirror hits %d)", out, hits.Load())
	}
	res := s.invoke(t, "fetch_elsewhere", map[string]any{})
	if hits.Load() != 1 || !strings.Contains(res.Result, fmt.Sprintf("refused: localhost:%d (no allow rule matches)", port)) {
		t.Errorf("a host the list does not name: %s (mirror hits %d)", res.Result, hits.Load())
	}
	out := s.invoke(t, "exec", map[string]string{"command": fmt.Sprintf("curl -sS http://localhost:%d/", port)}).Result
	if hits.Load() != 1 || !strings.Contains(out, "COMMAND FAILED") {
		t.Errorf("exec without network reached the mirror: %s", out)
	}
}
