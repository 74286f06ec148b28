package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/config"
	"github.com/countbot/toolsvc/internal/registry"
)

// testServer is the real service, started by startServer on 127.0.0.1:0
// with temporary workspace and data folders: in this process through run()
// (the default), or as the built binary in a process of its own.
type testServer struct {
	URL       string
	Workspace string // absolute, symbolic links resolved
	DataDir   string
	Key       string // API key sent by the helpers, if any

	cancel  context.CancelFunc // in-process: stops run() as SIGTERM would
	done    chan error         // run()'s error, or the process's exit status
	cmd     *exec.Cmd          // the service's process, when it has one
	logs    *syncBuffer
	logDone <-chan struct{} // closed once logs holds the whole log
	stop    sync.Once
	reload  chan struct{} // in-process: a value reloads the tools file
}

// startOption changes how startServer starts the service.
type startOption func(*startSpec)

type startSpec struct {
	process bool
	env     map[string]string // variables besides TOOLSVC_*, for the process
	key     string
	wrap    []string // a command line the binary's path is appended to
}

// asProcess runs the built binary (TestMain builds it once) in a process
// of its own instead of run() in this one: for tests that kill the service,
// look at its process, or give it an environment of its own.
func asProcess() startOption { return func(s *startSpec) { s.process = true } }

// withEnv sets a variable outside TOOLSVC_* (OPENAI_API_KEY, PATH...) in
// the service's environment. Such variables are read by the service's
// parts from the process environment, which parallel tests share, so the
// service then runs as a process of its own (asProcess), whose environment
// is the test process's plus these.
func withEnv(name, value string) startOption {
	return func(s *startSpec) {
		s.process = true
		if s.env == nil {
			s.env = map[string]string{}
		}
		s.env[name] = value
	}
}

// withKey sets TOOLSVC_API_KEYS to key and makes the helpers (do, invoke)
// send it.
func withKey(key string) startOption { return func(s *startSpec) { s.key = key } }

// startServer runs the service with the given TOOLSVC_* variables (names
// without the prefix) on top of test defaults, and stops it when the test
// ends. By default it runs in this process through run(), which reads its
// configuration from the environment it is given and never from the
// process's: tests that use it can run in parallel, and so can those that
// start the binary (asProcess, withEnv), which get theirs through the
// command's environment.
func startServer(t testing.TB, env map[string]string, opts ...startOption) *testServer {
	t.Helper()
	var spec startSpec
	for _, o := range opts {
		o(&spec)
	}
	vars := testVars(t, env)
	if spec.key != "" {
		vars["API_KEYS"] = spec.key
	}
	if _, ok := env["LOG_LEVEL"]; !ok {
		vars["LOG_LEVEL"] = "info" // the "listening" line is read from the log
	}
	if _, ok := env["LOG_FLUSH_INTERVAL"]; !ok {
		// Tests read the log right after a request: each line at once.
		// TestLogBatches checks the default.
		vars["LOG_FLUSH_INTERVAL"] = "0"
	}
	s := &testServer{Key: spec.key, DataDir: vars["DATA_DIR"], done: make(chan error, 1), logs: &syncBuffer{}, reload: make(chan struct{})}
	pr, pw := io.Pipe()
	if spec.process {
		s.cmd, s.done = startProcess(t, vars, spec.env, spec.wrap, pw, s.logs)
	} else {
		ctx, cancel := context.WithCancel(context.Background())
		s.cancel = cancel
		go func() {
			err := runWith(ctx, nil, environ(vars, nil), pw, s.logs, s.reload)
			pw.Close()
			s.done <- err
		}()
	}
	addr, logDone := watchLog(pr, s.logs)
	s.logDone = logDone
	select {
	case a := <-addr:
		s.URL = "http://" + a
	case err := <-s.done:
		s.done <- err
		t.Fatalf("the service did not start: %v\nlogs:\n%s", err, s.Logs())
	case <-time.After(startGuard):
		s.kill()
		t.Fatalf("the service did not start within %s; logs:\n%s", startGuard, s.Logs())
	}
	resolved, err := filepath.EvalSymlinks(vars["WORKSPACE"])
	if err != nil {
		t.Fatal(err)
	}
	s.Workspace = resolved
	t.Cleanup(func() { s.Stop(t) })
	return s
}

