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
	"testing"

	"github.com/countbot/toolsvc/internal/npmtest"
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

// mockLLMInstall installs MockLLMPackage once into npmtest's cache folder
// and returns the path of its entry point. Without node and npm the test
// is skipped, except under CI (CI=true), where it fails.
func mockLLMInstall(t testing.TB) string {
	t.Helper()
	return filepath.Join(npmtest.Install(t, MockLLMPackage), "@dwmkerr", "mock-llm", "dist", "main.js")
}

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
