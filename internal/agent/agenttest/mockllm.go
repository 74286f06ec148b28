package agenttest

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// MockLLMPackage is the third-party OpenAI-compatible mock server the
// agent tests also run against, at a pinned version:
// https://github.com/dwmkerr/mock-llm. It answers by rules: a JMESPath
// expression over the request decides which response a request gets, and
// the last rule that matches wins.
const MockLLMPackage = "@dwmkerr/mock-llm@0.1.29"

// MockRule is one mock-llm rule for POST /v1/chat/completions: when Match
// (JMESPath over {"body": the request body, "headers", ...}) is true, the
// answer is Status with Body, a JSON value.
type MockRule struct {
	Match  string
	Status int
	Body   json.RawMessage
}

var (
	mockOnce sync.Once
	mockDir  string
	mockErr  error
)

// mockLLMInstall installs MockLLMPackage once into a cache folder reused
// between runs and returns the path of its entry point. Without node and
// npm the test is skipped, except under CI (CI=true), where it fails.
func mockLLMInstall(t testing.TB) string {
	t.Helper()
	for _, p := range []string{"node", "npm"} {
		if _, err := exec.LookPath(p); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is missing under CI: install Debian's nodejs and npm (scripts/test.sh does)", p)
			}
			t.Skipf("MOCK-LLM NOT TESTED: %s is not installed", p)
		}
	}
	mockOnce.Do(func() {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		d := filepath.Join(base, "toolsvc-test-npm", strings.NewReplacer("@", "", "/", "-", ".", "_").Replace(MockLLMPackage))
		marker := filepath.Join(d, "installed")
		if _, err := os.Stat(marker); err != nil {
			if mockErr = os.MkdirAll(d, 0o755); mockErr != nil {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			out, err := exec.CommandContext(ctx, "npm", "install", "--prefix", d, "--no-audit", "--no-fund", "--no-save", "--loglevel", "error", MockLLMPackage).CombinedOutput()
			if err != nil {
				mockErr = &installError{err: err, out: string(out)}
				return
			}
			if mockErr = os.WriteFile(marker, nil, 0o644); mockErr != nil {
				return
			}
		}
		mockDir = filepath.Join(d, "node_modules", "@dwmkerr", "mock-llm", "dist", "main.js")
	})
	if mockErr != nil {
		t.Fatalf("npm install %s: %v", MockLLMPackage, mockErr)
	}
	return mockDir
}

type installError struct {
	err error
	out string
}

func (e *installError) Error() string { return e.err.Error() + ": " + e.out }

// MockLLM starts mock-llm on a loopback port with rules (and no other:
// a request no rule matches gets its 404) and returns its base URL,
// ending in /v1. It is stopped when the test ends.
func MockLLM(t testing.TB, rules []MockRule) string {
	t.Helper()
	main := mockLLMInstall(t)
	type rule struct {
		Path     string `json:"path"`
		Method   string `json:"method"`
		Match    string `json:"match"`
		Response struct {
			Status  int    `json:"status"`
			Content string `json:"content"`
		} `json:"response"`
	}
	var cfg struct {
		Rules []rule `json:"rules"`
	}
	for _, r := range rules {
		x := rule{Path: "^/v1/chat/completions$", Method: "POST", Match: r.Match}
		x.Response.Status, x.Response.Content = r.Status, string(r.Body)
		cfg.Rules = append(cfg.Rules, x)
	}
	// The configuration is YAML, of which JSON is a part.
	data, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "mock-llm.json")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "node", main, "--config", file)
	cmd.Env = append(os.Environ(), "HOST=127.0.0.1", "PORT="+strconv.Itoa(port))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	listening := make(chan bool, 1)
	var log strings.Builder
	go func() {
		sc := bufio.NewScanner(stdout)
		sent := false
		for sc.Scan() {
			if !sent {
				log.WriteString(sc.Text() + "\n")
				if strings.Contains(sc.Text(), "server running on") {
					listening <- true
					sent = true
				}
			}
		}
		if !sent {
			listening <- false
		}
	}()
	if !<-listening {
		t.Fatalf("mock-llm did not start:\n%s", log.String())
	}
	return "http://127.0.0.1:" + strconv.Itoa(port) + "/v1"
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
