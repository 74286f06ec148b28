package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/countbot/toolsvc/internal/npmtest"
)

// Peers from npm that check the doors as clients nobody here wrote do, at
// pinned versions.
const prismPackage = "@stoplight/prism-cli@5.16.0"

// langchainPackages are LangChain.js's MCP adapter and its peers.
var langchainPackages = []string{"@langchain/mcp-adapters@1.1.4", "@langchain/core@1.4.0", "@langchain/langgraph@1.7.3"}

// freePort is a loopback port nobody listens on (for a peer that takes
// its port as a flag).
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startPrism runs Prism as a validating proxy for the service: it checks
// every request and response against doc (a file) and reports each
// violation in an sl-violations header. It returns Prism's address once
// it says it listens.
func startPrism(t *testing.T, nm, doc, upstream string) string {
	t.Helper()
	port := strconv.Itoa(freePort(t))
	cmd := exec.Command("node", filepath.Join(nm, "@stoplight", "prism-cli", "dist", "index.js"),
		"proxy", doc, upstream, "--port", port, "--host", "127.0.0.1", "--errors=false")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var log strings.Builder
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "Prism is listening") {
			go func() { _, _ = io.Copy(io.Discard, out) }()
			return "http://127.0.0.1:" + port
		}
	}
	t.Fatalf("prism did not start:\n%s", log.String())
	return ""
}

