package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/countbot/toolsvc/internal/agent"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/runes"
	"github.com/countbot/toolsvc/internal/tooldef"
	"github.com/countbot/toolsvc/internal/toolerr"
)

// Spawn starts a sub-agent on a task: a model of its own with a restricted
// tool set, working alone in the background. It is offered only when a
// model endpoint is configured.
type Spawn struct {
	tooldef.Def[spawnArgs]
	agents        *agent.Manager
	timeout       time.Duration // the sub-agents' own; waiting is bounded by it
	maxConcurrent int
}

type spawnArgs struct {
	Task  string `json:"task" jsonschema:"the whole task, self-contained: the sub-agent sees nothing of this conversation, so say what to do, with which files, and what the answer should contain"`
	Label string `json:"label,omitempty" jsonschema:"a short name for the task, shown in listings, e.g. 'code analysis'"`
	Wait  bool   `json:"wait,omitempty" jsonschema:"true: wait for the sub-agent and return its answer; false (default): return at once with its ID"`
}

// NewSpawn returns the spawn tool over m. timeout is the sub-agents'
// deadline (TOOLSVC_AGENT_TIMEOUT).
func NewSpawn(m *agent.Manager, timeout time.Duration, maxConcurrent int) *Spawn {
	def := tooldef.New[spawnArgs]("spawn",
		"Start a sub-agent on a task in the background: it has its own model and the file tools, exec, web_fetch and memory, "+
			"works alone (it cannot ask questions or start sub-agents), and ends with a written answer. "+
			"Use it for a self-contained piece of work that takes many steps, such as analysing a code base into a report. "+
			"Returns the sub-agent's ID at once; with wait=true it waits and returns the answer.",
		func(p tooldef.Prop) {
			p.Prop("task").MinLength(1).MaxLength(100000)
			p.Prop("label").MaxLength(100)
		},
		tooldef.Sample(spawnArgs{Task: "Say hello.", Wait: true}),
		// It asks a model, which may call tools that change and delete
		// files and run commands.
		tooldef.Title("Start sub-agent"), tooldef.Hints(tooldef.Destructive, tooldef.OpenWorld))
	return &Spawn{Def: def, agents: m, timeout: timeout, maxConcurrent: maxConcurrent}
}

// Timeout lets a waiting call last as long as the sub-agent may, plus a
// margin for it to record its end.
func (t *Spawn) Timeout() time.Duration { return t.timeout + 30*time.Second }

func (t *Spawn) Execute(ctx context.Context, raw json.RawMessage) (string, error) {
	a, err := t.Decode(raw)
	if err != nil {
		return "", err
	}
	if strings.TrimSpace(a.Task) == "" {
		return "", toolerr.Errorf(toolerr.InvalidArguments, "task is empty. Next: describe the work for the sub-agent in task.")
	}
	label := strings.Join(strings.Fields(a.Label), " ")
	// With wait, a streaming client (Accept: text/event-stream) follows the
	// sub-agent's turns and tool calls as progress events.
	var onEvent func(agent.Event)
	if a.Wait && registry.Streaming(ctx) {
		onEvent = func(ev agent.Event) { registry.Progress(ctx, "progress", ev.Text()+"\n") }
	}
	task, err := t.agents.StartWith(ctx, a.Task, agent.StartOptions{Label: label, OnEvent: onEvent})
	var kb *agent.KeyBusyError
	switch {
	case errors.As(err, &kb):
		return "", toolerr.Errorf(toolerr.Busy, "%d of your sub-agents are running, as many as your key may run at once (its subagents.max_running). Next: wait for one to finish (GET /agents lists them, GET /agents/{id} shows one), cancel one (DELETE /agents/{id}), or do the work yourself.", kb.Max)
	case errors.Is(err, agent.ErrBusy):
		return "", toolerr.Errorf(toolerr.Busy, "%d sub-agents are already running (TOOLSVC_AGENT_MAX_CONCURRENT). Next: wait for one to finish (GET /agents), or do the work yourself.", t.maxConcurrent)
	case errors.Is(err, agent.ErrUnavailable):
		return "", toolerr.Errorf(toolerr.Unavailable, "the task database cannot be reached, so no sub-agent was started. Next: try again in a minute, or do the work yourself.")
	case errors.Is(err, agent.ErrStopping):
		return "", toolerr.Errorf(toolerr.Unavailable, "the service is shutting down and starts no sub-agent. Next: try again later.")
	case err != nil:
		return "", toolerr.Errorf(toolerr.InvalidArguments, "%w. Next: shorten the task.", err)
	}
	name := task.ID
	if label != "" {
		name = fmt.Sprintf("%s (%s)", task.ID, label)
	}
	if !a.Wait {
		return fmt.Sprintf("Sub-agent %s started in the background. Its progress and final answer: GET /agents/%s (live: GET /agents/%s/events); cancel it with DELETE /agents/%s. "+
			"It may run for up to %s. Next: carry on with other work; call spawn with wait=true instead when you need the answer before going on.",
			name, task.ID, task.ID, task.ID, t.timeout), nil
	}
	done, _ := t.agents.Wait(ctx, task.ID)
	switch {
	case done.Status == agent.StatusWaitingApproval:
		// Still alive: a call of it waits for a person, which may take
		// longer than this call may wait.
		return "", toolerr.Errorf(toolerr.Canceled, "stopped waiting for sub-agent %s, which is still running: one of its calls waits for a person's approval (GET /approvals). Next: GET /agents/%s for its answer later.", name, task.ID)
	case agent.Active(done.Status):
		return "", toolerr.Errorf(toolerr.Canceled, "stopped waiting for sub-agent %s, which is still running. Next: GET /agents/%s for its answer later.", name, task.ID)
	case done.Status == agent.StatusCompleted:
		answer := done.Answer
		if strings.TrimSpace(answer) == "" {
			answer = "(the sub-agent ended without writing an answer)"
		}
		return fmt.Sprintf("Sub-agent %s completed in %d %s with %d %s.\n\n%s", name, done.Turns, runes.Plural(done.Turns, "turn", "turns"),
			done.CallCount, runes.Plural(done.CallCount, "tool call", "tool calls"), answer), nil
	}
	if done.Error == nil {
		done.Error = &agent.Failure{Code: agent.FailModel, Message: "no reason recorded"}
	}
	msg := fmt.Sprintf("sub-agent %s %s after %d turns: %s.", name, done.Status, done.Turns, done.Error.Message)
	if done.Answer != "" {
		msg += " Its last words:\n\n" + done.Answer + "\n\n"
	}
	code := toolerr.ToolError
	switch done.Error.Code {
	case agent.FailTimeout:
		code = toolerr.Timeout
	case agent.FailCanceled, agent.FailInterrupted:
		code = toolerr.Canceled
	}
	return "", toolerr.Errorf(code, "%s Next: split the task into smaller ones, or do the rest yourself; its tool calls are listed at GET /agents/%s.", msg, task.ID)
}

var _ registry.Tool = (*Spawn)(nil)
var _ registry.Timeouter = (*Spawn)(nil)
