package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/toolerr"
)

// Tools is the part of the registry a sub-agent uses: the definitions to
// show the model (those the key the work belongs to may call, so that the
// model is shown nothing it may not call), and Invoke, so every call is
// validated, held to the key's policy and audited like any other.
type Tools interface {
	DefinitionsFor(key string) []registry.Definition
	Invoke(ctx context.Context, name string, args []byte, meta registry.Meta) registry.Result
}

// Chatter is a model: Client, or a stand-in in tests.
type Chatter interface {
	Chat(ctx context.Context, msgs []Message, tools []registry.Definition) (Reply, error)
}

// Restrict returns the definitions of the tools in allowed that reg has,
// in reg's order (sorted by name, so the bytes a model sees are stable).
func Restrict(defs []registry.Definition, allowed []string) []registry.Definition {
	var out []registry.Definition
	for _, d := range defs {
		if slices.Contains(allowed, d.Function.Name) {
			out = append(out, d)
		}
	}
	return out
}

// SystemPrompt is what a sub-agent is told before its task.
func SystemPrompt(maxTurns int) string {
	return fmt.Sprintf(`You are a sub-agent working on one task in the background, on behalf of another agent.
You work alone: you cannot ask the user or anyone else a question and wait for the answer, and you cannot start other agents.
Use the tools you are given to do the task. File paths are relative to the workspace.
You have at most %d replies; work in few, purposeful steps and do not repeat a tool call whose result you already have.
When the task is done, or you find it cannot be done, reply without any tool call: that reply is your final answer and all the requester will see.
Make it a concise report of what you did and found, with the paths of any files you wrote, and say plainly what is missing or failed.`, maxTurns)
}

// Failure codes of a task that did not complete.
const (
	FailMaxTurns    = "max_turns"
	FailTimeout     = "timeout"
	FailModel       = "model_error"
	FailCanceled    = "canceled"
	FailInterrupted = "interrupted"
)

// Failure says why a task did not complete.
type Failure struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Outcome is the end of a loop.
type Outcome struct {
	Answer  string
	Turns   int
	Failure *Failure // nil: completed
}

// Observer hears of a loop's progress; every method is called from the
// loop's goroutine.
type Observer interface {
	Turn(n int)
	Called(name, args string, res registry.Result)
}

// Loop runs one sub-agent: model reply, tool calls, results back, until
// the model replies without tool calls or a bound is reached.
type Loop struct {
	Model Chatter
	Tools Tools
	// Allowed names the tools of Tools the agent may use (those of them
	// that are registered); nil: none. The service's composition root
	// decides them, tool by tool.
	Allowed  []string
	MaxTurns int
	// Limit names what set MaxTurns, in the failure of a loop it stops;
	// default TOOLSVC_AGENT_MAX_TURNS.
	Limit string
	// System is the system prompt; default SystemPrompt(MaxTurns).
	System string
	// Source is the audit source of the tool calls; default "subagent".
	Source string
	// Key is the name of the API key the work belongs to: its tool calls
	// carry it, into the audit log and into any work they start.
	Key string
}

// Run works on task under ctx (which carries the task's deadline). id is
// the sub-agent's ID, the session ID of every tool call it makes.
func (l *Loop) Run(ctx context.Context, id, task string, obs Observer) Outcome {
	return l.Continue(ctx, id, nil, task, obs)
}

// Continue is Run after earlier messages of a conversation (user and
// assistant texts), which the model sees before text.
func (l *Loop) Continue(ctx context.Context, id string, history []Message, text string, obs Observer) Outcome {
	defs := Restrict(l.Tools.DefinitionsFor(l.Key), l.Allowed)
	names := make([]string, len(defs))
	for i, d := range defs {
		names[i] = d.Function.Name
	}
	system, source := l.System, l.Source
	if system == "" {
		system = SystemPrompt(l.MaxTurns)
	}
	if source == "" {
		source = "subagent"
	}
	msgs := make([]Message, 0, len(history)+2)
	msgs = append(msgs, Message{Role: "system", Content: system})
	msgs = append(msgs, history...)
	msgs = append(msgs, Message{Role: "user", Content: text})
	var last string // the last non-empty text, reported when a bound stops the loop
	var prevKey string
	for turn := 1; turn <= l.MaxTurns; turn++ {
		reply, err := l.Model.Chat(ctx, msgs, defs)
		if err != nil {
			return Outcome{Answer: last, Turns: turn - 1, Failure: &Failure{Code: FailModel, Message: err.Error()}}
		}
		obs.Turn(turn)
		m := reply.Message
		if strings.TrimSpace(m.Content) != "" {
			last = m.Content
		}
		msgs = append(msgs, m)
		// finish_reason is not trusted: servers say "stop" with tool
		// calls present. The reply's tool calls decide.
		if len(m.ToolCalls) == 0 {
			return Outcome{Answer: m.Content, Turns: turn}
		}
		for _, tc := range m.ToolCalls {
			if ctx.Err() != nil {
				return Outcome{Answer: last, Turns: turn}
			}
			name, args := tc.Function.Name, tc.Function.Arguments
			key := name + "\x00" + compact(args)
			var res registry.Result
			switch {
			case !slices.Contains(names, name):
				res = registry.Failed(name, toolerr.UnknownTool, registry.UnknownToolMessage(name, names...))
			case key == prevKey:
				res = registry.Failed(name, toolerr.DuplicateCall, fmt.Sprintf("You just called %s with exactly these arguments; its result is the previous tool message. Next: use that result, or do something different.", name))
			default:
				res = l.Tools.Invoke(ctx, name, []byte(args), registry.Meta{SessionID: id, Source: source, Key: l.Key})
			}
			obs.Called(name, args, res)
			prevKey = key
			msgs = append(msgs, Message{Role: "tool", ToolCallID: tc.ID, Content: res.Result})
		}
	}
	limit := l.Limit
	if limit == "" {
		limit = "TOOLSVC_AGENT_MAX_TURNS"
	}
	return Outcome{Answer: last, Turns: l.MaxTurns, Failure: &Failure{Code: FailMaxTurns,
		Message: fmt.Sprintf("stopped after %d model replies (%s) without a final answer", l.MaxTurns, limit)}}
}

func compact(s string) string {
	var b bytes.Buffer
	if json.Compact(&b, []byte(s)) == nil {
		return b.String()
	}
	return s
}