// TestPrismValidatesDoors puts Prism, a proxy that validates traffic
// against an OpenAPI document, in front of the service with the service's
// own /openapi.json: streamed calls, calls with the metadata headers and
// calls with an empty body must all be what the document says.
func TestPrismValidatesDoors(t *testing.T) {
	t.Parallel()
	nm := npmtest.Install(t, prismPackage)
	s := startServer(t, map[string]string{"TOOLS_ENABLED": "files,shell"})
	s.writeWS(t, "notes.txt", "alpha\nbeta\n")
	_, spec := s.do(t, "GET", "/openapi.json", nil, nil)
	doc := filepath.Join(t.TempDir(), "openapi.json")
	if err := os.WriteFile(doc, spec, 0o644); err != nil {
		t.Fatal(err)
	}
	prism := startPrism(t, nm, doc, s.URL)

	headers := map[string]string{"Content-Type": "application/json", "X-Session-ID": "prism", "X-Source": "web"}
	stream := map[string]string{"Accept": "text/event-stream"}
	for _, c := range []struct {
		name, tool, body string
		header           map[string]string
		want             string
		badRequest       bool // sent against the schema on purpose
	}{
		{"streamed exec", "exec", `{"command":"echo one; echo two"}`, stream, "event: result", false},
		{"streamed failing exec", "exec", `{"command":"exit 3"}`, stream, "event: result", false},
		{"streamed read_file", "read_file", `{"path":"notes.txt"}`, stream, "event: result", false},
		{"plain read_file", "read_file", `{"path":"notes.txt"}`, nil, `"status":"success"`, false},
		{"empty body", "list_dir", ``, nil, `"status":"success"`, false},
		{"bad arguments", "read_file", `{"path":5}`, nil, `"status":"error"`, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(context.Background(), "POST", prism+"/tools/"+c.tool+"/invoke", strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range headers {
				req.Header.Set(k, v)
			}
			for k, v := range c.header {
				req.Header.Set(k, v)
			}
			if c.body == "" {
				req.Header.Del("Content-Type")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			// A request sent against the schema on purpose may be
			// reported; the responses must break no rule.
			if v := resp.Header.Get("sl-violations"); v != "" {
				var vs []struct{ Location []string }
				if err := json.Unmarshal([]byte(v), &vs); err != nil {
					t.Fatalf("sl-violations: %v: %s", err, v)
				}
				for _, x := range vs {
					if len(x.Location) == 0 || x.Location[0] != "request" || !c.badRequest {
						t.Errorf("prism found violations: %s", v)
						break
					}
				}
			}
			if resp.StatusCode != 200 || !strings.Contains(string(body), c.want) {
				t.Errorf("%d %s, want %q", resp.StatusCode, body, c.want)
			}
		})
	}
}

// TestLangChainMCPAdapter runs LangChain.js's MCP adapter from npm
// against /mcp: the content of the ToolMessage it builds from a call,
// which is what its model reads, must be the tool's text alone, without
// the call's bookkeeping (call ID, duration, status) around it.
func TestLangChainMCPAdapter(t *testing.T) {
	t.Parallel()
	nm := npmtest.Install(t, langchainPackages...)
	s := startServer(t, map[string]string{"TOOLS_ENABLED": "files,shell"})
	s.writeWS(t, "notes.txt", "alpha \"quoted\"\nbeta\n")
	dir := nodeScript(t, nm, "langchain_mcp.mjs")
	calls := `[["read_file",{"path":"notes.txt"}],["exec",{"command":"echo hi; exit 3"}],["read_file",{"path":"nope.txt"}]]`
	out, err := exec.Command("node", filepath.Join(dir, "run.mjs"), s.URL+"/mcp", calls).CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	var got []struct {
		Name    string
		Content json.RawMessage
	}
	if err := json.Unmarshal(out, &got); err != nil || len(got) != 3 {
		t.Fatalf("output: %v\n%s", err, out)
	}
	var text string
	if err := json.Unmarshal(got[0].Content, &text); err != nil || !strings.HasPrefix(text, "[File: notes.txt") || !strings.HasSuffix(text, "2| beta") {
		t.Errorf("read_file: the model gets %s, want the file's text alone", got[0].Content)
	}
	// A command that exits non-zero ran: its text is a tool result, not an
	// error LangChain throws.
	if err := json.Unmarshal(got[1].Content, &text); err != nil || !strings.HasPrefix(text, "COMMAND FAILED (exit code 3)") {
		t.Errorf("exec: the model gets %s", got[1].Content)
	}
	for _, g := range got {
		for _, leak := range []string{"call_id", "duration_ms", "structuredContent"} {
			if strings.Contains(string(g.Content), leak) {
				t.Errorf("%s: the model gets the bookkeeping %q: %s", g.Name, leak, g.Content)
			}
		}
	}
}

// openaiPackage is the openai SDK, whose strict-schema helper checks the
// strict definitions.
const openaiPackage = "openai@7.60.0"

// TestOpenAIStrictDefinitions checks GET /tools?strict=true in both
// OpenAI formats with the openai SDK's own strict-schema helper: every
// tool is marked strict, and the helper, which refuses what strict mode
// refuses and makes strict what is not yet, finds nothing to change.
func TestOpenAIStrictDefinitions(t *testing.T) {
	t.Parallel()
	nm := npmtest.Install(t, openaiPackage)
	s := startServer(t, map[string]string{"TOOLS_ENABLED": "files,shell,web,memory"})
	for _, f := range []string{"openai", "responses"} {
		resp, defs := s.do(t, "GET", "/tools?format="+f+"&strict=true", nil, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", f, resp.StatusCode, defs)
		}
		cmd := exec.Command("node", filepath.Join("testdata", "openai_strict.cjs"))
		cmd.Env = append(os.Environ(), "NODE_PATH="+nm)
		cmd.Stdin = strings.NewReader(string(defs))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: node: %v\n%s", f, err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) < 8 {
			t.Errorf("%s: %d tools checked, want every one: %s", f, len(lines), out)
		}
		for _, l := range lines {
			if !strings.HasPrefix(l, "ok ") {
				t.Errorf("%s: %s", f, l)
			}
		}
	}
	if resp, body := s.do(t, "GET", "/tools?format=anthropic&strict=true", nil, nil); resp.StatusCode != 400 {
		t.Errorf("strict anthropic: %d %s", resp.StatusCode, body)
	}
}

// nodeScript copies testdata/name into a new folder as run.mjs, beside
// node_modules (the packages npmtest installed, at nm), so that node
// resolves its imports there, and returns the folder.
func nodeScript(t *testing.T, nm, name string) string {
	t.Helper()
	dir := t.TempDir()
	script, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "run.mjs"), script, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(nm, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	return dir
}
