package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestPythonAgentExample runs examples/python/agent.py with python3
// against the real service and a scripted OpenAI-compatible model on
// loopback. The model calls a tool that does not exist (the service's
// 404), a tool whose call reaches the service without the key (the
// service's 401), a tool the proxy in front answers once with 503 and
// Retry-After, a real write and a call with malformed arguments; every
// outcome must come back to the model as a tool result it can act on, and
// the run must end with the model's answer and exit status 0.
func TestPythonAgentExample(t *testing.T) {
	t.Parallel()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is needed for the example agent: ", err)
	}
	const key = "python-agent-test-key-0123456789"
	s := startServer(t, map[string]string{"API_KEYS": key})
	target, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}

	// In front of the service: the first memory call gets a 503 with
	// Retry-After, and list_dir calls lose their key on the way, so the
	// service itself answers 401. Everything else passes through.
	var mu sync.Mutex
	seen := map[string]int{}
	proxy := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Method+" "+r.URL.Path]++
		n := seen[r.Method+" "+r.URL.Path]
		mu.Unlock()
		switch {
		case r.URL.Path == "/tools/memory/invoke" && n == 1:
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"error":{"code":"overloaded","message":"too many calls at once"}}`)
			return
		case r.URL.Path == "/tools/list_dir/invoke":
			r.Header.Del("Authorization")
		}
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()

	// The scripted model: each turn checks what came back from the last
	// one and makes the next calls. It wants no key (a keyless local model).
	type message struct {
		Role       string          `json:"role"`
		Content    *string         `json:"content"`
		ToolCallID string          `json:"tool_call_id"`
		ToolCalls  json.RawMessage `json:"tool_calls"`
	}
	var (
		modelMu  sync.Mutex
		requests []struct {
			Messages []message
			Tools    []struct{ Function struct{ Name string } }
			Auth     string
		}
	)
	call := func(id, name, args string) map[string]any {
		return map[string]any{"id": id, "type": "function", "function": map[string]any{"name": name, "arguments": args}}
	}
	turns := [][]map[string]any{
		{
			call("c1", "write_file", `{"path":"notes/hello.txt","content":"hello from python\n"}`),
			call("c2", "no_such_tool", `{}`),
			call("c3", "list_dir", `{"path":"."}`),
			call("c4", "memory", `{"action":"write","content":"the agent example ran"}`),
		},
		{
			call("c5", "read_file", `{"path": "notes/hello.txt"`), // malformed JSON
			call("c6", "read_file", `{"path":"notes/hello.txt"}`),
		},
	}
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" || r.Method != http.MethodPost {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		var req struct {
			Messages []message
			Tools    []struct{ Function struct{ Name string } }
			Auth     string
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req.Auth = r.Header.Get("Authorization")
		modelMu.Lock()
		requests = append(requests, req)
		turn := len(requests) - 1
		modelMu.Unlock()
		msg := map[string]any{"role": "assistant", "content": nil}
		if turn < len(turns) {
			msg["tool_calls"] = turns[turn]
		} else {
			msg["content"] = "All done."
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": "stop"}}})
	}))
	defer model.Close()

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	script, err := filepath.Abs("../../examples/python/agent.py")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, python, script, "Write a note, then read it back.")
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"TOOLS_URL=" + front.URL,
		"TOOLS_KEY=" + key,
		"LLM_BASE_URL=" + model.URL + "/v1",
		"LLM_MODEL=scripted",
		"AGENT_SESSION=python-e2e",
		"AGENT_MAX_WAIT=2",
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("agent.py: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	if got := strings.TrimSpace(stdout.String()); got != "All done." {
		t.Errorf("stdout %q; want the model's answer, \"All done.\"\nstderr: %s", got, stderr.String())
	}
	assertContains(t, "agent's stderr", stderr.String(),
		"tool memory: HTTP 503 (too many calls at once); trying again in 1s",
		"toolsvc refused the key (401")

	if len(requests) != 3 {
		t.Fatalf("the model was asked %d times; want 3", len(requests))
	}
	first := requests[0]
	if first.Auth != "" {
		t.Errorf("the model got Authorization %q without LLM_API_KEY set", first.Auth)
	}
	var names []string
	for _, tool := range first.Tools {
		names = append(names, tool.Function.Name)
	}
	assertContains(t, "tools given to the model", strings.Join(names, ","), "read_file", "write_file", "exec")

	// results[id] is what the model got back for each call.
	results := map[string]string{}
	for _, m := range requests[2].Messages {
		if m.Role == "tool" && m.Content != nil {
			results[m.ToolCallID] = *m.Content
		}
	}
	for id, wants := range map[string][]string{
		"c1": {"Wrote 18 chars to notes/hello.txt"},
		"c2": {"no tool named 'no_such_tool'", "Next: call one of these tools instead:", "read_file"},
		"c3": {"HTTP 401", "Next:"},
		"c5": {"Error:"},
		"c6": {"hello from python"},
	} {
		got, ok := results[id]
		if !ok {
			t.Errorf("no tool result for %s among %v", id, results)
			continue
		}
		assertContains(t, "result of "+id, got, wants...)
	}
	if got := results["c4"]; got == "" || strings.HasPrefix(got, "Error") {
		t.Errorf("memory after the retry: %q; want its success result", got)
	}
	mu.Lock()
	memoryCalls := seen["POST /tools/memory/invoke"]
	mu.Unlock()
	if memoryCalls != 2 {
		t.Errorf("memory was called %d times through the proxy; want 2 (the 503, then the retry)", memoryCalls)
	}
	if b, err := os.ReadFile(filepath.Join(s.Workspace, "notes", "hello.txt")); err != nil || string(b) != "hello from python\n" {
		t.Errorf("notes/hello.txt: %q, %v", b, err)
	}
}

// TestPythonAgentExampleCannotStart: a service that is not there, or that
// refuses the key for GET /tools, ends the example agent with exit status
// 1 and a line saying what to set, not a Python traceback.
func TestPythonAgentExampleCannotStart(t *testing.T) {
	t.Parallel()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is needed for the example agent: ", err)
	}
	s := startServer(t, map[string]string{"API_KEYS": "python-agent-test-key-0123456789"})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	script, err := filepath.Abs("../../examples/python/agent.py")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, url, key, want string }{
		{"nothing listening", closed, "", "could not be reached"},
		{"wrong key", s.URL, "not-the-key-0123456789abcdef", "toolsvc refused the key (401"},
		{"no key", s.URL, "", "set TOOLS_KEY"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, python, script, "anything")
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "TOOLS_URL=" + tt.url, "TOOLS_KEY=" + tt.key,
				"LLM_BASE_URL=http://127.0.0.1:1/v1", "AGENT_RETRIES=2", "AGENT_MAX_WAIT=1"}
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Fatalf("agent.py: %v; want exit status 1\nstderr: %s", err, stderr.String())
			}
			assertContains(t, "stderr", stderr.String(), tt.want)
			if strings.Contains(stderr.String(), "Traceback") || stdout.Len() > 0 {
				t.Errorf("want one message on stderr and nothing on stdout; stdout %q, stderr:\n%s", stdout.String(), stderr.String())
			}
		})
	}
}

// TestPythonAgentUnitTests runs the example agent's own tests
// (examples/python/test_agent.py, standard library only): which failures
// it sends again, and the replies it must survive.
func TestPythonAgentUnitTests(t *testing.T) {
	t.Parallel()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is needed for the example agent: ", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-m", "unittest", "-v", "test_agent.py")
	cmd.Dir = "../../examples/python"
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "PYTHONDONTWRITEBYTECODE=1"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3 -m unittest test_agent.py: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// TestPythonAgentSlowExecRunsOnce: a command that outlasts the agent's
// client timeout (AGENT_TIMEOUT=1) runs once. The call is not sent again;
// the model is told the call may still be running and to check its effect.
func TestPythonAgentSlowExecRunsOnce(t *testing.T) {
	t.Parallel()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is needed for the example agent: ", err)
	}
	s := startServer(t, nil)
	target, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	execPosts := 0
	proxy := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/tools/exec/invoke" {
			mu.Lock()
			execPosts++
			mu.Unlock()
		}
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()

	var results []string
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct{ Role, Content string }
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		msg := map[string]any{"role": "assistant", "content": "Done."}
		last := req.Messages[len(req.Messages)-1]
		if last.Role == "tool" {
			mu.Lock()
			results = append(results, last.Content)
			mu.Unlock()
		} else {
			msg = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "c1", "type": "function",
				"function": map[string]any{"name": "exec", "arguments": `{"command":"echo ran >> count.txt; sleep 4"}`}}}}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": "stop"}}})
	}))
	defer model.Close()

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	script, err := filepath.Abs("../../examples/python/agent.py")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, python, script, "Count.")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "TOOLS_URL=" + front.URL, "LLM_BASE_URL=" + model.URL + "/v1",
		"AGENT_SESSION=python-slow", "AGENT_TIMEOUT=1", "AGENT_MAX_WAIT=1"}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("agent.py: %v\nstderr: %s", err, stderr.String())
	}
	// The call's final audit record: the command has ended, however.
	waitForAudit(t, s, "python-slow")
	mu.Lock()
	defer mu.Unlock()
	if execPosts != 1 {
		t.Errorf("exec was sent %d times; want 1\nstderr: %s", execPosts, stderr.String())
	}
	data, err := os.ReadFile(filepath.Join(s.Workspace, "count.txt"))
	if err != nil || string(data) != "ran\n" {
		t.Errorf("count.txt = %q, %v; want the command to have run once", data, err)
	}
	if len(results) != 1 || !strings.Contains(results[0], "may still be running") || !strings.Contains(results[0], "Next:") {
		t.Errorf("the model got %q; want one result saying the call may still be running", results)
	}
}
