package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/agent"
	"github.com/countbot/toolsvc/internal/pgstore/pgtest"
)

// TestApprovalAgentAimock: a sub-agent whose model (aimock) calls exec,
// which the policy holds for a person, waits: its task reads
// waiting_approval in GET /agents and GET /agents/{id}, its event stream
// names the approval, the tool and the summary, and the approver sees the
// call (made by the task's key, in the task's session) in GET /approvals.
// It waits past its own TOOLSVC_AGENT_TIMEOUT, which stands still while a
// person decides. Once bob approves, the call runs once and the model is
// given its output as the call's result, and the task completes; a call
// bob rejects does not run, and the model is given the rejection with its
// reason. Each fixture answers only the reply to the call before it (its
// tool_call_id) at its turn, so a task that lost the call, or took the
// wait for a turn, would get aimock's strict 503.
func TestApprovalAgentAimock(t *testing.T) {
	t.Parallel()
	const (
		approvedTask = "Write the marker file."
		rejectedTask = "Clean the build folder."
		// The task's own time; the approval is given after more than
		// this has passed.
		timeout = 6 * time.Second
	)
	step := func(task string, turn int, after, id, command, answer string, latency int) string {
		match := map[string]any{"userMessage": task, "turnIndex": turn, "hasToolResult": after != ""}
		if after != "" {
			match["toolCallId"] = after
		}
		fixture := map[string]any{"match": match, "response": map[string]any{"content": answer}}
		if command != "" {
			fixture["response"] = map[string]any{"toolCalls": []any{map[string]any{"id": id, "name": "exec", "arguments": map[string]any{"command": command}}}}
		}
		if latency > 0 {
			// Time for the test to follow the task's events before its
			// first call is held.
			fixture["chaos"] = map[string]any{"latencyMs": latency}
		}
		b, err := json.Marshal(fixture)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	const approvedCmd = "echo agent-approved-output | tee approved.txt"
	const rejectedCmd = "touch rejected.txt"
	llm := startAimock(t, `{"fixtures": [`+strings.Join([]string{
		step(approvedTask, 0, "", "call_a", approvedCmd, "", 1000),
		step(approvedTask, 1, "call_a", "", "", "Wrote approved.txt.", 0),
		step(rejectedTask, 0, "", "call_b", rejectedCmd, "", 0),
		step(rejectedTask, 1, "call_b", "", "", "The clean-up was refused.", 0),
	}, ",\n")+`]}`)
	s := startApprovals(t, llmEnv(llm, map[string]string{"AGENT_TIMEOUT": timeout.String()}))
	alice, bob := s.asKey(policyAliceKey), s.asKey(policyBobKey)
	exists := func(name string) bool { _, err := os.Stat(filepath.Join(s.Workspace, name)); return err == nil }

	// Approved.
	res := alice.invoke(t, "spawn", map[string]any{"task": approvedTask})
	id := agentID.FindString(mustSucceed(t, res))
	if id == "" {
		t.Fatalf("no task ID in %+v", res)
	}
	events := followAgent(t, alice, id)
	waiting := waitAgentStatus(t, alice, id, agent.StatusWaitingApproval)
	ap := waiting.Approval
	if ap == nil || ap.ID == "" || ap.Tool != "exec" || !strings.Contains(ap.Summary, approvedCmd) || ap.ExpiresAt == nil {
		t.Fatalf("GET /agents/%s while it waits: %+v", id, ap)
	}
	listed := listedAgent(t, alice, id)
	if listed.Status != agent.StatusWaitingApproval || listed.Approval == nil || listed.Approval.ID != ap.ID {
		t.Errorf("GET /agents lists the task as %+v", listed)
	}
	resp, body := bob.do(t, "GET", "/approvals", nil, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /approvals: %d %s", resp.StatusCode, body)
	}
	assertContains(t, "bob's GET /approvals", string(body), ap.ID, `"key":"alice"`, `"session_id":"`+id+`"`, "agent-approved-output")

	// Past the task's own time: still waiting, nothing ran.
	time.Sleep(timeout + time.Second)
	if got := alice.agentTask(t, id); got.Status != agent.StatusWaitingApproval || exists("approved.txt") {
		t.Fatalf("after its timeout, the task is %s (%+v); approved.txt written: %v", got.Status, got.Error, exists("approved.txt"))
	}
	if code, body := decide(t, bob, ap.ID, "approve", "fine by me"); code != http.StatusOK {
		t.Fatalf("bob approves: %d %s", code, body)
	}
	done := waitAgentEnd(t, alice, id)
	if done.Status != agent.StatusCompleted || done.Answer != "Wrote approved.txt." || done.Turns != 2 || done.Approval != nil {
		t.Fatalf("the approved task: %+v (error %+v)", done, done.Error)
	}
	if len(done.ToolCalls) != 1 || done.ToolCalls[0].Status != "success" || done.ToolCalls[0].ApprovalID != ap.ID {
		t.Errorf("its calls: %+v", done.ToolCalls)
	}
	if b, err := os.ReadFile(filepath.Join(s.Workspace, "approved.txt")); err != nil || string(b) != "agent-approved-output\n" {
		t.Errorf("approved.txt: %q, %v", b, err)
	}
	reqs := aimockJournal(t, llm)
	if out := toolResultOf(t, reqs, "call_a"); !strings.Contains(out, "agent-approved-output") || strings.Contains(out, "waits for a person") {
		t.Errorf("the model was given, for the approved call:\n%s", out)
	}
	got := events()
	assertContains(t, "the task's events", strings.Join(got, "\n"),
		`waiting_approval {"type":"waiting_approval","agent":"`+id+`"`, `"approval":{"approval_id":"`+ap.ID+`","tool":"exec","summary":"run the command: \"`+approvedCmd,
		`resumed {"type":"resumed"`, `"status":"approved","decided_by":"bob","reason":"fine by me"}`,
		`"status":"success","call_id":`, `"approval_id":"`+ap.ID+`"}}`)
	if order := eventTypes(got); order != "turn waiting_approval resumed tool_call turn end" {
		t.Errorf("the task's events: %s\n%s", order, strings.Join(got, "\n"))
	}

	// Rejected.
	res = alice.invoke(t, "spawn", map[string]any{"task": rejectedTask})
	id = agentID.FindString(mustSucceed(t, res))
	ap = waitAgentStatus(t, alice, id, agent.StatusWaitingApproval).Approval
	if code, body := decide(t, bob, ap.ID, "reject", "the build folder is in use"); code != http.StatusOK {
		t.Fatalf("bob rejects: %d %s", code, body)
	}
	done = waitAgentEnd(t, alice, id)
	if done.Status != agent.StatusCompleted || done.Answer != "The clean-up was refused." {
		t.Fatalf("the rejected task: %+v (error %+v)", done, done.Error)
	}
	if len(done.ToolCalls) != 1 || done.ToolCalls[0].ErrorCode != "approval_rejected" || done.ToolCalls[0].ApprovalID != ap.ID {
		t.Errorf("its calls: %+v", done.ToolCalls)
	}
	if exists("rejected.txt") {
		t.Error("the rejected command ran")
	}
	reqs = aimockJournal(t, llm)
	assertContains(t, "the model's result of the rejected call", toolResultOf(t, reqs, "call_b"), "rejected", "the build folder is in use", "bob")
	for i, r := range reqs {
		if r.Response.Status != http.StatusOK {
			t.Errorf("request %d: aimock answered %d", i, r.Response.Status)
		}
	}
	if len(reqs) != 4 {
		t.Errorf("aimock was sent %d requests, want 4 (two turns per task)", len(reqs))
	}
}

// waitAgentStatus polls GET /agents/{id} until the task has status want.
func waitAgentStatus(t *testing.T, s *testServer, id, want string) agent.Task {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		task := s.agentTask(t, id)
		if task.Status == want {
			return task
		}
		if time.Now().After(deadline) || (task.Status != agent.StatusRunning && task.Status != agent.StatusWaitingApproval) {
			t.Fatalf("task %s is %s, want %s: %+v (error %+v)", id, task.Status, want, task, task.Error)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitAgentEnd polls GET /agents/{id} until the task has ended.
func waitAgentEnd(t *testing.T, s *testServer, id string) agent.Task {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		task := s.agentTask(t, id)
		if !agent.Active(task.Status) {
			return task
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s still %s", id, task.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// listedAgent returns the task id as GET /agents lists it.
func listedAgent(t *testing.T, s *testServer, id string) agent.Summary {
	t.Helper()
	resp, body := s.do(t, "GET", "/agents", nil, nil)
	var list struct{ Agents []agent.Summary }
	if err := json.Unmarshal(body, &list); resp.StatusCode != http.StatusOK || err != nil {
		t.Fatalf("GET /agents: %d %s %v", resp.StatusCode, body, err)
	}
	for _, a := range list.Agents {
		if a.ID == id {
			return a
		}
	}
	t.Fatalf("GET /agents does not list %s: %s", id, body)
	return agent.Summary{}
}

// followAgent reads GET /agents/{id}/events in the background; the
// function it returns waits for the stream's end and returns each event as
// "type data".
func followAgent(t *testing.T, s *testServer, id string) func() []string {
	t.Helper()
	req, err := http.NewRequest("GET", s.URL+"/agents/"+id+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.Key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		t.Fatalf("GET /agents/%s/events: %d", id, resp.StatusCode)
	}
	ch := make(chan []string, 1)
	go func() {
		defer resp.Body.Close()
		var out []string
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		event := ""
		for sc.Scan() {
			line := sc.Text()
			if e, ok := strings.CutPrefix(line, "event: "); ok {
				event = e
			} else if data, ok := strings.CutPrefix(line, "data: "); ok {
				out = append(out, event+" "+data)
				if event == "end" {
					break
				}
			}
		}
		ch <- out
	}()
	return func() []string {
		select {
		case out := <-ch:
			return out
		case <-time.After(30 * time.Second):
			t.Fatalf("the event stream of %s did not end", id)
			return nil
		}
	}
}

// eventTypes is the types of events as followAgent returns them.
func eventTypes(events []string) string {
	types := make([]string, len(events))
	for i, e := range events {
		types[i], _, _ = strings.Cut(e, " ")
	}
	return strings.Join(types, " ")
}

// toolResultOf returns the result of call id the model was given, from
// aimock's journal.
func toolResultOf(t *testing.T, reqs []aimockRequest, id string) string {
	t.Helper()
	for _, r := range reqs {
		if out, ok := r.toolResults()[id]; ok {
			return out
		}
	}
	t.Fatalf("no request carried the result of %s", id)
	return ""
}

// TestApprovalAgentReplicasAimock: with TOOLSVC_DATABASE_URL, a task
// waiting on replica a for an approval reads waiting_approval on replica
// b (its list, the task, its events from the first), keeps its lease
// while it waits (b does not take it for a task of a dead replica, though
// it waits several leases), is approved on b, and goes on on a, where it
// runs the call and completes.
func TestApprovalAgentReplicasAimock(t *testing.T) {
	t.Parallel()
	const task = "Write the replica marker."
	const command = "echo replica-approved-output | tee replica.txt"
	llm := startAimock(t, fmt.Sprintf(`{"fixtures": [
  {"match": {"userMessage": %[1]q, "turnIndex": 0, "hasToolResult": false},
   "response": {"toolCalls": [{"id": "call_r", "name": "exec", "arguments": {"command": %[2]q}}]}},
  {"match": {"userMessage": %[1]q, "turnIndex": 1, "toolCallId": "call_r"},
   "response": {"content": "Wrote replica.txt."}}
]}`, task, command))
	db := pgtest.NewDatabase(t)
	env := llmEnv(llm, map[string]string{"DATABASE_URL": db, "AGENT_LEASE": "1s"})
	a := startApprovals(t, env)
	env["WORKSPACE"] = a.Workspace
	b := startApprovals(t, env, asProcess())
	aliceA, aliceB, bobB := a.asKey(policyAliceKey), b.asKey(policyAliceKey), b.asKey(policyBobKey)

	id := agentID.FindString(mustSucceed(t, aliceA.invoke(t, "spawn", map[string]any{"task": task})))
	if id == "" {
		t.Fatal("no task ID")
	}
	ap := waitAgentStatus(t, aliceB, id, agent.StatusWaitingApproval).Approval
	if ap == nil || ap.Tool != "exec" || !strings.Contains(ap.Summary, command) {
		t.Fatalf("replica b's GET /agents/%s: %+v", id, ap)
	}
	if l := listedAgent(t, aliceB, id); l.Status != agent.StatusWaitingApproval || l.Approval == nil || l.Approval.ID != ap.ID {
		t.Errorf("replica b lists %+v", l)
	}
	events := followAgent(t, aliceB, id)
	// Several leases: a renews the waiting task's, so b leaves it be.
	time.Sleep(3500 * time.Millisecond)
	if got := aliceB.agentTask(t, id); got.Status != agent.StatusWaitingApproval {
		t.Fatalf("after three leases of waiting, the task is %s: %+v", got.Status, got.Error)
	}
	if code, body := decide(t, bobB, ap.ID, "approve", "from b"); code != http.StatusOK {
		t.Fatalf("bob approves on b: %d %s", code, body)
	}
	done := waitAgentEnd(t, aliceB, id)
	if done.Status != agent.StatusCompleted || done.Answer != "Wrote replica.txt." || len(done.ToolCalls) != 1 || done.ToolCalls[0].Status != "success" {
		t.Fatalf("the task: %+v (error %+v, calls %+v)", done, done.Error, done.ToolCalls)
	}
	if out := toolResultOf(t, aimockJournal(t, llm), "call_r"); !strings.Contains(out, "replica-approved-output") {
		t.Errorf("the model was given:\n%s", out)
	}
	got := events()
	if order := eventTypes(got); order != "turn waiting_approval resumed tool_call turn end" {
		t.Errorf("replica b's stream of the task: %s\n%s", order, strings.Join(got, "\n"))
	}
	assertContains(t, "replica b's stream of the task", strings.Join(got, "\n"), `"approval_id":"`+ap.ID+`"`, `"decided_by":"bob","reason":"from b"`)
}
