package main

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/countbot/toolsvc/internal/agent"
	"github.com/countbot/toolsvc/internal/agent/agenttest"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/toolerr"
)

const llmKey = "sk-e2e-llm-key-0123456789abcdef"

var agentID = regexp.MustCompile(`sa-[0-9a-f]{12}`)

// llmEnv is the configuration that turns sub-agents on, with the fake
// model at url.
func llmEnv(url string, extra map[string]string) map[string]string {
	env := map[string]string{"LLM_BASE_URL": url, "LLM_MODEL": "fake-model", "LLM_API_KEY": llmKey}
	for k, v := range extra {
		env[k] = v
	}
	return env
}

func (s *testServer) toolNames(t *testing.T) []string {
	t.Helper()
	_, body := s.do(t, "GET", "/tools", nil, nil)
	var defs []registry.Definition
	if err := json.Unmarshal(body, &defs); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range defs {
		names = append(names, d.Function.Name)
	}
	return names
}

func (s *testServer) agentTask(t *testing.T, id string) agent.Task {
	t.Helper()
	resp, body := s.do(t, "GET", "/agents/"+id, nil, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("GET /agents/%s: %d %s", id, resp.StatusCode, body)
	}
	var task agent.Task
	if err := json.Unmarshal(body, &task); err != nil {
		t.Fatal(err)
	}
	return task
}

// TestSpawnEndToEnd: the real service, its real model client over HTTP to
// a scripted model. The sub-agent writes a file and runs a command through
// the registry, then answers; spawn with wait returns the answer; the task
// is listed, shown with its calls, audited under its ID, and still there
// after a restart. The model API key appears nowhere: not in results, the
// audit log, the task files, the log, nor a command's environment.
func TestSpawnEndToEnd(t *testing.T) {
	t.Parallel()
	llm := agenttest.New(t,
		agenttest.Reply(agenttest.Call("c1", "write_file", `{"path":"notes/report.md","content":"# Report\nall fine\n"}`)),
		// An Ollama-style call: no id, no type, arguments as an object.
		agenttest.Reply(agenttest.Message(`{"role":"assistant","content":null,"tool_calls":[{"function":{"name":"exec","arguments":{"command":"env; echo done"}}}]}`, "stop")),
		agenttest.Reply(agenttest.Final("Report written to notes/report.md.")),
	)
	env := llmEnv(llm.URL, map[string]string{"EXEC_SANDBOX": "none"})
	s := startServer(t, env)

	names := s.toolNames(t)
	if !slices.Contains(names, "spawn") {
		t.Fatalf("GET /tools lacks spawn with a model configured: %v", names)
	}
	// The sub-agent's own side: exec run directly sees no key either.
	envOut := mustSucceed(t, s.invoke(t, "exec", map[string]any{"command": "env"}))
	if strings.Contains(envOut, llmKey) || strings.Contains(envOut, "TOOLSVC_LLM") {
		t.Errorf("exec's environment carries the model key:\n%s", envOut)
	}

	out := mustSucceed(t, s.invoke(t, "spawn", map[string]any{"task": "Write a report to notes/report.md", "label": "report", "wait": true}))
	assertContains(t, "spawn result", out, "completed in 3 turns with 2 tool calls", "Report written to notes/report.md.")
	id := agentID.FindString(out)
	if id == "" {
		t.Fatalf("no sub-agent ID in %q", out)
	}
	data, err := os.ReadFile(filepath.Join(s.Workspace, "notes", "report.md"))
	if err != nil || string(data) != "# Report\nall fine\n" {
		t.Fatalf("the sub-agent's file: %q, %v", data, err)
	}

	// What the model was sent: the key as bearer, the sub-agent's tools
	// and never spawn, and the command's output without the key.
	reqs := llm.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests, want 3", len(reqs))
	}
	for i, r := range reqs {
		if r.Header.Get("Authorization") != "Bearer "+llmKey || r.Model != "fake-model" {
			t.Errorf("request %d: authorization %q model %q", i, r.Header.Get("Authorization"), r.Model)
		}
		got := r.ToolNames()
		if slices.Contains(got, "spawn") || !slices.Contains(got, "write_file") || !slices.Contains(got, "exec") {
			t.Errorf("request %d offered %v", i, got)
		}
		if strings.Contains(string(r.Body), llmKey) {
			t.Errorf("request %d carries the key in its body", i)
		}
	}
	if !strings.Contains(string(reqs[2].Body), "done") {
		t.Errorf("the exec result did not reach the model: %s", reqs[2].Body)
	}

	// GET /agents and GET /agents/{id}.
	resp, body := s.do(t, "GET", "/agents", nil, nil)
	var list struct{ Agents []agent.Summary }
	if resp.StatusCode != 200 || json.Unmarshal(body, &list) != nil || len(list.Agents) != 1 || list.Agents[0].ID != id ||
		list.Agents[0].Status != agent.StatusCompleted || list.Agents[0].Label != "report" || list.Agents[0].Turns != 3 {
		t.Fatalf("GET /agents: %d %s", resp.StatusCode, body)
	}
	task := s.agentTask(t, id)
	var calls []string
	for _, c := range task.ToolCalls {
		calls = append(calls, c.Name+":"+c.Status)
	}
	if !slices.Equal(calls, []string{"write_file:success", "exec:success"}) || task.Answer != "Report written to notes/report.md." || task.FinishedAt == nil {
		t.Errorf("GET /agents/%s: %+v", id, task)
	}

	// Audited like any other call, with the sub-agent's ID as session.
	for _, c := range task.ToolCalls {
		rec := readAudit(t, s, c.CallID)
		if rec.SessionID != id || rec.ToolName != c.Name || rec.Status != registry.StatusSuccess {
			t.Errorf("audit record of %s: session %q tool %q status %q", c.CallID, rec.SessionID, rec.ToolName, rec.Status)
		}
	}

	// The key nowhere in the data folder, nor in the log.
	assertNoKey(t, s)

	// A restart keeps the finished task.
	s.Stop(t)
	env["WORKSPACE"], env["DATA_DIR"] = s.Workspace, s.DataDir
	s2 := startServer(t, env)
	again := s2.agentTask(t, id)
	if again.Status != agent.StatusCompleted || again.Answer != task.Answer || len(again.ToolCalls) != 2 {
		t.Errorf("after a restart: %+v", again)
	}
}

