package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countbot/toolsvc/internal/agent"
	"github.com/countbot/toolsvc/internal/agent/agenttest"
)

const (
	aliceKey = "alice-e2e-key-0123456789abcdef"
	bobKey   = "bob-e2e-key-0123456789abcdef"
	rootKey  = "root-e2e-key-0123456789abcdef"
	// bareKey is given without a name: it goes by "key-" and a short hash.
	bareKey = "bare-e2e-key-0123456789abcdef"
)

// headerTransport sends fixed headers with every request, as an MCP
// client configured with them does.
type headerTransport map[string]string

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestKeysOwnTheirWork: with two named keys, the second can neither list,
// read, follow nor cancel the first one's sub-agent (404, as for an ID
// that does not exist), nor see or continue its send_message conversation
// (it gets one of its own); a workflow's sub-agents belong to the key that
// ran it; an admin key can do all of it, and sees a task
// of before keys had names, which the named keys do not. Audit records,
// task files and log lines name the keys and never show them.
func TestKeysOwnTheirWork(t *testing.T) {
	t.Parallel()
	llm := agenttest.New(t, func(r agenttest.Request) agenttest.Response {
		msgs := chatMessages(t, r)
		last := msgs[len(msgs)-1].Content
		if last == "think hard" {
			return agenttest.Response{Hang: true}
		}
		return agenttest.Final("heard: " + last)
	})
	dataDir := filepath.Join(t.TempDir(), "data")
	// A task kept from before keys had names: no owner.
	old := `{"id":"sa-00000000000a","task":"old work","status":"completed","created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z","turns":1,"tool_call_count":0,"tool_calls":[]}`
	if err := os.MkdirAll(filepath.Join(dataDir, "agents"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dataDir, "agents", "sa-00000000000a.json"), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startConfig(t, llmEnv(llm.URL, map[string]string{
		"DATA_DIR": dataDir, "API_KEYS": "alice=" + aliceKey + ", bob=" + bobKey + "," + bareKey, "ADMIN_KEYS": "root=" + rootKey,
		"XIAOZHI_CONVERSATION": "true", "AGENT_MAX_CONCURRENT": "2",
	}))
	// The same service, seen by a client holding another key.
	as := func(key string) *testServer {
		return &testServer{URL: s.URL, Workspace: s.Workspace, DataDir: s.DataDir, Key: key, logs: s.logs}
	}
	alice, bob, root := as(aliceKey), as(bobKey), as(rootKey)

	out := mustSucceed(t, alice.invoke(t, "spawn", map[string]any{"task": "think hard", "label": "alice's"}))
	id := agentID.FindString(out)
	if got := alice.agentTask(t, id); got.Status != agent.StatusRunning || got.Owner != "alice" {
		t.Fatalf("alice's task as alice sees it: %+v", got)
	}
	listed := func(s *testServer) []string {
		t.Helper()
		resp, body := s.do(t, "GET", "/agents", nil, nil)
		var l struct{ Agents []agent.Summary }
		if resp.StatusCode != 200 || json.Unmarshal(body, &l) != nil {
			t.Fatalf("GET /agents: %d %s", resp.StatusCode, body)
		}
		var ids []string
		for _, a := range l.Agents {
			ids = append(ids, a.ID)
		}
		return ids
	}
	if got := listed(alice); !slices.Equal(got, []string{id}) {
		t.Errorf("alice lists %v", got)
	}
	if got := listed(bob); len(got) != 0 {
		t.Errorf("bob lists %v", got)
	}
	if got := listed(root); !slices.Equal(got, []string{id, "sa-00000000000a"}) {
		t.Errorf("root lists %v", got)
	}

	// Bob gets what an ID that does not exist gets, on every route.
	notFound := func(s *testServer, method, path string) {
		t.Helper()
		resp, body := s.do(t, method, path, nil, nil)
		var e struct {
			Error struct{ Code, Message string }
		}
		if resp.StatusCode != 404 || json.Unmarshal(body, &e) != nil || e.Error.Code != "not_found" {
			t.Errorf("%s %s: %d %s", method, path, resp.StatusCode, body)
		}
		_, none := s.do(t, method, strings.Replace(path, strings.Split(path, "/")[2], "sa-0123456789ab", 1), nil, nil)
		if got, want := strings.ReplaceAll(string(body), strings.Split(path, "/")[2], "ID"), strings.ReplaceAll(string(none), "sa-0123456789ab", "ID"); got != want {
			t.Errorf("%s %s answers %s, and for an ID that does not exist %s", method, path, got, want)
		}
	}
	for _, who := range []*testServer{bob, as(bareKey)} {
		// DELETE before events: were it let through, the stream of a
		// canceled task ends at once instead of following a running one.
		notFound(who, "GET", "/agents/"+id)
		notFound(who, "DELETE", "/agents/"+id)
		notFound(who, "GET", "/agents/"+id+"/events")
	}
	for _, who := range []*testServer{alice, bob} {
		notFound(who, "GET", "/agents/sa-00000000000a")
	}
	if got := alice.agentTask(t, id); got.Status != agent.StatusRunning {
		t.Errorf("bob's DELETE touched alice's task: %+v", got)
	}

	// Root follows alice's running task, reads it and cancels it.
	req, _ := http.NewRequest("GET", s.URL+"/agents/"+id+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+rootKey)
	ctx, cancel := context.WithCancel(context.Background())
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(resp.Body).ReadString('\n')
	if resp.StatusCode != 200 || line != ": following "+id+"\n" {
		t.Errorf("root following alice's task: %d %q", resp.StatusCode, line)
	}
	cancel()
	resp.Body.Close()
	if got := root.agentTask(t, id); got.Owner != "alice" {
		t.Errorf("root reads %+v", got)
	}
	if got := root.agentTask(t, "sa-00000000000a"); got.Task != "old work" || got.Owner != "" {
		t.Errorf("root reads the old task as %+v", got)
	}
	resp2, body := root.do(t, "DELETE", "/agents/"+id, nil, nil)
	var task agent.Task
	if resp2.StatusCode != 200 || json.Unmarshal(body, &task) != nil || task.Status != agent.StatusCanceled {
		t.Errorf("root's DELETE: %d %s", resp2.StatusCode, body)
	}

	// Conversations: bob naming alice's session gets one of his own.
	say := func(s *testServer, text string) string {
		t.Helper()
		return mustSucceed(t, s.invoke(t, "send_message", map[string]any{"text": text}, "X-Session-ID", "device-1"))
	}
	say(alice, "the code is 4711")
	say(bob, "what is the code")
	say(alice, "say it again")
	var seen [][]string
	for _, r := range llm.Requests() {
		var texts []string
		for _, m := range chatMessages(t, r) {
			if m.Role != "system" {
				texts = append(texts, m.Role+": "+m.Content)
			}
		}
		if len(texts) > 0 && texts[0] != "user: think hard" {
			seen = append(seen, texts)
		}
	}
	want := [][]string{
		{"user: the code is 4711"},
		{"user: what is the code"},
		{"user: the code is 4711", "assistant: heard: the code is 4711", "user: say it again"},
	}
	if len(seen) != len(want) {
		t.Fatalf("model requests of the conversations: %q", seen)
	}
	for i := range want {
		if !slices.Equal(seen[i], want[i]) {
			t.Errorf("conversation request %d: %q, want %q", i+1, seen[i], want[i])
		}
	}

	// A workflow's sub-agents belong to the key that ran it.
	mustSucceed(t, bob.invoke(t, "workflow_run", map[string]any{"goal": "count", "agents": []map[string]any{{"id": "counter", "task": "count the files"}}}))
	bobs := listed(bob)
	if len(bobs) != 1 || bobs[0] == id {
		t.Fatalf("bob lists %v after his workflow", bobs)
	}
	if got := bob.agentTask(t, bobs[0]); got.Owner != "bob" || got.Status != agent.StatusCompleted {
		t.Errorf("bob's workflow agent: %+v", got)
	}
	if got := listed(alice); !slices.Equal(got, []string{id}) {
		t.Errorf("alice lists %v after bob's workflow", got)
	}
	notFound(alice, "GET", "/agents/"+bobs[0])

	// Names everywhere, keys nowhere.
	s.Stop(t)
	var records []map[string]any
	filepath.WalkDir(dataDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		raw, _ := os.ReadFile(p)
		for _, k := range []string{aliceKey, bobKey, rootKey, bareKey} {
			if strings.Contains(string(raw), k) {
				t.Errorf("%s shows a key", p)
			}
		}
		if strings.Contains(p, "audit_logs") && strings.HasSuffix(p, ".json") {
			var rec map[string]any
			if json.Unmarshal(raw, &rec) == nil {
				records = append(records, rec)
			}
		}
		return nil
	})
	keysOf := map[string][]any{}
	for _, r := range records {
		keysOf[r["tool_name"].(string)] = append(keysOf[r["tool_name"].(string)], r["key"])
	}
	if !slices.Equal(keysOf["spawn"], []any{"alice"}) || !slices.Equal(keysOf["workflow_run"], []any{"bob"}) || len(keysOf["send_message"]) != 3 {
		t.Errorf("audit records by tool and key: %v", keysOf)
	}
	logs := s.Logs()
	for _, k := range []string{aliceKey, bobKey, rootKey, bareKey} {
		if strings.Contains(logs, k) {
			t.Errorf("the log shows a key")
		}
	}
	for _, name := range []string{`"key":"alice"`, `"key":"bob"`, `"key":"root"`} {
		if !strings.Contains(logs, name) {
			t.Errorf("the log never names %s", name)
		}
	}
}