// startConfig is startServer: tests written when the two differed call it.
func startConfig(t testing.TB, env map[string]string, opts ...startOption) *testServer {
	t.Helper()
	return startServer(t, env, opts...)
}

// startError starts the service as startServer does, expecting start-up
// to fail, and returns why: run()'s error, or the process's exit status
// followed by what it wrote to stderr. A service that starts after all is
// stopped at once, and startError returns nil. Unlike startServer it keeps
// a LOG_LEVEL given in env.
func startError(t testing.TB, env map[string]string, opts ...startOption) error {
	t.Helper()
	var spec startSpec
	for _, o := range opts {
		o(&spec)
	}
	vars := testVars(t, env)
	if _, ok := env["LOG_LEVEL"]; !ok {
		vars["LOG_LEVEL"] = "info"
	}
	if !spec.process {
		// Canceled already: a configuration that is valid after all
		// starts the service, which then stops at once.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return run(ctx, nil, environ(vars, nil), io.Discard, io.Discard)
	}
	logs := &syncBuffer{}
	pr, pw := io.Pipe()
	cmd, exited := startProcess(t, vars, spec.env, spec.wrap, pw, logs)
	addr, _ := watchLog(pr, logs)
	select {
	case err := <-exited:
		if err == nil {
			return nil
		}
		return fmt.Errorf("%w: %s", err, logs.String())
	case <-addr:
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-exited
		return nil
	case <-time.After(startGuard):
		_ = cmd.Process.Kill()
		t.Fatalf("the service neither started nor failed within %s; logs:\n%s", startGuard, logs.String())
		return nil
	}
}

// waitGuard bounds the wait for something a test set going (a file, an
// audit record, a process ending): a guard against a hang, not a
// measurement, so it is generous.
const waitGuard = 2 * time.Minute

// startGuard bounds the wait for a service to start or stop. It is a guard
// against a hang, not a measurement: a loaded machine running the race
// detector may take many seconds.
const startGuard = 3 * time.Minute

// testVars adds temporary folders and an ephemeral port to env.
func testVars(t testing.TB, env map[string]string) map[string]string {
	base := t.TempDir()
	vars := map[string]string{
		"ADDR":      "127.0.0.1:0",
		"WORKSPACE": filepath.Join(base, "ws"),
		"DATA_DIR":  filepath.Join(base, "data"),
	}
	for k, v := range env {
		vars[k] = v
	}
	return vars
}

// environ is the environment a service gets: base (NAME=value entries;
// TOOLSVC_* ones are left out, so that the machine's settings cannot leak
// into a test), then extra, then the TOOLSVC_* variables of vars (names
// without the prefix).
func environ(vars, extra map[string]string, base ...string) []string {
	var out []string
	for _, kv := range base {
		if !strings.HasPrefix(kv, config.Prefix+"_") {
			out = append(out, kv)
		}
	}
	for k, v := range extra {
		out = append(out, k+"="+v)
	}
	for k, v := range vars {
		out = append(out, config.Prefix+"_"+k+"="+v)
	}
	return out
}

// startProcess starts the built binary with the environment of this
// process, extra and the TOOLSVC_* variables of vars. Its stdout (the log)
// goes to out, which is closed when the process has ended and all of it
// is written; its stderr goes to logs. The exit status is sent on the
// channel returned. The process is killed when the test ends, unless it is
// gone already.
func startProcess(t testing.TB, vars, extra map[string]string, wrap []string, out *io.PipeWriter, logs *syncBuffer) (*exec.Cmd, chan error) {
	t.Helper()
	bin, err := serviceBinary()
	if err != nil {
		t.Fatal(err)
	}
	argv := append(append([]string(nil), wrap...), bin)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = environ(vars, extra, os.Environ()...)
	cmd.Stdout, cmd.Stderr = out, logs
	// A command the service started that still holds its output does not
	// hold up Wait for long.
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	exited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		out.Close()
		exited <- err
	}()
	return cmd, exited
}

