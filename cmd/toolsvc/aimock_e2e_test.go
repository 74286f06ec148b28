package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/npmtest"
)

// aimockPackage is CopilotKit's OpenAI-compatible mock server, a model
// nobody here wrote, at a pinned version. It answers chat completions from
// fixtures and keeps a journal of every request it was sent.
// Docs: https://aimock.copilotkit.dev, fixtures and their match fields:
// https://aimock.copilotkit.dev/fixtures and https://aimock.copilotkit.dev/multi-turn
const aimockPackage = "@copilotkit/aimock@1.43.0"

// startAimock runs aimock's llmock server on a loopback port with fixtures
// (a JSON text, {"fixtures": [...]}) and returns the base URL a client of
// the chat-completions API takes, ending in /v1. It runs strict: a request
// no fixture matches gets a 503 (not a default reply), and a fixture with
// a turnIndex answers only a request with exactly that many assistant
// messages (AIMOCK_STRICT_TURN_INDEX; by default turnIndex only ranks
// fixtures that match otherwise, so a request past the script would get
// its last step again). Its log is shown if the test fails; it is stopped
// when the test ends.
func startAimock(t *testing.T, fixtures string) string {
	t.Helper()
	nm := npmtest.Install(t, aimockPackage)
	file := filepath.Join(t.TempDir(), "fixtures.json")
	if err := os.WriteFile(file, []byte(fixtures), 0o644); err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(freePort(t))
	// The llmock bin of the package's package.json.
	cmd := exec.Command("node", filepath.Join(nm, "@copilotkit", "aimock", "dist", "cli.js"),
		"--port", port, "--host", "127.0.0.1", "--fixtures", file,
		"--strict", "--validate-on-load", "--log-level", "info")
	cmd.Env = append(os.Environ(), "AIMOCK_STRICT_TURN_INDEX=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var (
		mu  sync.Mutex
		log strings.Builder
	)
	logged := func() string {
		mu.Lock()
		defer mu.Unlock()
		return log.String()
	}
	listening := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		said := false
		for sc.Scan() {
			mu.Lock()
			log.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if !said && strings.Contains(sc.Text(), "aimock server listening on") {
				said = true
				close(listening)
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		<-ended
		if t.Failed() {
			t.Logf("aimock's log:\n%s", logged())
		}
	})
	select {
	case <-listening:
	case <-ended:
		t.Fatalf("aimock did not start:\n%s", logged())
	case <-time.After(time.Minute):
		t.Fatalf("aimock did not say it listens within a minute:\n%s", logged())
	}
	base := "http://127.0.0.1:" + port
	// It says it listens once its socket is bound; its health check says
	// it answers.
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(base + "/__aimock/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("aimock does not answer its health check: %v\n%s", err, logged())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return base + "/v1"
}

// aimockRequest is a chat-completions request aimock was sent, as its
// journal keeps it.
type aimockRequest struct {
	Path string
	Body struct {
		Messages []struct {
			Role       string
			Content    *string
			ToolCallID string `json:"tool_call_id"`
			ToolCalls  []struct {
				ID       string
				Function struct{ Name, Arguments string }
			} `json:"tool_calls"`
		}
		Truncated bool `json:"__aimock_truncated"`
	}
	Response struct{ Status int }
}

// aimockJournal returns the chat-completions requests aimock at base (as
// startAimock returns it) was sent, oldest first. The journal keeps a body
// of up to 64 KB; a longer one is replaced with a marker, which fails the
// test rather than hide what the service sent.
func aimockJournal(t *testing.T, base string) []aimockRequest {
	t.Helper()
	resp, err := http.Get(strings.TrimSuffix(base, "/v1") + "/__aimock/journal?path=/v1/chat/completions")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /__aimock/journal: %d %s, %v", resp.StatusCode, data, err)
	}
	var reqs []aimockRequest
	if err := json.Unmarshal(data, &reqs); err != nil {
		t.Fatalf("aimock's journal: %v: %s", err, data)
	}
	for i, r := range reqs {
		if r.Body.Truncated {
			t.Fatalf("aimock's journal cut request %d short: its body is over 64 KB", i)
		}
	}
	return reqs
}

// toolResults returns the tool messages of a request by their call ID.
func (r aimockRequest) toolResults() map[string]string {
	out := map[string]string{}
	for _, m := range r.Body.Messages {
		if m.Role == "tool" && m.Content != nil {
			out[m.ToolCallID] = *m.Content
		}
	}
	return out
}

