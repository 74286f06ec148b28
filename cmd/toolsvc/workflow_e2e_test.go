package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/agent"
	"github.com/countbot/toolsvc/internal/agent/agenttest"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/toolerr"
)

// userTask returns the first user message of a model request.
func userTask(t testing.TB, r agenttest.Request) string {
	t.Helper()
	msgs := chatMessages(t, r)
	for _, m := range msgs {
		if m.Role == "user" {
			return m.Content
		}
	}
	t.Fatalf("no user message in %s", r.Body)
	return ""
}

type chatMessage struct{ Role, Content string }

func chatMessages(t testing.TB, r agenttest.Request) []chatMessage {
	t.Helper()
	var out []chatMessage
	for _, raw := range r.Messages {
		var m chatMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

var workflowSlot = regexp.MustCompile(`You are agent "([^"]+)"`)

// slotLLM is a scripted model answering each workflow agent by its ID.
func slotLLM(t *testing.T) *agenttest.Server {
	return agenttest.New(t, func(r agenttest.Request) agenttest.Response {
		task := userTask(t, r)
		m := workflowSlot.FindStringSubmatch(task)
		if m == nil {
			return agenttest.Final("not a workflow")
		}
		if strings.Contains(task, "cross-review round") {
			return agenttest.Final("review by " + m[1])
		}
		return agenttest.Final("output of " + m[1])
	})
}

// slotOrder returns the agent of each request the model received, in order
// ("<id>/review" for a review), from index from on.
func slotOrder(t *testing.T, llm *agenttest.Server, from int) ([]string, map[string]string) {
	var ids []string
	tasks := map[string]string{}
	for _, r := range llm.Requests()[from:] {
		task := userTask(t, r)
		id := workflowSlot.FindStringSubmatch(task)[1]
		if strings.Contains(task, "cross-review round") {
			id += "/review"
		}
		ids = append(ids, id)
		tasks[id] = task
	}
	return ids, tasks
}

// TestWorkflowRunEndToEnd: workflow_run through the real service and its
// model client. Each mode's order is read from the requests the model
// received; a cycle or an unknown dependency is refused before any model
// request; the tool exists only with a model.
func TestWorkflowRunEndToEnd(t *testing.T) {
	t.Parallel()
	llm := slotLLM(t)
	s := startServer(t, llmEnv(llm.URL, map[string]string{"AGENT_MAX_CONCURRENT": "3"}))
	if names := s.toolNames(t); !slices.Contains(names, "workflow_run") || slices.Contains(names, "send_message") {
		t.Fatalf("GET /tools: %v", names)
	}

	t.Run("pipeline", func(t *testing.T) {
		from := len(llm.Requests())
		out := mustSucceed(t, s.invoke(t, "workflow_run", map[string]any{"goal": "a report", "mode": "pipeline", "agents": []map[string]any{
			{"id": "research", "role": "Researcher", "task": "find facts"},
			{"id": "draft", "task": "write"},
			{"id": "edit", "task": "polish"},
		}}))
		ids, tasks := slotOrder(t, llm, from)
		if !slices.Equal(ids, []string{"research", "draft", "edit"}) {
			t.Fatalf("model requests %v", ids)
		}
		assertContains(t, "edit's task", tasks["edit"], "output of research", "output of draft", "Your task:\npolish")
		assertContains(t, "result", out, "# Workflow (pipeline): a report", "3 agents: 3 completed", "## 3. `edit`: edit\n\noutput of edit")
	})

	t.Run("graph", func(t *testing.T) {
		from := len(llm.Requests())
		out := mustSucceed(t, s.invoke(t, "workflow_run", map[string]any{"goal": "g", "mode": "graph", "agents": []map[string]any{
			{"id": "join", "task": "combine", "depends_on": []string{"left", "right"}},
			{"id": "root", "task": "start"},
			{"id": "left", "task": "l", "depends_on": []string{"root"}},
			{"id": "right", "task": "r", "depends_on": []string{"root"}},
		}}))
		ids, tasks := slotOrder(t, llm, from)
		if len(ids) != 4 || ids[0] != "root" || ids[3] != "join" {
			t.Fatalf("model requests %v", ids)
		}
		assertContains(t, "join's task", tasks["join"], "output of left", "output of right")
		assertContains(t, "result", out, "4 agents: 4 completed")
	})

	t.Run("council", func(t *testing.T) {
		from := len(llm.Requests())
		out := mustSucceed(t, s.invoke(t, "workflow_run", map[string]any{"goal": "pick", "mode": "council", "cross_review": true, "agents": []map[string]any{
			{"id": "a", "task": "judge", "perspective": "cost"},
			{"id": "b", "task": "judge", "perspective": "risk"},
		}}))
		ids, tasks := slotOrder(t, llm, from)
		first, second := slices.Clone(ids[:2]), slices.Clone(ids[2:])
		slices.Sort(first)
		slices.Sort(second)
		if !slices.Equal(first, []string{"a", "b"}) || !slices.Equal(second, []string{"a/review", "b/review"}) {
			t.Fatalf("model requests %v", ids)
		}
		assertContains(t, "a's review task", tasks["a/review"], "output of a", "output of b")
		assertContains(t, "result", out, "Cross-review: 2 reviews completed", "review by b")
	})

	t.Run("refused before starting", func(t *testing.T) {
		from := len(llm.Requests())
		mustFail(t, s.invoke(t, "workflow_run", map[string]any{"goal": "g", "mode": "graph", "agents": []map[string]any{
			{"id": "a", "task": "t", "depends_on": []string{"b"}},
			{"id": "b", "task": "t", "depends_on": []string{"a"}},
		}}), toolerr.InvalidArguments, "cycle: a → b → a", "Next:")
		mustFail(t, s.invoke(t, "workflow_run", map[string]any{"goal": "g", "mode": "graph", "agents": []map[string]any{
			{"id": "a", "task": "t", "depends_on": []string{"ghost"}},
		}}), toolerr.InvalidArguments, `depends on "ghost", which is not an agent`)
		mustFail(t, s.invoke(t, "workflow_run", map[string]any{"goal": "g", "agents": make([]map[string]any, 11)}), toolerr.InvalidArguments, "agents")
		if n := len(llm.Requests()) - from; n != 0 {
			t.Errorf("%d model requests for refused workflows", n)
		}
	})

	t.Run("streamed", func(t *testing.T) {
		body, _ := json.Marshal(map[string]any{"goal": "g", "agents": []map[string]any{{"id": "one", "task": "t"}, {"id": "two", "task": "t"}}})
		resp, raw := s.do(t, "POST", "/tools/workflow_run/invoke", bytes.NewReader(body), map[string]string{"Accept": "text/event-stream"})
		events := parseSSE(t, raw)
		if resp.StatusCode != 200 || len(events) < 2 {
			t.Fatalf("%d %s", resp.StatusCode, raw)
		}
		var text strings.Builder
		for _, e := range events[:len(events)-1] {
			var d struct{ Text string }
			if e.name != "progress" || json.Unmarshal([]byte(e.data), &d) != nil {
				t.Errorf("event %+v", e)
			}
			text.WriteString(d.Text)
		}
		assertContains(t, "progress", text.String(), "workflow (pipeline) of 2 agents started\n", "[one] starting\n", "[one] sa-", ": model reply 1\n", "[one] completed after 1 turns (sa-", "[two] completed")
		var res registry.Result
		if last := events[len(events)-1]; last.name != "result" || json.Unmarshal([]byte(last.data), &res) != nil || !strings.Contains(res.Result, "output of two") {
			t.Errorf("last event %+v", last)
		}
	})

	// Every agent was a sub-agent task of its own.
	resp, body := s.do(t, "GET", "/agents", nil, nil)
	var list struct{ Agents []agent.Summary }
	if resp.StatusCode != 200 || json.Unmarshal(body, &list) != nil || len(list.Agents) != 13 {
		t.Errorf("GET /agents: %d, %d tasks", resp.StatusCode, len(list.Agents))
	}
	assertNoKey(t, s)
}

// TestSendMessageEndToEnd: with the conversation mode on, send_message
// passes the user's words to an agent with the service's tools (never
// send_message, spawn or workflow_run) and returns its reply; a second
// message with the same X-Session-ID reaches the model after the first
// exchange. The agent's command never sees the model key.
func TestSendMessageEndToEnd(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	turn := 0
	llm := agenttest.New(t, func(r agenttest.Request) agenttest.Response {
		mu.Lock()
		defer mu.Unlock()
		turn++
		switch turn {
		case 1:
			return agenttest.Call("c1", "exec", `{"command":"env; echo it is sunny"}`)
		case 2:
			return agenttest.Final("It is sunny.")
		default:
			return agenttest.Final("Tomorrow too.")
		}
	})
	s := startServer(t, llmEnv(llm.URL, map[string]string{"XIAOZHI_CONVERSATION": "true", "EXEC_SANDBOX": "none"}))
	if names := s.toolNames(t); !slices.Contains(names, "send_message") {
		t.Fatalf("GET /tools lacks send_message: %v", names)
	}
	out := mustSucceed(t, s.invoke(t, "send_message", map[string]any{"text": "what is the weather"}, "X-Session-ID", "xiaozhi/device:42"))
	if out != "It is sunny." {
		t.Fatalf("first reply %q", out)
	}
	out = mustSucceed(t, s.invoke(t, "send_message", map[string]any{"text": "and tomorrow?"}, "X-Session-ID", "xiaozhi/device:42"))
	if out != "Tomorrow too." {
		t.Fatalf("second reply %q", out)
	}
	reqs := llm.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests", len(reqs))
	}
	offered := reqs[0].ToolNames()
	for _, no := range []string{"send_message", "spawn", "workflow_run"} {
		if slices.Contains(offered, no) {
			t.Errorf("the conversation agent was offered %s: %v", no, offered)
		}
	}
	if !slices.Contains(offered, "exec") || !slices.Contains(offered, "read_file") {
		t.Errorf("the conversation agent lacks the service's tools: %v", offered)
	}
	var got []string
	for _, m := range chatMessages(t, reqs[2])[1:] {
		got = append(got, m.Role+": "+m.Content)
	}
	if !slices.Equal(got, []string{"user: what is the weather", "assistant: It is sunny.", "user: and tomorrow?"}) {
		t.Errorf("second message sent as %q", got)
	}
	for i, r := range reqs {
		if strings.Contains(string(r.Body), llmKey) {
			t.Errorf("request %d carries the model key", i)
		}
	}
	if !strings.Contains(string(reqs[1].Body), "it is sunny") {
		t.Errorf("the command's output did not reach the model")
	}
	// Another session starts afresh.
	mustSucceed(t, s.invoke(t, "send_message", map[string]any{"text": "hi"}, "X-Session-ID", "other"))
	if n := len(chatMessages(t, llm.Requests()[3])); n != 2 {
		t.Errorf("a new session was sent %d messages", n)
	}
	// Streamed: the agent's steps as progress events, then the reply.
	body, _ := json.Marshal(map[string]any{"text": "and after?"})
	resp, raw := s.do(t, "POST", "/tools/send_message/invoke", bytes.NewReader(body), map[string]string{"Accept": "text/event-stream", "X-Session-ID": "other"})
	events := parseSSE(t, raw)
	if resp.StatusCode != 200 || len(events) != 2 || events[0].name != "progress" || !strings.Contains(events[0].data, "other: model reply 1") ||
		events[1].name != "result" || !strings.Contains(events[1].data, "Tomorrow too.") {
		t.Errorf("streamed send_message: %d %s", resp.StatusCode, raw)
	}
	assertNoKey(t, s)

	t.Run("off without the mode or a model", func(t *testing.T) {
		s := startServer(t, llmEnv(llm.URL, nil))
		if names := s.toolNames(t); slices.Contains(names, "send_message") {
			t.Errorf("send_message offered without the conversation mode: %v", names)
		}
		if err := startError(t, map[string]string{"XIAOZHI_CONVERSATION": "true"}); err == nil || !strings.Contains(err.Error(), "TOOLSVC_LLM_BASE_URL") {
			t.Errorf("conversation mode without a model: %v", err)
		}
	})
}

// sseStream reads server-sent events one at a time from a live response.
type sseStream struct {
	sc *bufio.Scanner
}

func (s *sseStream) next(t *testing.T) sseEvent {
	t.Helper()
	var ev sseEvent
	var data []string
	for s.sc.Scan() {
		line := s.sc.Text()
		switch {
		case line == "":
			if data != nil {
				ev.data = strings.Join(data, "\n")
				return ev
			}
		case strings.HasPrefix(line, "event: "):
			ev.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = append(data, strings.TrimPrefix(line, "data: "))
		}
	}
	t.Fatalf("stream ended: %v", s.sc.Err())
	return ev
}

func (s *testServer) follow(t *testing.T, path string) (*http.Response, *sseStream) {
	t.Helper()
	req, _ := http.NewRequest("GET", s.URL+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	return resp, &sseStream{sc: sc}
}

// TestAgentEventsEndToEnd: GET /agents/{id}/events streams a running
// sub-agent's turns and tool calls as they happen (the model's first reply
// is held until the stream is open, its second until the stream has shown
// the first turn's tool call),
// then the end with the final task; a finished task's stream is its end at
// once; spawn with wait and Accept: text/event-stream streams progress.
func TestAgentEventsEndToEnd(t *testing.T) {
	t.Parallel()
	release, following := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	n := 0
	llm := agenttest.New(t, func(r agenttest.Request) agenttest.Response {
		mu.Lock()
		n++
		k := n
		mu.Unlock()
		switch k {
		case 1:
			select {
			case <-following:
			case <-time.After(waitGuard):
				t.Error("the stream was never opened")
			}
			return agenttest.Call("c1", "list_dir", `{"path":"."}`)
		case 2:
			select {
			case <-release:
			case <-time.After(waitGuard):
				t.Error("the stream never showed the tool call")
			}
			return agenttest.Final("all listed")
		default:
			// Later tasks, which may run side by side: one call, then
			// the answer.
			if msgs := chatMessages(t, r); msgs[len(msgs)-1].Role == "tool" {
				return agenttest.Final("done again")
			}
			return agenttest.Call("c", "list_dir", `{"path":"."}`)
		}
	})
	s := startServer(t, llmEnv(llm.URL, nil))
	out := mustSucceed(t, s.invoke(t, "spawn", map[string]any{"task": "list the files"}))
	id := agentID.FindString(out)
	resp, stream := s.follow(t, "/agents/"+id+"/events")
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("GET /agents/%s/events: %d %s", id, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	close(following)
	var names []string
	for {
		ev := stream.next(t)
		names = append(names, ev.name)
		if ev.name == "tool_call" {
			var e agent.Event
			if err := json.Unmarshal([]byte(ev.data), &e); err != nil || e.Call == nil || e.Call.Name != "list_dir" || e.Agent != id {
				t.Errorf("tool_call event %s", ev.data)
			}
			close(release)
		}
		if ev.name == "end" {
			var task agent.Task
			if err := json.Unmarshal([]byte(ev.data), &task); err != nil || task.Status != agent.StatusCompleted || task.Answer != "all listed" {
				t.Errorf("end event %s", ev.data)
			}
			break
		}
	}
	if !slices.Equal(names, []string{"turn", "tool_call", "turn", "end"}) {
		t.Errorf("events %v", names)
	}

	// A finished task: its end at once.
	_, stream = s.follow(t, "/agents/"+id+"/events")
	if ev := stream.next(t); ev.name != "end" {
		t.Errorf("finished task's first event %q", ev.name)
	}
	if resp, _ := s.do(t, "GET", "/agents/sa-000000000000/events", nil, nil); resp.StatusCode != 404 {
		t.Errorf("unknown task: %d", resp.StatusCode)
	}
	// HEAD of a running task's stream answers at once, with no stream.
	out = mustSucceed(t, s.invoke(t, "spawn", map[string]any{"task": "another"}))
	if resp, body := s.do(t, "HEAD", "/agents/"+agentID.FindString(out)+"/events", nil, nil); resp.StatusCode != 200 ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") || len(body) != 0 {
		t.Errorf("HEAD of the events: %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}

	// spawn with wait, streamed: progress events, then the result.
	body, _ := json.Marshal(map[string]any{"task": "again", "wait": true})
	resp, raw := s.do(t, "POST", "/tools/spawn/invoke", bytes.NewReader(body), map[string]string{"Accept": "text/event-stream"})
	events := parseSSE(t, raw)
	if resp.StatusCode != 200 || len(events) < 3 {
		t.Fatalf("streamed spawn: %d %s", resp.StatusCode, raw)
	}
	var progress []string
	for _, e := range events[:len(events)-1] {
		var d struct{ Text string }
		if e.name != "progress" || json.Unmarshal([]byte(e.data), &d) != nil {
			t.Errorf("event %+v", e)
		}
		progress = append(progress, d.Text)
	}
	assertContains(t, "progress", strings.Join(progress, ""), ": model reply 1", `: list_dir {"path":"."} → success`, ": model reply 2")
	var res registry.Result
	if last := events[len(events)-1]; last.name != "result" || json.Unmarshal([]byte(last.data), &res) != nil || res.Status != "success" {
		t.Errorf("last event %+v", last)
	}
}

// TestModelKeyStaysInTheService tries to get the model key out: a command
// of a workflow agent and of the conversation agent prints the
// environment, a model "leaks" the key in its answers, the key is sent as
// the session ID, and the operator tries to pass it to commands. The key
// reaches no command, no result, no stream, no file and no log.
func TestModelKeyStaysInTheService(t *testing.T) {
	t.Parallel()
	llm := agenttest.New(t, func(r agenttest.Request) agenttest.Response {
		msgs := chatMessages(t, r)
		if msgs[len(msgs)-1].Role == "tool" {
			return agenttest.Final("the key is " + llmKey)
		}
		return agenttest.Call("c1", "exec", `{"command":"env; cat /proc/self/environ | tr '\\0' '\\n'"}`)
	})
	// The same key under a common name, not allow-listed.
	s := startServer(t, llmEnv(llm.URL, map[string]string{"XIAOZHI_CONVERSATION": "true", "EXEC_SANDBOX": "none"}), withEnv("OPENAI_API_KEY", llmKey))

	wf := mustSucceed(t, s.invoke(t, "workflow_run", map[string]any{"goal": "g", "agents": []map[string]any{{"id": "a", "task": "print env"}}}))
	msg := mustSucceed(t, s.invoke(t, "send_message", map[string]any{"text": "print env"}, "X-Session-ID", "session-"+llmKey))
	body, _ := json.Marshal(map[string]any{"task": "print env", "wait": true})
	_, stream := s.do(t, "POST", "/tools/spawn/invoke", bytes.NewReader(body), map[string]string{"Accept": "text/event-stream"})
	id := agentID.FindString(string(stream))
	_, events := s.do(t, "GET", "/agents/"+id+"/events", nil, nil)
	for what, text := range map[string]string{"workflow_run": wf, "send_message": msg, "spawn stream": string(stream), "events": string(events)} {
		if strings.Contains(text, llmKey) {
			t.Errorf("%s shows the key:\n%s", what, text)
		}
	}
	assertContains(t, "workflow_run", wf, "the key is [REDACTED")
	// Results are redacted too, so a command that saw the key would show
	// [REDACTED]: the commands' output must have neither.
	for i, r := range llm.Requests() {
		for _, m := range chatMessages(t, r) {
			if m.Role == "tool" && (strings.Contains(m.Content, llmKey) || strings.Contains(m.Content, "[REDACTED]") || !strings.Contains(m.Content, "PATH=")) {
				t.Errorf("model request %d: a command's environment held the key, or was not shown:\n%s", i, m.Content)
			}
		}
	}
	assertNoKey(t, s)
	filepath.WalkDir(s.DataDir, func(p string, d fs.DirEntry, err error) error {
		if strings.Contains(p, llmKey) {
			t.Errorf("a file is named after the key: %s", p)
		}
		return nil
	})

	for _, allow := range []string{"TOOLSVC_LLM_API_KEY", "TOOLSVC_LLM_*", "toolsvc_llm_api_key"} {
		if err := startError(t, map[string]string{"EXEC_ENV_ALLOW": allow}); err == nil || !strings.Contains(err.Error(), "TOOLSVC_EXEC_ENV_ALLOW") {
			t.Errorf("EXEC_ENV_ALLOW=%s: %v", allow, err)
		}
	}
}

// TestAgentToolsListing: GET /tools has exactly the model's tools on top
// of the others when a model and the conversation mode are configured, and
// their definitions are pinned by a golden file like the filesystem
// tools'.
func TestAgentToolsListing(t *testing.T) {
	t.Parallel()
	plain := startServer(t, nil).toolNames(t)
	llm := agenttest.New(t, agenttest.Reply(agenttest.Final("x")))
	s := startServer(t, llmEnv(llm.URL, map[string]string{"XIAOZHI_CONVERSATION": "true"}))
	_, first := s.do(t, "GET", "/tools", nil, nil)
	var defs []registry.Definition
	var raw []json.RawMessage
	if json.Unmarshal(first, &defs) != nil || json.Unmarshal(first, &raw) != nil {
		t.Fatalf("GET /tools: %s", first)
	}
	var extra []string
	var pinned []json.RawMessage
	for i, d := range defs {
		if !slices.Contains(plain, d.Function.Name) {
			extra = append(extra, d.Function.Name)
			pinned = append(pinned, raw[i])
		}
	}
	if !slices.Equal(extra, []string{"send_message", "spawn", "workflow_run"}) || len(defs) != len(plain)+3 {
		t.Fatalf("tools with a model, beyond the others: %v", extra)
	}
	got, _ := json.MarshalIndent(pinned, "", "  ")
	golden := filepath.Join("testdata", "agent_tools.golden.json")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./cmd/toolsvc -run TestAgentToolsListing -update)", err)
	}
	if !bytes.Equal(bytes.TrimSpace(got), bytes.TrimSpace(want)) {
		t.Errorf("agent tool definitions changed; if intended, run with -update.\ngot:\n%s", got)
	}
}
