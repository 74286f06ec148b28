package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/config"
	"github.com/countbot/toolsvc/internal/registry"
)

// testServer is the real service started by run() on 127.0.0.1:0 with
// temporary workspace and data folders.
type testServer struct {
	URL       string
	Workspace string // absolute, symbolic links resolved
	DataDir   string
	Key       string // API key sent by the helpers, if any

	cancel context.CancelFunc
	done   chan error
	logs   *syncBuffer
	reload chan struct{} // read by the service: a value reloads the tools file
}

// startServer runs the service with the given TOOLSVC_* variables (names
// without the prefix) on top of test defaults, through run() and the
// process environment, as the binary starts. It is stopped when the test
// ends. Tests using it cannot be parallel; startConfig serves the same
// from a config value, and its tests can be.
func startServer(t testing.TB, env map[string]string) *testServer {
	t.Helper()
	vars := testVars(t, env)
	clearToolsvcEnv(t)
	for k, v := range vars {
		t.Setenv("TOOLSVC_"+k, v)
	}
	reload := make(chan struct{})
	s := launch(t, vars, func(ctx context.Context, w io.Writer) error { return runWith(ctx, nil, w, io.Discard, reload) })
	s.reload = reload
	return s
}

// startConfig runs the service in-process from a config.Config built from
// the given variables (names without the prefix) on top of test defaults,
// never reading the process environment: tests that use it can run in
// parallel. Only run()'s own part (flags, config.Load, protecting the
// process) is left out.
func startConfig(t testing.TB, env map[string]string) *testServer {
	t.Helper()
	vars := testVars(t, env)
	cfg, err := config.LoadFrom(func(name string) (string, bool) {
		v, ok := vars[strings.TrimPrefix(name, config.Prefix+"_")]
		return v, ok
	})
	if err != nil {
		t.Fatalf("configuration: %v", err)
	}
	reload := make(chan struct{})
	s := launch(t, vars, func(ctx context.Context, w io.Writer) error { return serveWith(ctx, cfg, "test", w, reload) })
	s.reload = reload
	return s
}

// testVars adds temporary folders, an ephemeral port and the info log
// level (the "listening" line is read from the log) to env.
func testVars(t testing.TB, env map[string]string) map[string]string {
	base := t.TempDir()
	vars := map[string]string{
		"ADDR":      "127.0.0.1:0",
		"WORKSPACE": filepath.Join(base, "ws"),
		"DATA_DIR":  filepath.Join(base, "data"),
	}
	vars["LOG_LEVEL"] = "info" // unless a test asks for debug lines
	for k, v := range env {
		vars[k] = v
	}
	return vars
}

// launch starts the service with start, which writes its log to w, and
// waits for its "listening" line.
func launch(t testing.TB, vars map[string]string, start func(ctx context.Context, w io.Writer) error) *testServer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logs := &syncBuffer{}
	s := &testServer{cancel: cancel, done: make(chan error, 1), logs: logs, DataDir: vars["DATA_DIR"]}
	// Read the log from a pipe that also feeds the log buffer.
	pr, pw := io.Pipe()
	go func() {
		s.done <- start(ctx, pw)
		pw.Close()
	}()
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		sent := false
		for sc.Scan() {
			line := sc.Bytes()
			logs.Write(append(append([]byte(nil), line...), '\n'))
			if !sent {
				var m struct{ Message, Addr string }
				if json.Unmarshal(line, &m) == nil && m.Message == "listening" {
					addr <- m.Addr
					sent = true
				}
			}
		}
	}()
	select {
	case a := <-addr:
		s.URL = "http://" + a
	case err := <-s.done:
		cancel()
		t.Fatalf("server did not start: %v\nlogs:\n%s", err, logs.String())
	case <-time.After(20 * time.Second):
		cancel()
		t.Fatalf("server did not start in time; logs:\n%s", logs.String())
	}
	resolved, err := filepath.EvalSymlinks(vars["WORKSPACE"])
	if err != nil {
		t.Fatal(err)
	}
	s.Workspace = resolved
	t.Cleanup(func() { s.Stop(t) })
	return s
}

// clearToolsvcEnv unsets every TOOLSVC_ variable for the test, so the
// machine's environment cannot leak into it.
func clearToolsvcEnv(t testing.TB) {
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "TOOLSVC_") {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
}

// Stop shuts the server down (as SIGTERM would) and waits for run to return.
func (s *testServer) Stop(t testing.TB) {
	if s.cancel == nil {
		return
	}
	s.cancel()
	s.cancel = nil
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("run returned %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("server did not stop in time")
	}
}

// Logs returns what the service has logged so far.
func (s *testServer) Logs() string { return s.logs.String() }

// do sends a request and returns the response with its body read.
func (s *testServer) do(t testing.TB, method, path string, body io.Reader, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if s.Key != "" {
		req.Header.Set("Authorization", "Bearer "+s.Key)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", method, path, err)
	}
	checkContract(t, req, resp, data)
	return resp, data
}

// invoke calls a tool with args (marshalled unless already []byte or
// string) and returns the result, failing unless the HTTP status is 200.
func (s *testServer) invoke(t testing.TB, tool string, args any, header ...string) registry.Result {
	t.Helper()
	var body []byte
	switch a := args.(type) {
	case []byte:
		body = a
	case string:
		body = []byte(a)
	default:
		var err error
		if body, err = json.Marshal(a); err != nil {
			t.Fatal(err)
		}
	}
	h := map[string]string{"Content-Type": "application/json"}
	for i := 0; i+1 < len(header); i += 2 {
		h[header[i]] = header[i+1]
	}
	resp, data := s.do(t, "POST", "/tools/"+tool+"/invoke", bytes.NewReader(body), h)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("invoke %s: HTTP %d: %s", tool, resp.StatusCode, data)
	}
	var res registry.Result
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatalf("invoke %s: %v: %s", tool, err, data)
	}
	return res
}

// mustSucceed fails the test unless res is a success, and returns its text.
func mustSucceed(t testing.TB, res registry.Result) string {
	t.Helper()
	if res.Status != registry.StatusSuccess {
		t.Fatalf("%s failed: %s", res.Tool, res.Result)
	}
	return res.Result
}

// mustFail fails the test unless res is an error with the given code whose
// text contains every one of wants, and returns its text.
func mustFail(t testing.TB, res registry.Result, code string, wants ...string) string {
	t.Helper()
	if res.Status != registry.StatusError || res.Error == nil {
		t.Fatalf("%s: want error %s, got %s: %s", res.Tool, code, res.Status, res.Result)
	}
	if res.Error.Code != code {
		t.Errorf("%s: code = %s, want %s (%s)", res.Tool, res.Error.Code, code, res.Result)
	}
	if !strings.HasPrefix(res.Result, "Error: ") {
		t.Errorf("%s: result does not start with 'Error: ': %s", res.Tool, res.Result)
	}
	assertContains(t, res.Tool+" result", res.Result, wants...)
	return res.Result
}

// assertContains reports each of wants that text (named what) lacks.
func assertContains(t testing.TB, what, text string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(text, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, text)
		}
	}
}

// writeWS writes a file into the workspace, creating folders.
func (s *testServer) writeWS(t testing.TB, rel, content string) string {
	t.Helper()
	p := filepath.Join(s.Workspace, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
