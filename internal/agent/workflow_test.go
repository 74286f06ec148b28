package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/agent"
	"github.com/countbot/toolsvc/internal/agent/agenttest"
)

// taskOf returns the task (the first user message) of a model request.
func taskOf(t testing.TB, r agenttest.Request) string {
	t.Helper()
	for _, raw := range r.Messages {
		var m struct{ Role, Content string }
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		if m.Role == "user" {
			return m.Content
		}
	}
	t.Fatalf("no user message in %s", r.Body)
	return ""
}

var slotOf = regexp.MustCompile(`You are agent "([^"]+)"`)

// slotModel is a scripted model that answers each workflow agent by its
// ID: "output of <id>", or "review by <id>" in a cross-review round. hook,
// when set, may hold or change the answer of a request.
func slotModel(t *testing.T, hook func(id string, review bool) *agenttest.Response) *agenttest.Server {
	return agenttest.New(t, func(r agenttest.Request) agenttest.Response {
		task := taskOf(t, r)
		m := slotOf.FindStringSubmatch(task)
		if m == nil {
			return agenttest.Final("not a workflow task")
		}
		review := strings.Contains(task, "cross-review round")
		if hook != nil {
			if resp := hook(m[1], review); resp != nil {
				return *resp
			}
		}
		if review {
			return agenttest.Final("review by " + m[1])
		}
		return agenttest.Final("output of " + m[1])
	})
}

// requestSlots returns, in the order the model received them, the agent ID
// of each request and its task.
func requestSlots(t *testing.T, srv *agenttest.Server) (ids []string, tasks map[string]string) {
	tasks = map[string]string{}
	for _, r := range srv.Requests() {
		task := taskOf(t, r)
		id := slotOf.FindStringSubmatch(task)[1]
		if strings.Contains(task, "cross-review round") {
			id += "/review"
		}
		ids = append(ids, id)
		tasks[id] = task
	}
	return ids, tasks
}

func workflowManager(t *testing.T, srv *agenttest.Server, concurrent int) *agent.Manager {
	reg, _, _ := newRegistry(t, "list_dir")
	return manager(t, srv, reg, t.TempDir(), func(o *agent.ManagerOptions) { o.MaxConcurrent = concurrent })
}

