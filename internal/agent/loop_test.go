package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/agent"
	"github.com/countbot/toolsvc/internal/agent/agenttest"
	"github.com/countbot/toolsvc/internal/audit"
	"github.com/countbot/toolsvc/internal/registry"
)

// fakeTool records its calls and answers with a fixed text.
type fakeTool struct {
	name string
	mu   sync.Mutex
	args []string
}

func (f *fakeTool) Name() string                { return f.name }
func (f *fakeTool) Description() string         { return "fake " + f.name }
func (f *fakeTool) Parameters() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (f *fakeTool) Execute(_ context.Context, args json.RawMessage) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.args = append(f.args, string(args))
	return "result of " + f.name + " " + string(args), nil
}
func (f *fakeTool) calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.args...)
}

// auditRecorder keeps the registry's audit records.
type auditRecorder struct {
	mu   sync.Mutex
	recs []audit.Record
}

// Start records nothing: the final record says all a test looks at.
func (a *auditRecorder) Start(audit.Record) (audit.Started, error) { return audit.Started{}, nil }

func (a *auditRecorder) Finish(_ audit.Started, r audit.Record) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.recs = append(a.recs, r)
	return nil
}

// newRegistry returns a registry with fake tools of the given names.
// subagentTools are the tools the tests let sub-agents use, as the
// service's toolsets do: never spawn or screenshot.
var subagentTools = []string{"read_file", "write_file", "edit_file", "list_dir", "file_search", "exec", "web_fetch", "memory"}

func newRegistry(t testing.TB, names ...string) (*registry.Registry, map[string]*fakeTool, *auditRecorder) {
	t.Helper()
	al := &auditRecorder{}
	reg := registry.New(registry.Options{Audit: al})
	tools := map[string]*fakeTool{}
	for _, n := range names {
		ft := &fakeTool{name: n}
		tools[n] = ft
		if err := reg.Register(ft); err != nil {
			t.Fatal(err)
		}
	}
	return reg, tools, al
}

type nopObserver struct {
	mu    sync.Mutex
	calls []string
}

func (o *nopObserver) Turn(int) {}
func (o *nopObserver) Called(name, _ string, res registry.Result) {
	o.mu.Lock()
	defer o.mu.Unlock()
	code := ""
	if res.Error != nil {
		code = res.Error.Code
	}
	o.calls = append(o.calls, name+":"+res.Status+":"+code)
}