// TestSendMediaOverMCPHonoursChat: X-Channel and X-Chat-ID on an MCP
// request name the chat send_media sends to, as over REST.
func TestSendMediaOverMCPHonoursChat(t *testing.T) {
	t.Parallel()
	const hookSecret = "hook-hmac-secret-0123456789"
	rcv := &mediaReceiver{t: t, secret: hookSecret}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	s := startConfig(t, map[string]string{"WEBHOOK_URL": srv.URL + "/in/hook-token-0123456789", "WEBHOOK_SECRET": hookSecret,
		"API_KEYS": "ops=" + aliceKey})
	s.writeWS(t, "out/report.csv", "a,b\n")

	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	sess, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: s.URL + "/mcp", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: headerTransport{
			"Authorization": "Bearer " + aliceKey, "X-Session-ID": "web:mcp-1", "X-Channel": "webhook", "X-Chat-ID": "room-7",
		}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	res, err := sess.CallTool(context.Background(), &mcp.CallToolParams{Name: "send_media", Arguments: map[string]any{"file_paths": []string{"out/report.csv"}}})
	if err != nil || res.IsError {
		t.Fatalf("send_media over MCP: %v %+v", err, res)
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if len(rcv.got) != 1 || rcv.got[0].ChatID != "room-7" || rcv.got[0].Session != "web:mcp-1" || rcv.files[0]["report.csv"] != "a,b\n" {
		t.Errorf("receiver got %+v %q", rcv.got, rcv.files)
	}
}