func runWorkflow(t *testing.T, ctx context.Context, m *agent.Manager, w agent.Workflow) (agent.Report, []string) {
	t.Helper()
	if err := w.Normalize(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var lines []string
	rep := agent.RunWorkflow(ctx, m, w, func(s string) {
		mu.Lock()
		lines = append(lines, s)
		mu.Unlock()
	})
	return rep, lines
}

func statuses(rep agent.Report) []string {
	var out []string
	for _, o := range rep.Slots {
		out = append(out, o.Slot.ID+":"+o.Result.Status)
	}
	return out
}

// TestWorkflowPipeline: stages run one after another, in the order given,
// and each is given the outputs of all the earlier ones.
func TestWorkflowPipeline(t *testing.T) {
	srv := slotModel(t, nil)
	m := workflowManager(t, srv, 3)
	rep, lines := runWorkflow(t, t.Context(), m, agent.Workflow{Goal: "write a report", Mode: "pipeline", Agents: []agent.Slot{
		{ID: "research", Role: "Researcher", Task: "find facts"},
		{ID: "draft", Task: "write a draft"},
		{ID: "edit", Role: "Editor", Task: "polish it"},
	}})
	ids, tasks := requestSlots(t, srv)
	if !slices.Equal(ids, []string{"research", "draft", "edit"}) {
		t.Fatalf("model requests in order %v", ids)
	}
	assertHas(t, "draft's task", tasks["draft"], "write a report", "Your task:\nwrite a draft", "--- research (Researcher) ---\noutput of research")
	assertHas(t, "edit's task", tasks["edit"], "Your role: Editor", "output of research", "output of draft")
	if strings.Contains(tasks["research"], "output of") {
		t.Errorf("the first stage was given outputs: %s", tasks["research"])
	}
	md := rep.Markdown()
	assertHas(t, "report", md, "# Workflow (pipeline): write a report", "3 agents: 3 completed, 0 failed, 0 skipped",
		"last stage's output, `edit`", "## 1. `research`: Researcher\n\noutput of research", "## 3. `edit`: Editor\n\noutput of edit")
	if !slices.Contains(lines, "[draft] starting") {
		t.Errorf("progress lines %q", lines)
	}
	// Each stage is a sub-agent task of its own, listed like spawn's.
	if l := mustList(t, m); len(l) != 3 || !strings.HasPrefix(l[0].Label, "workflow: ") {
		t.Errorf("tasks %+v", l)
	}
}

// TestWorkflowGraph: a slot starts once its dependencies are done and sees
// their outputs; independent slots run at the same time (b's model reply
// is held until c's request has arrived); a failed slot's dependents are
// skipped, saying why, while the others go on.
func TestWorkflowGraph(t *testing.T) {
	cArrived := make(chan struct{})
	srv := slotModel(t, func(id string, _ bool) *agenttest.Response {
		switch id {
		case "c":
			close(cArrived)
		case "b":
			select {
			case <-cArrived:
			case <-time.After(20 * time.Second):
				t.Error("b and c did not run at the same time")
			}
		}
		return nil
	})
	m := workflowManager(t, srv, 2)
	rep, _ := runWorkflow(t, t.Context(), m, agent.Workflow{Goal: "g", Mode: "graph", Agents: []agent.Slot{
		{ID: "d", Task: "combine", DependsOn: []string{"b", "c"}},
		{ID: "a", Task: "start"},
		{ID: "b", Task: "left", DependsOn: []string{"a"}},
		{ID: "c", Task: "right", DependsOn: []string{"a"}},
	}})
	ids, tasks := requestSlots(t, srv)
	if len(ids) != 4 || ids[0] != "a" || ids[3] != "d" {
		t.Fatalf("model requests in order %v", ids)
	}
	assertHas(t, "b's task", tasks["b"], "output of a")
	assertHas(t, "d's task", tasks["d"], "--- b (b) ---\noutput of b", "--- c (c) ---\noutput of c")
	if strings.Contains(tasks["d"], "output of a") {
		t.Errorf("d was given an output it does not depend on")
	}
	if got := statuses(rep); !slices.Equal(got, []string{"d:completed", "a:completed", "b:completed", "c:completed"}) {
		t.Errorf("statuses %v", got)
	}

	t.Run("failure skips dependents", func(t *testing.T) {
		srv := slotModel(t, func(id string, _ bool) *agenttest.Response {
			if id == "b" {
				return &agenttest.Response{Status: 400, Body: `{"error":{"message":"model refuses"}}`}
			}
			return nil
		})
		m := workflowManager(t, srv, 2)
		rep, _ := runWorkflow(t, t.Context(), m, agent.Workflow{Goal: "g", Mode: "graph", Agents: []agent.Slot{
			{ID: "a", Task: "start"},
			{ID: "b", Task: "left", DependsOn: []string{"a"}},
			{ID: "c", Task: "right", DependsOn: []string{"a"}},
			{ID: "d", Task: "combine", DependsOn: []string{"c", "b"}},
			{ID: "e", Task: "after d", DependsOn: []string{"d"}},
		}})
		if got := statuses(rep); !slices.Equal(got, []string{"a:completed", "b:failed", "c:completed", "d:skipped", "e:skipped"}) {
			t.Fatalf("statuses %v", got)
		}
		ids, _ := requestSlots(t, srv)
		if slices.Contains(ids, "d") || slices.Contains(ids, "e") {
			t.Errorf("a skipped slot reached the model: %v", ids)
		}
		assertHas(t, "report", rep.Markdown(), "5 agents: 2 completed, 1 failed, 2 skipped",
			"`d` (d): skipped: it depends on \"b\", which did not complete", "`e` (e): skipped: it depends on \"d\"", "model refuses")
	})
}

// TestWorkflowCouncil: all members answer first, in parallel; then, with
// cross_review, each reviews the others' answers.
func TestWorkflowCouncil(t *testing.T) {
	srv := slotModel(t, nil)
	m := workflowManager(t, srv, 3)
	rep, _ := runWorkflow(t, t.Context(), m, agent.Workflow{Goal: "choose a database", Mode: "council", CrossReview: true, Agents: []agent.Slot{
		{ID: "ops", Task: "judge", Perspective: "the operator"},
		{ID: "dev", Task: "judge", Perspective: "the developer"},
		{ID: "user", Task: "judge", Perspective: "the end user"},
	}})
	ids, tasks := requestSlots(t, srv)
	if len(ids) != 6 {
		t.Fatalf("model requests %v", ids)
	}
	first, reviews := ids[:3], ids[3:]
	slices.Sort(first)
	slices.Sort(reviews)
	if !slices.Equal(first, []string{"dev", "ops", "user"}) || !slices.Equal(reviews, []string{"dev/review", "ops/review", "user/review"}) {
		t.Fatalf("the review round did not follow the first: %v", ids)
	}
	assertHas(t, "ops' first task", tasks["ops"], "Your perspective: the operator")
	if strings.Contains(tasks["ops"], "output of") {
		t.Errorf("a first-round member saw another's answer")
	}
	assertHas(t, "ops' review", tasks["ops/review"], "Your first answer was:\n\n--- ops (ops) ---\noutput of ops", "--- dev (dev) ---\noutput of dev", "--- user (user) ---\noutput of user")
	assertHas(t, "report", rep.Markdown(), "Cross-review: 3 reviews completed", "### Cross-review by `dev`\n\nreview by dev")
}

// TestWorkflowValidation: a workflow that cannot run is refused before any
// agent starts, with a message saying what to change.
func TestWorkflowValidation(t *testing.T) {
	slot := func(id string, deps ...string) agent.Slot { return agent.Slot{ID: id, Task: "t", DependsOn: deps} }
	many := make([]agent.Slot, agent.MaxWorkflowAgents+1)
	for i := range many {
		many[i] = agent.Slot{Task: "t"}
	}
	tests := []struct {
		name string
		w    agent.Workflow
		want string
	}{
		{"cycle", agent.Workflow{Goal: "g", Mode: "graph", Agents: []agent.Slot{slot("a", "c"), slot("b", "a"), slot("c", "b")}}, "cycle: a → c → b → a"},
		{"cycle off the first", agent.Workflow{Goal: "g", Mode: "graph", Agents: []agent.Slot{slot("x"), slot("a", "x", "b"), slot("b", "a")}}, "cycle: a → b → a"},
		{"self", agent.Workflow{Goal: "g", Mode: "graph", Agents: []agent.Slot{slot("a", "a")}}, "cycle: a → a"},
		{"unknown dependency", agent.Workflow{Goal: "g", Mode: "graph", Agents: []agent.Slot{slot("a"), slot("b", "zz")}}, `"b" depends on "zz", which is not an agent of this workflow (its agents: a, b)`},
		{"duplicate id", agent.Workflow{Goal: "g", Agents: []agent.Slot{slot("a"), slot("b"), slot("a")}}, `agents 1 and 3 have the same id "a"`},
		{"bad id", agent.Workflow{Goal: "g", Agents: []agent.Slot{slot("a b")}}, "is not 1 to 40 letters"},
		{"too many", agent.Workflow{Goal: "g", Agents: many}, "1 to 10 agents, not 11"},
		{"none", agent.Workflow{Goal: "g"}, "not 0"},
		{"empty task", agent.Workflow{Goal: "g", Agents: []agent.Slot{{ID: "a", Task: " "}}}, `agent "a" has no task`},
		{"mode", agent.Workflow{Goal: "g", Mode: "swarm", Agents: []agent.Slot{slot("a")}}, `mode "swarm" is not one of`},
		{"goal", agent.Workflow{Goal: " ", Agents: []agent.Slot{slot("a")}}, "goal is empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.w.Normalize()
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "Next:") {
				t.Fatalf("Normalize() = %v, want a message with %q", err, tc.want)
			}
		})
	}
	// Unknown IDs in depends_on outside graph mode are not looked at, and
	// missing IDs are numbered.
	w := agent.Workflow{Goal: "g", Agents: []agent.Slot{{Task: "t", DependsOn: []string{"nobody"}}, {Task: "u"}}}
	if err := w.Normalize(); err != nil || w.Mode != "pipeline" || w.Agents[1].ID != "agent2" || w.Agents[1].Role != "agent2" {
		t.Errorf("Normalize() = %v, %+v", err, w)
	}
}

