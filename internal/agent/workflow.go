package agent

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/countbot/toolsvc/internal/runes"
)

// Workflow modes.
const (
	ModePipeline = "pipeline" // in the order given, each stage sees the earlier outputs
	ModeGraph    = "graph"    // each slot once its dependencies are done, in parallel
	ModeCouncil  = "council"  // all at once, then optionally a cross-review round
)

// MaxWorkflowAgents bounds the agents of one workflow.
const MaxWorkflowAgents = 10

const (
	maxInputChars   = 6000  // of one earlier output, as shown to a later agent
	maxSectionChars = 8000  // of one output, as shown in the report
	maxReportChars  = 60000 // of all the outputs in the report, shared among them
	minSectionChars = 2000  // of one output however many there are
	maxGoalChars    = 4000  // of the goal
	maxSlotChars    = 20000 // of one slot's task
)

// Slot is one agent of a workflow. Only its task is required (the json
// tags say so to the schema workflow_run derives from it).
type Slot struct {
	ID          string   `json:"id,omitempty"`
	Role        string   `json:"role,omitempty"`
	Task        string   `json:"task"`
	DependsOn   []string `json:"depends_on,omitempty"`
	Perspective string   `json:"perspective,omitempty"`
}

// Workflow is several sub-agents working toward one goal. Its goal and
// agents are required.
type Workflow struct {
	Goal        string `json:"goal"`
	Mode        string `json:"mode,omitempty"`
	Agents      []Slot `json:"agents"`
	CrossReview bool   `json:"cross_review,omitempty"`
}

// ValidationError is a workflow that cannot run as given; nothing was
// started. Its message says what to change.
type ValidationError struct{ Msg string }

func (e *ValidationError) Error() string { return e.Msg }

func invalid(format string, a ...any) error {
	return &ValidationError{Msg: fmt.Sprintf(format, a...)}
}

var slotIDPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_.-]{1,40}$`) })

// Normalize fills defaults (IDs agent1..agentN, the role from the ID) and
// checks the workflow before anything starts: the mode, the number of
// agents, IDs unique and well formed, and, in graph mode, that every
// dependency names an agent and that they form no cycle.
func (w *Workflow) Normalize() error {
	w.Goal = strings.TrimSpace(w.Goal)
	if w.Goal == "" {
		return invalid("goal is empty. Next: say in goal what the workflow as a whole should achieve.")
	}
	if len(w.Goal) > maxGoalChars {
		return invalid("goal is longer than %d characters. Next: state the goal briefly and put details in the agents' tasks.", maxGoalChars)
	}
	switch w.Mode {
	case ModePipeline, ModeGraph, ModeCouncil:
	case "":
		w.Mode = ModePipeline
	default:
		return invalid("mode %q is not one of pipeline, graph, council. Next: pick one of them.", runes.Shorten(w.Mode, 40))
	}
	if len(w.Agents) == 0 || len(w.Agents) > MaxWorkflowAgents {
		return invalid("a workflow has 1 to %d agents, not %d. Next: split the work into at most %d agents.", MaxWorkflowAgents, len(w.Agents), MaxWorkflowAgents)
	}
	index := map[string]int{}
	for i := range w.Agents {
		s := &w.Agents[i]
		s.ID = strings.TrimSpace(s.ID)
		if s.ID == "" {
			s.ID = fmt.Sprintf("agent%d", i+1)
		}
		if !slotIDPattern().MatchString(s.ID) {
			return invalid("agent %d: id %q is not 1 to 40 letters, digits, '.', '_' or '-'. Next: give it a short id such as 'research'.", i+1, runes.Shorten(s.ID, 40))
		}
		if j, dup := index[s.ID]; dup {
			return invalid("agents %d and %d have the same id %q. Next: give every agent its own id.", j+1, i+1, s.ID)
		}
		index[s.ID] = i
		s.Role = strings.Join(strings.Fields(s.Role), " ")
		if s.Role == "" {
			s.Role = s.ID
		}
		if strings.TrimSpace(s.Task) == "" {
			return invalid("agent %q has no task. Next: say in its task what this agent should do.", s.ID)
		}
		if len(s.Task) > maxSlotChars {
			return invalid("agent %q: task is longer than %d characters. Next: shorten it.", s.ID, maxSlotChars)
		}
	}
	if w.Mode != ModeGraph {
		return nil
	}
	for _, s := range w.Agents {
		seen := map[string]bool{}
		for _, d := range s.DependsOn {
			if _, ok := index[d]; !ok {
				return invalid("agent %q depends on %q, which is not an agent of this workflow (its agents: %s). Next: name only these ids in depends_on.",
					s.ID, runes.Shorten(d, 40), strings.Join(w.ids(), ", "))
			}
			if seen[d] {
				return invalid("agent %q lists %q twice in depends_on. Next: list each dependency once.", s.ID, d)
			}
			seen[d] = true
		}
	}
	if cycle := w.cycle(index); cycle != nil {
		return invalid("the dependencies form a cycle: %s, so none of these agents could ever start. Next: remove one of these dependencies.", strings.Join(cycle, " → "))
	}
	return nil
}

func (w *Workflow) ids() []string {
	out := make([]string, len(w.Agents))
	for i, s := range w.Agents {
		out[i] = s.ID
	}
	return out
}

// cycle returns a dependency cycle as a path that starts and ends with the
// same ID, or nil. The search follows the agents and their dependencies in
// the order given, so the cycle named is the same on every run.
func (w *Workflow) cycle(index map[string]int) []string {
	const (
		white = iota
		grey
		black
	)
	color := make([]int, len(w.Agents))
	var stack []int
	var found []string
	var visit func(i int) bool
	visit = func(i int) bool {
		color[i] = grey
		stack = append(stack, i)
		for _, d := range w.Agents[i].DependsOn {
			j := index[d]
			switch color[j] {
			case grey:
				start := 0
				for k, v := range stack {
					if v == j {
						start = k
					}
				}
				for _, v := range stack[start:] {
					found = append(found, w.Agents[v].ID)
				}
				found = append(found, w.Agents[j].ID)
				return true
			case white:
				if visit(j) {
					return true
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[i] = black
		return false
	}
	for i := range w.Agents {
		if color[i] == white && visit(i) {
			return found
		}
	}
	return nil
}

// Runner runs one sub-agent to its end: the Manager, or a stand-in in
// tests. onEvent hears of its progress and must not block.
type Runner interface {
	RunAgent(ctx context.Context, label, task string, onEvent func(Event)) AgentResult
}

// AgentResult is how one sub-agent ended.
type AgentResult struct {
	AgentID string // empty when it never started
	Status  string // a task status, or StatusSkipped
	Turns   int
	Answer  string
	Error   string // why it did not complete
}

// StatusSkipped is a workflow slot that was never started.
const StatusSkipped = "skipped"

// RunAgent starts a task, waiting for a free slot as long as ctx allows,
// and waits for its end. When ctx ends first, the task is canceled.
func (m *Manager) RunAgent(ctx context.Context, label, task string, onEvent func(Event)) AgentResult {
	t, err := m.StartWith(ctx, task, StartOptions{Label: label, Queue: true, OnEvent: onEvent})
	if err != nil {
		why := err.Error()
		if ctx.Err() != nil {
			why = fmt.Sprintf("the workflow's time ran out while it waited for a free sub-agent slot (TOOLSVC_AGENT_MAX_CONCURRENT=%d, or the key's subagents.max_running in TOOLSVC_POLICY_FILE)", m.opts.MaxConcurrent)
		}
		return AgentResult{Status: StatusSkipped, Error: why}
	}
	done, _ := m.Wait(ctx, t.ID)
	if Active(done.Status) {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		m.mu.Lock()
		if e := m.tasks[t.ID]; e != nil && e.cancel != nil {
			e.cancel(errWorkflowEnded)
		}
		m.mu.Unlock()
		done, _ = m.Wait(cctx, t.ID)
		cancel()
	}
	r := AgentResult{AgentID: t.ID, Status: done.Status, Turns: done.Turns, Answer: done.Answer}
	if done.Error != nil {
		r.Error = done.Error.Message
	}
	return r
}

// SlotOutcome is one slot's part of a workflow's report.
type SlotOutcome struct {
	Slot   Slot
	Result AgentResult
	Review *AgentResult // council with cross_review
}

// Report is what a workflow did.
type Report struct {
	Workflow Workflow
	Slots    []SlotOutcome // in the order given
	Duration time.Duration
}

// RunWorkflow runs w (which Normalize has accepted) with r, within ctx.
// progress, when set, hears one line per step and must not block.
func RunWorkflow(ctx context.Context, r Runner, w Workflow, progress func(string)) Report {
	start := time.Now()
	if progress == nil {
		progress = func(string) {}
	}
	wr := &workflowRun{r: r, w: w, progress: progress, out: make([]SlotOutcome, len(w.Agents))}
	for i, s := range w.Agents {
		wr.out[i].Slot = s
	}
	switch w.Mode {
	case ModePipeline:
		wr.pipeline(ctx)
	case ModeGraph:
		wr.graph(ctx)
	case ModeCouncil:
		wr.council(ctx)
	}
	return Report{Workflow: w, Slots: wr.out, Duration: time.Since(start)}
}

type workflowRun struct {
	r        Runner
	w        Workflow
	progress func(string)
	out      []SlotOutcome
}

// run runs slot i with the given task text and returns how it ended.
func (wr *workflowRun) run(ctx context.Context, i int, phase, task string) AgentResult {
	s := wr.w.Agents[i]
	if ctx.Err() != nil {
		return AgentResult{Status: StatusSkipped, Error: "the workflow's time ran out before it could start"}
	}
	label := "workflow: " + s.ID
	if phase != "" {
		label += " (" + phase + ")"
	}
	wr.progress(fmt.Sprintf("[%s] starting%s", s.ID, phaseNote(phase)))
	res := wr.r.RunAgent(ctx, label, task, func(ev Event) {
		if ev.Type != EventEnd {
			wr.progress("[" + s.ID + "] " + ev.Text())
		}
	})
	line := fmt.Sprintf("[%s] %s%s", s.ID, res.Status, phaseNote(phase))
	if res.AgentID != "" {
		line += fmt.Sprintf(" after %d turns (%s)", res.Turns, res.AgentID)
	}
	if res.Error != "" {
		line += ": " + res.Error
	}
	wr.progress(line)
	return res
}

func phaseNote(phase string) string {
	if phase == "" {
		return ""
	}
	return " (" + phase + ")"
}

func (wr *workflowRun) pipeline(ctx context.Context) {
	var failed string
	for i, s := range wr.w.Agents {
		if failed != "" {
			wr.out[i].Result = AgentResult{Status: StatusSkipped, Error: fmt.Sprintf("an earlier stage, %q, did not complete", failed)}
			continue
		}
		var inputs []int
		for j := range i {
			inputs = append(inputs, j)
		}
		wr.out[i].Result = wr.run(ctx, i, "", wr.slotTask(i, inputs, "Outputs of the earlier stages, in order"))
		if wr.out[i].Result.Status != StatusCompleted {
			failed = s.ID
		}
	}
}

func (wr *workflowRun) graph(ctx context.Context) {
	n := len(wr.w.Agents)
	index := map[string]int{}
	for i, s := range wr.w.Agents {
		index[s.ID] = i
	}
	const (
		pending = iota
		running
		ended
	)
	state := make([]int, n)
	done := make(chan int)
	active := 0
	for {
		// Settle every pending slot that can be: skipped when a dependency
		// did not complete, started when all did. A skip can settle
		// others, so repeat until nothing changes.
		for changed := true; changed; {
			changed = false
			for i, s := range wr.w.Agents {
				if state[i] != pending {
					continue
				}
				ready, blocked := true, ""
				for _, d := range s.DependsOn {
					j := index[d]
					if state[j] != ended {
						ready = false
						continue
					}
					if wr.out[j].Result.Status != StatusCompleted && blocked == "" {
						blocked = d
					}
				}
				switch {
				case blocked != "":
					state[i], changed = ended, true
					wr.out[i].Result = AgentResult{Status: StatusSkipped, Error: fmt.Sprintf("it depends on %q, which did not complete", blocked)}
					wr.progress(fmt.Sprintf("[%s] skipped: %s", s.ID, wr.out[i].Result.Error))
				case ready:
					state[i], changed = running, true
					var inputs []int
					for _, d := range s.DependsOn {
						inputs = append(inputs, index[d])
					}
					task := wr.slotTask(i, inputs, "Outputs of the agents your task depends on")
					active++
					go func() {
						wr.out[i].Result = wr.run(ctx, i, "", task)
						done <- i
					}()
				}
			}
		}
		if active == 0 {
			return
		}
		i := <-done
		active--
		state[i] = ended
	}
}

func (wr *workflowRun) council(ctx context.Context) {
	n := len(wr.w.Agents)
	var wg sync.WaitGroup
	for i := range n {
		task := wr.slotTask(i, nil, "")
		wg.Go(func() { wr.out[i].Result = wr.run(ctx, i, "", task) })
	}
	wg.Wait()
	if !wr.w.CrossReview {
		return
	}
	var members []int
	for i := range n {
		if wr.out[i].Result.Status == StatusCompleted {
			members = append(members, i)
		}
	}
	if len(members) < 2 {
		wr.progress("cross-review skipped: fewer than two members completed")
		return
	}
	reviews := make([]AgentResult, n)
	for _, i := range members {
		var others []int
		for _, j := range members {
			if j != i {
				others = append(others, j)
			}
		}
		task := wr.reviewTask(i, others)
		wg.Go(func() { reviews[i] = wr.run(ctx, i, "review", task) })
	}
	wg.Wait()
	for _, i := range members {
		r := reviews[i]
		wr.out[i].Review = &r
	}
}

// header is what every agent of the workflow is told first.
func (wr *workflowRun) header(i int) *strings.Builder {
	s := wr.w.Agents[i]
	var b strings.Builder
	fmt.Fprintf(&b, "You are agent %q, one of %d agents of a %s workflow working toward this goal:\n%s\n\n", s.ID, len(wr.w.Agents), wr.w.Mode, wr.w.Goal)
	fmt.Fprintf(&b, "Your role: %s\n", s.Role)
	if p := strings.TrimSpace(s.Perspective); p != "" {
		fmt.Fprintf(&b, "Your perspective: %s\n", p)
	}
	return &b
}

// slotTask is the task a slot's sub-agent gets: the goal, its role, its
// own task, and the outputs of the slots given as inputs.
func (wr *workflowRun) slotTask(i int, inputs []int, title string) string {
	b := wr.header(i)
	fmt.Fprintf(b, "\nYour task:\n%s\n", strings.TrimSpace(wr.w.Agents[i].Task))
	if len(inputs) > 0 {
		fmt.Fprintf(b, "\n%s (use them as your input; do not redo their work):\n", title)
		for _, j := range inputs {
			wr.quote(b, j, wr.out[j].Result.Answer)
		}
	}
	return b.String()
}

// reviewTask is a council member's review round: its own answer and the
// others', to review from its perspective.
func (wr *workflowRun) reviewTask(i int, others []int) string {
	b := wr.header(i)
	fmt.Fprintf(b, "\nYour task was:\n%s\n\nThis is the cross-review round. Your first answer was:\n", strings.TrimSpace(wr.w.Agents[i].Task))
	wr.quote(b, i, wr.out[i].Result.Answer)
	b.WriteString("\nThe other members answered:\n")
	for _, j := range others {
		wr.quote(b, j, wr.out[j].Result.Answer)
	}
	b.WriteString("\nReview their answers from your role and perspective: say where you agree, where you disagree and why, and what is missing. End with your revised answer.\n")
	return b.String()
}

func (wr *workflowRun) quote(b *strings.Builder, j int, text string) {
	s := wr.w.Agents[j]
	fmt.Fprintf(b, "\n--- %s (%s) ---\n%s\n--- end of %s ---\n", s.ID, s.Role, runes.Shorten(strings.TrimSpace(text), maxInputChars), s.ID)
}

// Counts returns how many slots completed, failed (or were canceled) and
// were skipped.
func (r Report) Counts() (completed, failed, skipped int) {
	for _, o := range r.Slots {
		switch o.Result.Status {
		case StatusCompleted:
			completed++
		case StatusSkipped:
			skipped++
		default:
			failed++
		}
	}
	return
}

// Markdown is the report as the workflow_run tool returns it: a summary,
// then each agent's output in the order given.
func (r Report) Markdown() string {
	w := r.Workflow
	var b strings.Builder
	fmt.Fprintf(&b, "# Workflow (%s): %s\n\n", w.Mode, oneLine(w.Goal, 200))
	completed, failed, skipped := r.Counts()
	b.WriteString("## Summary\n\n")
	fmt.Fprintf(&b, "%d agents: %d completed, %d failed, %d skipped, in %s.", len(r.Slots), completed, failed, skipped, r.Duration.Round(time.Second))
	if w.Mode == ModeCouncil && w.CrossReview {
		reviewed := 0
		for _, o := range r.Slots {
			if o.Review != nil && o.Review.Status == StatusCompleted {
				reviewed++
			}
		}
		fmt.Fprintf(&b, " Cross-review: %d reviews completed.", reviewed)
	}
	b.WriteString("\n\n")
	for _, o := range r.Slots {
		fmt.Fprintf(&b, "- `%s` (%s): %s\n", o.Slot.ID, oneLine(o.Slot.Role, 80), statusLine(o.Result))
		if o.Review != nil {
			fmt.Fprintf(&b, "  - review: %s\n", statusLine(*o.Review))
		}
	}
	switch {
	case completed == 0:
		b.WriteString("\nNo agent completed: there is no result to use. Next: read the reasons above, then simplify the tasks or do the work yourself.\n")
	case w.Mode == ModePipeline && r.Slots[len(r.Slots)-1].Result.Status == StatusCompleted:
		fmt.Fprintf(&b, "\nThe workflow's result is the last stage's output, `%s`, below.\n", r.Slots[len(r.Slots)-1].Slot.ID)
	case failed+skipped > 0:
		b.WriteString("\nSome agents did not complete; their sections say why. Next: use what completed, and redo the rest yourself or in a smaller workflow.\n")
	}
	// The outputs share one budget, so a large workflow's report stays
	// readable in a model's context; the whole answers are kept.
	sections := 0
	for _, o := range r.Slots {
		if strings.TrimSpace(o.Result.Answer) != "" {
			sections++
		}
		if o.Review != nil && strings.TrimSpace(o.Review.Answer) != "" {
			sections++
		}
	}
	limit := maxSectionChars
	if sections > 0 {
		limit = max(minSectionChars, min(maxSectionChars, maxReportChars/sections))
	}
	for i, o := range r.Slots {
		fmt.Fprintf(&b, "\n## %d. `%s`: %s\n\n", i+1, o.Slot.ID, oneLine(o.Slot.Role, 80))
		section(&b, o.Result, limit)
		if o.Review != nil {
			fmt.Fprintf(&b, "\n### Cross-review by `%s`\n\n", o.Slot.ID)
			section(&b, *o.Review, limit)
		}
	}
	return b.String()
}

func statusLine(r AgentResult) string {
	s := r.Status
	if r.AgentID != "" {
		s += fmt.Sprintf(" in %d %s, %s", r.Turns, runes.Plural(r.Turns, "turn", "turns"), r.AgentID)
	}
	if r.Status != StatusCompleted && r.Error != "" {
		s += ": " + oneLine(r.Error, 300)
	}
	return s
}

func section(b *strings.Builder, r AgentResult, limit int) {
	if r.Status != StatusCompleted {
		fmt.Fprintf(b, "*%s*", r.Status)
		if r.Error != "" {
			fmt.Fprintf(b, ": %s", oneLine(r.Error, 500))
		}
		b.WriteString("\n")
		if strings.TrimSpace(r.Answer) != "" {
			b.WriteString("\nIts last words:\n\n")
		}
	}
	answer := strings.TrimSpace(r.Answer)
	if answer == "" {
		if r.Status == StatusCompleted {
			b.WriteString("(the agent ended without writing an answer)\n")
		}
		return
	}
	if len([]rune(answer)) > limit {
		answer = runes.Shorten(answer, limit) + fmt.Sprintf("\n\n(cut here; the whole answer is at GET /agents/%s)", r.AgentID)
	}
	b.WriteString(answer)
	b.WriteString("\n")
}

// oneLine folds s to one line of at most n runes.
func oneLine(s string, n int) string {
	return runes.Shorten(strings.Join(strings.Fields(s), " "), n)
}