// TestPolicyFoldersAimock is the sub-agent part of TestPolicyFolders
// against aimock: with `default: {workspace: "tenants/{key}"}`, bob's
// sub-agent, whose model asks in turn for alice's file by a relative
// path, a recursive listing of its folder, a command that reads alice's
// file and lists the folder above, and a file of its own, is told nothing
// of alice's file in any tool result the service sends back to the model
// (read from aimock's journal of what it was sent), completes, and its
// file lands in bob's folder. Each step's fixture matches only the reply
// to the call before it (its tool_call_id) at its turn, so a service that
// lost a call's ID or a turn would get aimock's strict 503.
func TestPolicyFoldersAimock(t *testing.T) {
	t.Parallel()
	const task = "Look around your folder."
	step := func(turn int, after, id, tool string, args any) string {
		match := map[string]any{"userMessage": task, "turnIndex": turn, "hasToolResult": after != ""}
		if after != "" {
			match["toolCallId"] = after
		}
		response := map[string]any{"content": "Looked around; wrote found.txt."}
		if tool != "" {
			response = map[string]any{"toolCalls": []any{map[string]any{"id": id, "name": tool, "arguments": args}}}
		}
		b, err := json.Marshal(map[string]any{"match": match, "response": response})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	fixtures := `{"fixtures": [` + strings.Join([]string{
		step(0, "", "call_read", "read_file", map[string]any{"path": "../alice/x.txt"}),
		step(1, "call_read", "call_list", "list_dir", map[string]any{"path": ".", "recursive": true}),
		step(2, "call_list", "call_exec", "exec", map[string]any{"command": "cat ../alice/x.txt; ls -la .."}),
		step(3, "call_exec", "call_write", "write_file", map[string]any{"path": "found.txt", "content": "bob's sub-agent was here\n"}),
		step(4, "call_write", "", "", nil),
	}, ",\n") + `]}`
	llm := startAimock(t, fixtures)

	file := writePolicy(t, `default: {workspace: "tenants/{key}"}`)
	s := startServer(t, llmEnv(llm, map[string]string{"API_KEYS": policyKeys(), "POLICY_FILE": file}))
	alice, bob := s.asKey(policyAliceKey), s.asKey(policyBobKey)
	mustSucceed(t, alice.invoke(t, "write_file", map[string]string{"path": "x.txt", "content": aliceSecret + "\n"}))
	if b, err := os.ReadFile(filepath.Join(s.Workspace, "tenants", "alice", "x.txt")); err != nil || !strings.Contains(string(b), aliceSecret) {
		t.Fatalf("alice's file is not in her folder: %q, %v", b, err)
	}
	// A file of bob's own, which his sub-agent's listing must show.
	mustSucceed(t, bob.invoke(t, "write_file", map[string]string{"path": "mine.txt", "content": "bob-ok\n"}))

	res := bob.invoke(t, "spawn", map[string]any{"task": task, "wait": true})
	out := mustSucceed(t, res)
	assertContains(t, "bob's sub-agent", out, "completed in 5 turns with 4 tool calls", "Looked around; wrote found.txt.")

	reqs := aimockJournal(t, llm)
	if len(reqs) != 5 {
		t.Fatalf("aimock was sent %d requests, want 5 (one per turn): %+v", len(reqs), reqs)
	}
	for i, r := range reqs {
		if r.Response.Status != http.StatusOK {
			t.Errorf("request %d: aimock answered %d", i, r.Response.Status)
		}
		for id, text := range r.toolResults() {
			if strings.Contains(text, aliceSecret) {
				t.Errorf("request %d: the model was told alice's secret in the result of %s:\n%s", i, id, text)
			}
		}
	}
	results := reqs[len(reqs)-1].toolResults()
	for _, id := range []string{"call_read", "call_list", "call_exec", "call_write"} {
		if _, ok := results[id]; !ok {
			t.Errorf("the last request has no result of %s: %v", id, results)
		}
	}
	// The listing is of bob's folder: his file, nothing of alice's.
	if l := results["call_list"]; !strings.Contains(l, "mine.txt") || strings.Contains(l, "alice") || strings.Contains(l, "x.txt") {
		t.Errorf("list_dir . told the model:\n%s", l)
	}
	// cat's complaint names the path it was given; no other line may
	// name alice or her file, as a listing of the folder above would.
	for _, line := range strings.Split(results["call_exec"], "\n") {
		if strings.HasPrefix(line, "cat: ../alice/x.txt:") {
			continue
		}
		if strings.Contains(line, "alice") || strings.Contains(line, "x.txt") {
			t.Errorf("exec told the model %q in:\n%s", line, results["call_exec"])
		}
	}

	// The task's record: alice's file was refused, the other calls ran.
	id := agentID.FindString(out)
	if id == "" {
		t.Fatalf("no sub-agent ID in %q", out)
	}
	record := bob.agentTask(t, id)
	var calls []string
	for _, c := range record.ToolCalls {
		calls = append(calls, c.Name+" "+c.Status)
	}
	if got, want := strings.Join(calls, ", "), "read_file error, list_dir success, exec success, write_file success"; got != want {
		t.Errorf("the sub-agent's calls: %s, want %s", got, want)
	}
	// Its calls are bob's, recorded as worked in his folder.
	recs := waitAuditRecords(t, s, func(recs []map[string]any) bool {
		n := 0
		for _, r := range recs {
			if r["session_id"] == id {
				n++
			}
		}
		return n == 4
	})
	for _, r := range recs {
		if r["session_id"] == id && (r["key"] != "bob" || r["workspace"] != "tenants/bob") {
			b, _ := json.Marshal(r)
			t.Errorf("record of the sub-agent's call: %s", b)
		}
	}

	// The sub-agent's file is bob's, in his folder, and nowhere else.
	if b, err := os.ReadFile(filepath.Join(s.Workspace, "tenants", "bob", "found.txt")); err != nil || string(b) != "bob's sub-agent was here\n" {
		t.Errorf("the sub-agent's file in bob's folder: %q, %v", b, err)
	}
	for _, p := range []string{"found.txt", filepath.Join("tenants", "alice", "found.txt")} {
		if _, err := os.Stat(filepath.Join(s.Workspace, p)); err == nil {
			t.Errorf("the sub-agent wrote %s", p)
		}
	}
}

// TestPolicySubagentsAimock is the key-bounds part of TestPolicySubagents
// against aimock: alice's `subagents: {max_turns: 2}` stops her sub-agent
// after 2 model replies when its model answers every request with a tool
// call (a new folder to list at each of the first turns, the same call at
// any later one), and aimock was asked exactly twice.
func TestPolicySubagentsAimock(t *testing.T) {
	t.Parallel()
	const task = "List the folders."
	llm := startAimock(t, fmt.Sprintf(`{"fixtures": [
  {"match": {"userMessage": %[1]q, "turnIndex": 0},
   "response": {"toolCalls": [{"id": "call_1", "name": "list_dir", "arguments": {"path": "./"}}]}},
  {"match": {"userMessage": %[1]q, "turnIndex": 1, "toolCallId": "call_1"},
   "response": {"toolCalls": [{"id": "call_2", "name": "list_dir", "arguments": {"path": "././"}}]}},
  {"match": {"userMessage": %[1]q},
   "response": {"toolCalls": [{"name": "list_dir", "arguments": {"path": "./././"}}]}}
]}`, task))
	file := writePolicy(t, `keys: {alice: {subagents: {max_turns: 2}}}`)
	s := startServer(t, llmEnv(llm, map[string]string{"API_KEYS": policyKeys(), "POLICY_FILE": file}))
	alice := s.asKey(policyAliceKey)

	res := alice.invoke(t, "spawn", map[string]any{"task": task, "wait": true})
	id := agentID.FindString(res.Result)
	if res.Status == "success" || id == "" || !strings.Contains(res.Result, "after 2 turns") || !strings.Contains(res.Result, "subagents.max_turns") {
		t.Fatalf("alice's looping sub-agent: %+v", res)
	}
	if got := alice.agentTask(t, id); got.Turns != 2 || got.Error == nil || got.Error.Code != "max_turns" || got.CallCount != 2 {
		t.Errorf("alice's task: %+v", got)
	}
	reqs := aimockJournal(t, llm)
	if len(reqs) != 2 {
		t.Fatalf("aimock was sent %d requests, want 2: %+v", len(reqs), reqs)
	}
	for i, r := range reqs {
		if r.Response.Status != http.StatusOK {
			t.Errorf("request %d: aimock answered %d", i, r.Response.Status)
		}
	}
}