// TestWorkflowDeadline: when the workflow's call ends while a stage runs,
// that stage's sub-agent is canceled and the later stages are skipped.
func TestWorkflowDeadline(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	srv := slotModel(t, func(id string, _ bool) *agenttest.Response {
		if id == "b" {
			cancel()
			return &agenttest.Response{Hang: true}
		}
		return nil
	})
	m := workflowManager(t, srv, 1)
	rep, _ := runWorkflow(t, ctx, m, agent.Workflow{Goal: "g", Agents: []agent.Slot{{ID: "a", Task: "t"}, {ID: "b", Task: "t"}, {ID: "c", Task: "t"}}})
	if got := statuses(rep); !slices.Equal(got, []string{"a:completed", "b:canceled", "c:skipped"}) {
		t.Fatalf("statuses %v", got)
	}
	b := rep.Slots[1].Result
	if task, _ := m.Get(b.AgentID); task.Status != agent.StatusCanceled || !strings.Contains(task.Error.Message, "workflow call ended") {
		t.Errorf("b's task %+v", task)
	}
}

func assertHas(t *testing.T, what, text string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(text, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, text)
		}
	}
}

// TestWorkflowReportBounds: the outputs share one budget in the report, each
// cut one says where the whole answer is, and an agent that did not
// complete shows why and its last words.
func TestWorkflowReportBounds(t *testing.T) {
	long := strings.Repeat("word ", 4000) // 20,000 characters
	w := agent.Workflow{Goal: "g", Mode: "council", CrossReview: true}
	rep := agent.Report{Workflow: w}
	for i := range agent.MaxWorkflowAgents {
		id := fmt.Sprintf("a%d", i)
		r := agent.AgentResult{AgentID: fmt.Sprintf("sa-00000000000%d", i), Status: agent.StatusCompleted, Turns: 1, Answer: long}
		rep.Slots = append(rep.Slots, agent.SlotOutcome{Slot: agent.Slot{ID: id, Role: id}, Result: r, Review: &r})
	}
	rep.Slots[9].Result = agent.AgentResult{AgentID: "sa-000000000009", Status: agent.StatusFailed, Turns: 3, Answer: "half done", Error: "stopped after 3 model replies"}
	rep.Slots[9].Review = nil
	md := rep.Markdown()
	if len(md) > 70000 {
		t.Errorf("report of %d characters", len(md))
	}
	assertHas(t, "report", md, "(cut here; the whole answer is at GET /agents/sa-000000000003)",
		"10 agents: 9 completed, 1 failed, 0 skipped", "`a9` (a9): failed in 3 turns, sa-000000000009: stopped after 3 model replies",
		"*failed*: stopped after 3 model replies\n\nIts last words:\n\nhalf done", "Some agents did not complete")
}