func assertNoKey(t *testing.T, s *testServer) {
	t.Helper()
	filepath.WalkDir(s.DataDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if raw, _ := os.ReadFile(p); strings.Contains(string(raw), llmKey) {
			t.Errorf("%s carries the model key", p)
		}
		return nil
	})
	if strings.Contains(s.Logs(), llmKey) {
		t.Errorf("the log carries the model key")
	}
}

// TestSpawnBackgroundCancelAndRestart: spawn returns at once with the ID;
// a second spawn beyond TOOLSVC_AGENT_MAX_CONCURRENT is busy; DELETE
// cancels; a task running when the service stops is interrupted, and says
// so after a restart.
func TestSpawnBackgroundCancelAndRestart(t *testing.T) {
	t.Parallel()
	llm := agenttest.New(t, agenttest.Reply(agenttest.Response{Hang: true}))
	env := llmEnv(llm.URL, map[string]string{"AGENT_MAX_CONCURRENT": "1"})
	s := startServer(t, env)

	out := mustSucceed(t, s.invoke(t, "spawn", map[string]any{"task": "think hard"}))
	id := agentID.FindString(out)
	assertContains(t, "spawn result", out, "started in the background", "GET /agents/"+id)
	if got := s.agentTask(t, id); got.Status != agent.StatusRunning || got.Task != "think hard" {
		t.Errorf("running task: %+v", got)
	}
	mustFail(t, s.invoke(t, "spawn", map[string]any{"task": "more"}), toolerr.Busy, "TOOLSVC_AGENT_MAX_CONCURRENT")

	resp, body := s.do(t, "DELETE", "/agents/"+id, nil, nil)
	var task agent.Task
	if resp.StatusCode != 200 || json.Unmarshal(body, &task) != nil || task.Status != agent.StatusCanceled || task.Error == nil || task.Error.Code != agent.FailCanceled {
		t.Fatalf("DELETE /agents/%s: %d %s", id, resp.StatusCode, body)
	}
	for _, p := range []string{"/agents/sa-000000000000", "/agents/..%2Fetc"} {
		if resp, body := s.do(t, "GET", p, nil, nil); resp.StatusCode != 404 {
			t.Errorf("GET %s: %d %s", p, resp.StatusCode, body)
		}
	}

	// Another one, left running at shutdown.
	out = mustSucceed(t, s.invoke(t, "spawn", map[string]any{"task": "again", "label": "second"}))
	id2 := agentID.FindString(out)
	s.Stop(t)
	env["WORKSPACE"], env["DATA_DIR"] = s.Workspace, s.DataDir
	s2 := startServer(t, env)
	if got := s2.agentTask(t, id2); got.Status != agent.StatusInterrupted || got.Error == nil || got.Error.Code != agent.FailInterrupted {
		t.Errorf("task running at shutdown, after a restart: %+v", got)
	}
	if got := s2.agentTask(t, id); got.Status != agent.StatusCanceled {
		t.Errorf("canceled task after a restart: %+v", got)
	}
	assertNoKey(t, s2)
}