// messagesOf decodes the messages a request carried.
func messagesOf(t *testing.T, r agenttest.Request) []agent.Message {
	t.Helper()
	var out []agent.Message
	for _, raw := range r.Messages {
		var m agent.Message
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// TestLoopMultiTurn: a tool call (with DeepSeek's reasoning and "stop" as
// finish reason), then the answer. The call goes through the registry with
// the sub-agent's ID as session, and the next request carries the
// assistant message back with the tool's result.
func TestLoopMultiTurn(t *testing.T) {
	reg, tools, al := newRegistry(t, "write_file", "read_file", "spawn", "screenshot")
	srv := agenttest.New(t,
		agenttest.Reply(agenttest.Message(`{"role":"assistant","content":"","reasoning_content":"write it","tool_calls":[{"function":{"name":"write_file","arguments":{"path":"out.md","content":"# hi"}}}]}`, "stop")),
		agenttest.Reply(agenttest.Final("Wrote out.md.")),
	)
	loop := &agent.Loop{Model: newClient(srv, nil), Tools: reg, Allowed: subagentTools, MaxTurns: 5}
	obs := &nopObserver{}
	out := loop.Run(context.Background(), "sa-000000000001", "write a file", obs)
	if out.Failure != nil || out.Answer != "Wrote out.md." || out.Turns != 2 {
		t.Fatalf("outcome %+v", out)
	}
	if got := tools["write_file"].calls(); !slices.Equal(got, []string{`{"path":"out.md","content":"# hi"}`}) {
		t.Errorf("write_file calls %q", got)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	for i, r := range reqs {
		// Only the sub-agent's tools: never spawn, nor a tool outside the list.
		if names := r.ToolNames(); !slices.Equal(names, []string{"read_file", "write_file"}) {
			t.Errorf("request %d offered tools %v", i, names)
		}
	}
	msgs := messagesOf(t, reqs[1])
	if len(msgs) != 4 || msgs[0].Role != "system" || msgs[1].Content != "write a file" {
		t.Fatalf("second request's messages: %+v", msgs)
	}
	asst, tool := msgs[2], msgs[3]
	if asst.Reasoning() != "write it" || len(asst.ToolCalls) != 1 || asst.ToolCalls[0].ID == "" {
		t.Errorf("assistant message sent back as %+v", asst)
	}
	if tool.Role != "tool" || tool.ToolCallID != asst.ToolCalls[0].ID || !strings.Contains(tool.Content, "result of write_file") {
		t.Errorf("tool message %+v", tool)
	}
	if !strings.Contains(msgs[0].Content, "cannot start other agents") {
		t.Errorf("system prompt: %q", msgs[0].Content)
	}
	// Audited like any other call, under the sub-agent's ID.
	var sessions []string
	for _, r := range al.recs {
		sessions = append(sessions, r.ToolName+"@"+r.SessionID)
	}
	if !slices.Equal(sessions, []string{"write_file@sa-000000000001"}) {
		t.Errorf("audit records %v", sessions)
	}
}

// TestLoopRefusesAndSuppresses: a call to a tool outside the sub-agent's
// set (spawn) is not run, and the same call twice in a row is answered
// without running it again; a different call in between resets that.
func TestLoopRefusesAndSuppresses(t *testing.T) {
	reg, tools, _ := newRegistry(t, "list_dir", "spawn")
	srv := agenttest.New(t,
		agenttest.Reply(agenttest.Call("a", "spawn", `{"task":"more"}`)),
		agenttest.Reply(agenttest.Call("b", "list_dir", `{"path":"."}`)),
		agenttest.Reply(agenttest.Call("c", "list_dir", `{ "path" : "." }`)),
		agenttest.Reply(agenttest.Call("d", "list_dir", `{"path":"src"}`)),
		agenttest.Reply(agenttest.Call("e", "list_dir", `{"path":"."}`)),
		agenttest.Reply(agenttest.Final("done")),
	)
	obs := &nopObserver{}
	out := (&agent.Loop{Model: newClient(srv, nil), Tools: reg, Allowed: subagentTools, MaxTurns: 10}).Run(context.Background(), "sa-000000000002", "look", obs)
	if out.Failure != nil || out.Answer != "done" {
		t.Fatalf("outcome %+v", out)
	}
	if got := tools["spawn"].calls(); len(got) != 0 {
		t.Errorf("spawn was run: %q", got)
	}
	if got := tools["list_dir"].calls(); len(got) != 3 {
		t.Errorf("list_dir ran %d times (%q), want 3: the repeat in a row is not run", len(got), got)
	}
	want := []string{"spawn:error:unknown_tool", "list_dir:success:", "list_dir:error:duplicate_call", "list_dir:success:", "list_dir:success:"}
	if !slices.Equal(obs.calls, want) {
		t.Errorf("calls %v, want %v", obs.calls, want)
	}
	msgs := messagesOf(t, srv.Requests()[5])
	var toolMsgs []string
	for _, m := range msgs {
		if m.Role == "tool" {
			toolMsgs = append(toolMsgs, m.Content)
		}
	}
	if !strings.HasPrefix(toolMsgs[0], "Error: Tool 'spawn' not found. Please use only the tools provided in the tool definitions: ") ||
		!strings.HasPrefix(toolMsgs[2], "Error: You just called list_dir with exactly these arguments") {
		t.Errorf("tool messages %q", toolMsgs)
	}
}

// TestLoopTurnLimit: a model that never stops calling tools is stopped at
// the turn limit, and the last text it wrote is kept.
func TestLoopTurnLimit(t *testing.T) {
	reg, _, _ := newRegistry(t, "list_dir")
	n := 0
	var mu sync.Mutex
	srv := agenttest.New(t, func(agenttest.Request) agenttest.Response {
		mu.Lock()
		defer mu.Unlock()
		n++
		return agenttest.Message(fmt.Sprintf(`{"role":"assistant","content":"step %d","tool_calls":[{"id":"x%d","type":"function","function":{"name":"list_dir","arguments":"{\"path\":\"%d\"}"}}]}`, n, n, n), "tool_calls")
	})
	out := (&agent.Loop{Model: newClient(srv, nil), Tools: reg, Allowed: subagentTools, MaxTurns: 4}).Run(context.Background(), "sa-000000000003", "loop", &nopObserver{})
	if out.Failure == nil || out.Failure.Code != agent.FailMaxTurns || out.Turns != 4 || out.Answer != "step 4" {
		t.Fatalf("outcome %+v", out)
	}
	if len(srv.Requests()) != 4 {
		t.Errorf("%d requests, want 4", len(srv.Requests()))
	}
}

// manager starts a Manager over srv and reg in a temp folder.
func manager(t *testing.T, srv *agenttest.Server, reg *registry.Registry, dir string, mod func(*agent.ManagerOptions)) *agent.Manager {
	t.Helper()
	opts := agent.ManagerOptions{Dir: dir, Model: newClient(srv, nil), Tools: reg, Allowed: subagentTools, MaxTurns: 5, Timeout: time.Minute, MaxConcurrent: 1}
	if mod != nil {
		mod(&opts)
	}
	m, err := agent.NewManager(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return m
}

// TestManagerBounds: the task deadline, cancellation, the concurrency
// bound, and what each leaves on disk.
func TestManagerBounds(t *testing.T) {
	reg, _, _ := newRegistry(t, "list_dir")
	hang := agenttest.New(t, agenttest.Reply(agenttest.Response{Hang: true}))

	t.Run("timeout", func(t *testing.T) {
		dir := t.TempDir()
		m := manager(t, hang, reg, dir, func(o *agent.ManagerOptions) { o.Timeout = 300 * time.Millisecond })
		task, err := m.Start("slow", "")
		if err != nil {
			t.Fatal(err)
		}
		done, _ := m.Wait(context.Background(), task.ID)
		if done.Status != agent.StatusFailed || done.Error == nil || done.Error.Code != agent.FailTimeout || done.FinishedAt == nil {
			t.Fatalf("task %+v", done)
		}
		onDisk := readTask(t, dir, task.ID)
		if onDisk.Status != agent.StatusFailed || onDisk.Error.Code != agent.FailTimeout {
			t.Errorf("on disk: %+v", onDisk)
		}
	})

	t.Run("cancel and busy", func(t *testing.T) {
		dir := t.TempDir()
		m := manager(t, hang, reg, dir, nil)
		task, err := m.Start("slow", "one")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Start("another", ""); err != agent.ErrBusy {
			t.Fatalf("second start: %v, want ErrBusy", err)
		}
		if got := readTask(t, dir, task.ID); got.Status != agent.StatusRunning || got.Label != "one" {
			t.Errorf("on disk while running: %+v", got)
		}
		done, ok := m.Cancel(context.Background(), task.ID)
		if !ok || done.Status != agent.StatusCanceled || done.Error.Code != agent.FailCanceled {
			t.Fatalf("canceled task %+v", done)
		}
		if got := readTask(t, dir, task.ID); got.Status != agent.StatusCanceled {
			t.Errorf("on disk: %+v", got)
		}
		// The slot is free again.
		next, err := m.Start("again", "")
		if err != nil {
			t.Fatalf("start after cancel: %v", err)
		}
		m.Cancel(context.Background(), next.ID)
		if l := m.List(); len(l) != 2 {
			t.Errorf("list %+v", l)
		}
	})
}

// TestManagerRestart: a finished task is kept across a restart; one left
// running (a crash) is marked interrupted; unreadable files are skipped.
func TestManagerRestart(t *testing.T) {
	reg, _, _ := newRegistry(t, "list_dir")
	srv := agenttest.New(t, agenttest.Reply(agenttest.Final("the answer")))
	dir := t.TempDir()
	m := manager(t, srv, reg, dir, nil)
	task, err := m.Start("answer", "a")
	if err != nil {
		t.Fatal(err)
	}
	if done, _ := m.Wait(context.Background(), task.ID); done.Status != agent.StatusCompleted {
		t.Fatalf("task %+v", done)
	}
	m.Close(context.Background())
	crashed := agent.Task{ID: "sa-00000000abcd", Task: "x", Status: agent.StatusRunning, CreatedAt: time.Now().UTC(), Turns: 3}
	data, _ := json.Marshal(crashed)
	if err := os.WriteFile(filepath.Join(dir, crashed.ID+".json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sa-0000000000ff.json"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}

	m2 := manager(t, srv, reg, dir, nil)
	got, ok := m2.Get(task.ID)
	if !ok || got.Status != agent.StatusCompleted || got.Answer != "the answer" || got.Label != "a" {
		t.Errorf("finished task after restart: %+v", got)
	}
	got, ok = m2.Get(crashed.ID)
	if !ok || got.Status != agent.StatusInterrupted || got.Error == nil || got.Error.Code != agent.FailInterrupted || got.FinishedAt == nil || got.Turns != 3 {
		t.Errorf("crashed task after restart: %+v", got)
	}
	if readTask(t, dir, crashed.ID).Status != agent.StatusInterrupted {
		t.Errorf("the crashed task's file still says running")
	}
	if l := m2.List(); len(l) != 2 {
		t.Errorf("list %+v", l)
	}
}

// TestManagerRedacts: a secret the model repeats is kept neither in the
// answer nor in the recorded arguments.
func TestManagerRedacts(t *testing.T) {
	reg, _, _ := newRegistry(t, "list_dir")
	srv := agenttest.New(t,
		agenttest.Reply(agenttest.Call("a", "list_dir", `{"path":"`+testKey+`"}`)),
		agenttest.Reply(agenttest.Final("the key is "+testKey)),
	)
	dir := t.TempDir()
	m := manager(t, srv, reg, dir, func(o *agent.ManagerOptions) {
		o.Redact = func(s string) string { return strings.ReplaceAll(s, testKey, "[REDACTED]") }
	})
	task, _ := m.Start("leak", "")
	done, _ := m.Wait(context.Background(), task.ID)
	if done.Answer != "the key is [REDACTED]" || len(done.ToolCalls) != 1 || strings.Contains(done.ToolCalls[0].Arguments, testKey) {
		t.Errorf("task %+v", done)
	}
	data, _ := os.ReadFile(filepath.Join(dir, task.ID+".json"))
	if strings.Contains(string(data), testKey) {
		t.Errorf("the task file carries the key")
	}
}

func readTask(t *testing.T, dir, id string) agent.Task {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, id+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var task agent.Task
	if err := json.Unmarshal(data, &task); err != nil {
		t.Fatal(err)
	}
	return task
}
