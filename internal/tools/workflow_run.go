package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/countbot/toolsvc/internal/agent"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/tooldef"
	"github.com/countbot/toolsvc/internal/toolerr"
)

// WorkflowRun runs several sub-agents toward one goal, in a pipeline, a
// dependency graph or a council, and returns their outputs as one Markdown
// report. It is offered only when a model endpoint is configured.
type WorkflowRun struct {
	tooldef.Def[agent.Workflow]
	runner  agent.Runner
	timeout time.Duration
}

// workflowStages is how many sub-agent deadlines (TOOLSVC_AGENT_TIMEOUT)
// one workflow call may last: enough for a few stages one after another,
// while a longer pipeline is cut by the call's deadline and reports the
// stages it did not reach.
const workflowStages = 3

// NewWorkflowRun returns the workflow_run tool over r (the sub-agent
// manager). agentTimeout is one sub-agent's deadline. The arguments are an
// agent.Workflow; what a model is told of each of its fields is said here.
func NewWorkflowRun(r agent.Runner, agentTimeout time.Duration) *WorkflowRun {
	def := tooldef.New[agent.Workflow]("workflow_run",
		"Run several sub-agents toward one goal and get their outputs as one Markdown report. "+
			"pipeline: stages in order, each building on the earlier outputs (e.g. research, then draft, then edit); "+
			"graph: agents with depends_on, independent ones in parallel; "+
			"council: the same question from several perspectives in parallel, with cross_review a round where each reviews the others. "+
			"Each agent works alone with the file tools, exec, web_fetch and memory. Use it for large work that splits into parts; it takes minutes.",
		func(p tooldef.Prop) {
			p.Prop("goal").MinLength(1).MaxLength(4000).
				Description("what the workflow as a whole should achieve; every agent is told it")
			p.Prop("mode").Enum("pipeline", "graph", "council").
				Description("pipeline (default): the agents run one after another in the order given, each seeing the earlier outputs; graph: each agent runs as soon as the agents in its depends_on have completed, independent ones in parallel; council: all run in parallel on the same question, each from its perspective, optionally followed by a cross-review round")
			p.Prop("agents").MinItems(1).MaxItems(agent.MaxWorkflowAgents).
				Description("the agents, each a sub-agent with the file tools, exec, web_fetch and memory, working alone")
			slot := p.Prop("agents").Items()
			slot.Prop("id").MaxLength(40).
				Description("short unique id (letters, digits, . _ -), named in depends_on; default agent1, agent2...")
			slot.Prop("role").MaxLength(200).
				Description("the agent's role, e.g. 'security reviewer'")
			slot.Prop("task").MinLength(1).MaxLength(20000).
				Description("what this agent should do, self-contained: it sees only the goal, its task and the outputs it is given")
			slot.Prop("depends_on").MaxItems(agent.MaxWorkflowAgents).
				Description("graph mode: ids of the agents whose outputs this one needs; ignored in the other modes")
			slot.Prop("perspective").MaxLength(1000).
				Description("the point of view to take, e.g. 'the end user' (useful in council mode)")
			p.Prop("cross_review").
				Description("council mode: after the first round, each member reviews the others' answers and revises its own")
		},
		tooldef.Sample(agent.Workflow{Goal: "Say hello.", Agents: []agent.Slot{{Task: "Say hello."}}}),
		// It asks a model, which may call tools that change and delete
		// files and run commands.
		tooldef.Title("Run workflow"), tooldef.Hints(tooldef.Destructive, tooldef.OpenWorld))
	return &WorkflowRun{Def: def, runner: r, timeout: workflowStages*agentTimeout + 30*time.Second}
}

// Timeout lets a workflow last a few sub-agent deadlines; when it ends
// first, the running agents are canceled and reported so.
func (t *WorkflowRun) Timeout() time.Duration { return t.timeout }

func (t *WorkflowRun) Execute(ctx context.Context, raw json.RawMessage) (string, error) {
	w, err := t.Decode(raw)
	if err != nil {
		return "", err
	}
	if err := w.Normalize(); err != nil {
		var ve *agent.ValidationError
		if errors.As(err, &ve) {
			return "", toolerr.Errorf(toolerr.InvalidArguments, "%s", ve.Msg)
		}
		return "", err
	}
	registry.Progress(ctx, "progress", fmt.Sprintf("workflow (%s) of %d agents started\n", w.Mode, len(w.Agents)))
	rep := agent.RunWorkflow(ctx, t.runner, w, func(line string) {
		registry.Progress(ctx, "progress", line+"\n")
	})
	if completed, _, _ := rep.Counts(); completed == 0 {
		return "", toolerr.Errorf(toolerr.ToolError, "%s", rep.Markdown())
	}
	return rep.Markdown(), nil
}

var _ registry.Tool = (*WorkflowRun)(nil)
var _ registry.Timeouter = (*WorkflowRun)(nil)