// TestSpawnTurnLimitEndToEnd: a model that never stops calling tools is
// stopped at TOOLSVC_AGENT_MAX_TURNS and spawn reports it.
func TestSpawnTurnLimitEndToEnd(t *testing.T) {
	t.Parallel()
	llm := agenttest.New(t, agenttest.Reply(agenttest.Message(`{"role":"assistant","content":"still looking","tool_calls":[{"function":{"name":"list_dir","arguments":""}}]}`, "tool_calls")))
	s := startServer(t, llmEnv(llm.URL, map[string]string{"AGENT_MAX_TURNS": "3"}))
	msg := mustFail(t, s.invoke(t, "spawn", map[string]any{"task": "look around", "wait": true}), toolerr.ToolError,
		"failed after 3 turns", "TOOLSVC_AGENT_MAX_TURNS", "still looking")
	task := s.agentTask(t, agentID.FindString(msg))
	// Three replies, three calls: the first runs, the repeats are answered
	// from it without running again.
	var codes []string
	for _, c := range task.ToolCalls {
		codes = append(codes, c.Status+":"+c.ErrorCode)
	}
	if task.Error == nil || task.Error.Code != agent.FailMaxTurns || !slices.Equal(codes, []string{"success:", "error:duplicate_call", "error:duplicate_call"}) {
		t.Errorf("task %+v", task)
	}
}

// TestAgentsOffWithoutModel: with no model configured there is no spawn,
// workflow_run or send_message tool and no /agents route.
func TestAgentsOffWithoutModel(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	names := s.toolNames(t)
	for _, tool := range []string{"spawn", "workflow_run", "send_message"} {
		if slices.Contains(names, tool) {
			t.Errorf("%s offered without a model: %v", tool, names)
		}
		if resp, body := s.do(t, "POST", "/tools/"+tool+"/invoke", strings.NewReader(`{"text":"hi"}`), nil); resp.StatusCode != 404 || !strings.Contains(string(body), "unknown_tool") {
			t.Errorf("invoking %s without a model: %d %s", tool, resp.StatusCode, body)
		}
	}
	if resp, body := s.do(t, "GET", "/agents", nil, nil); resp.StatusCode != 404 {
		t.Errorf("GET /agents: %d %s", resp.StatusCode, body)
	}
}

// TestAgentConfigErrors: sub-agent settings that make no sense stop
// start-up with a message naming the variable, and a URL with a password
// in it is refused without repeating it.
func TestAgentConfigErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"base URL without model", map[string]string{"LLM_BASE_URL": "http://localhost:11434/v1"}, "TOOLSVC_LLM_MODEL"},
		{"model without base URL", map[string]string{"LLM_MODEL": "m"}, "TOOLSVC_LLM_MODEL"},
		{"not http", map[string]string{"LLM_BASE_URL": "ftp://models.example/v1", "LLM_MODEL": "m"}, "TOOLSVC_LLM_BASE_URL"},
		{"credentials in the URL", map[string]string{"LLM_BASE_URL": "https://user:hunter2-password@api.example/v1", "LLM_MODEL": "m"}, "TOOLSVC_LLM_API_KEY"},
		{"zero turns", map[string]string{"AGENT_MAX_TURNS": "0"}, "TOOLSVC_AGENT_MAX_TURNS"},
		{"zero concurrency", map[string]string{"AGENT_MAX_CONCURRENT": "0"}, "TOOLSVC_AGENT_MAX_CONCURRENT"},
		{"tiny timeout", map[string]string{"AGENT_TIMEOUT": "1ms"}, "TOOLSVC_AGENT_TIMEOUT"},
		{"tiny request timeout", map[string]string{"LLM_TIMEOUT": "1ms"}, "TOOLSVC_LLM_TIMEOUT"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			err := startError(t, c.env)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("run() = %v, want an error naming %s", err, c.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the error repeats the password: %v", err)
			}
		})
	}
}