// watchLog copies the log lines read from r to logs, sends the address of
// the "listening" line when it comes, and closes finished at the end of r.
func watchLog(r io.Reader, logs *syncBuffer) (addr <-chan string, finished <-chan struct{}) {
	listening, done := make(chan string, 1), make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		sent := false
		for sc.Scan() {
			line := sc.Bytes()
			logs.Write(append(append([]byte(nil), line...), '\n'))
			if !sent {
				var m struct{ Message, Addr string }
				if json.Unmarshal(line, &m) == nil && m.Message == "listening" {
					listening <- m.Addr
					sent = true
				}
			}
		}
		_, _ = io.Copy(io.Discard, r)
	}()
	return listening, done
}

// Stop shuts the service down as SIGTERM does (for a process, with
// SIGTERM), waits for it to end and its log to be read, and checks that it
// ended cleanly. Later calls do nothing.
func (s *testServer) Stop(t testing.TB) {
	s.stop.Do(func() {
		if s.cmd != nil {
			_ = s.cmd.Process.Signal(syscall.SIGTERM)
		} else {
			s.cancel()
		}
		if err := s.wait(); err != nil {
			t.Errorf("the service ended with %v; logs:\n%s", err, s.Logs())
		}
	})
}

// Kill ends the service's process with SIGKILL (no shutdown, no deferred
// code) and waits until it is gone. The service must run as a process.
func (s *testServer) Kill(t testing.TB) {
	t.Helper()
	if s.cmd == nil {
		t.Fatal("Kill needs a service started asProcess")
	}
	s.stop.Do(func() {
		_ = s.cmd.Process.Signal(syscall.SIGKILL)
		if err := s.wait(); errors.Is(err, errStuck) {
			t.Errorf("the killed service: %v", err)
		}
	})
}

// errStuck says a service did not end, or its log did not, within
// startGuard.
var errStuck = fmt.Errorf("did not end within %s", startGuard)

// wait waits for the service to end and for its log to be read, and
// returns how it ended: run()'s error, the process's exit status, or
// errStuck.
func (s *testServer) wait() error {
	guard := time.After(startGuard)
	var err error
	select {
	case err = <-s.done:
	case <-guard:
		return errStuck
	}
	select {
	case <-s.logDone:
	case <-guard:
		return errStuck
	}
	return err
}

// kill ends the service however it runs, without waiting.
func (s *testServer) kill() {
	if s.cmd != nil {
		_ = s.cmd.Process.Kill()
	} else {
		s.cancel()
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

// notTested skips with NOT TESTED, or fails under CI, where everything
// this test needs is present.
func notTested(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatalf("must be tested under CI: %s", msg)
	}
	t.Skipf("NOT TESTED: %s", msg)
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

// TestMain starts building the service binary at once, so that the build
// runs alongside the tests that need none, and removes it at the end. The
// tests mostly wait on sockets and child processes, so more of them run
// at once than there are CPUs (four per CPU, at most 16: each may start
// a browser or a sandbox), unless -test.parallel says otherwise.
func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		_ = flag.Set("test.parallel", fmt.Sprint(min(4*runtime.GOMAXPROCS(0), 16)))
	}
	// A copy of this binary run by a test (runAsNobody) builds nothing
	// unless one of its tests asks.
	if os.Getenv(childVar) == "" {
		go serviceBinary()
	}
	code := m.Run()
	_ = os.RemoveAll(binDir)
	os.Exit(code)
}

// childVar marks a copy of the test binary run by a test.
const childVar = config.TestPrefix + "CHILD"

// binDir holds the service binary built for the tests.
var binDir = filepath.Join(os.TempDir(), fmt.Sprintf("toolsvc-e2e-bin-%d", os.Getpid()))

// serviceBinary builds the service once per test binary (with the race
// detector when the tests have it: the packages then come from the build
// cache the test binary filled), for the tests that run it as a process.
var serviceBinary = sync.OnceValues(func() (string, error) {
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", err
	}
	out := filepath.Join(binDir, "toolsvc")
	args := []string{"build", "-o", out}
	if raceEnabled {
		args = append(args, "-race")
	}
	if b, err := exec.Command("go", append(args, ".")...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, b)
	}
	return out, nil
})
