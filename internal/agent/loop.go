package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/countbot/toolsvc/internal/approval"
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

// TextObserver is an Observer that also hears the text of the model's
// reply as it arrives, when the model is read as a stream (Client with
// Stream): Text gets the reply of turn n in pieces, in order, each at a
// word boundary where it can be (see textBuffer), and the last before
// Turn(n).
type TextObserver interface {
	Observer
	Text(turn int, text string)
}

// ApprovalWaiter waits for a person's decision on a held call
// (approval.Service): Wait returns once the approval id is decided or
// has expired, or ctx ends (with ctx's error).
type ApprovalWaiter interface {
	Wait(ctx context.Context, id string) (approval.Approval, error)
}

// ApprovalObserver is an Observer that also hears when the loop stops
// for a held call and when it goes on: a task's manager shows the task
// as waiting_approval in between and stops its clock.
type ApprovalObserver interface {
	Observer
	// Waiting: the call of name with args was held (res is the held
	// result, with its approval's ID, summary and expiry).
	Waiting(name, args string, res registry.Result)
	// Resumed: the wait has ended and the call is sent again, with the
	// approval as it then was (decided or expired; its ID and tool only
	// when err, the wait's error, is set: the store of approvals could
	// not be read until past the approval's expiry). It is not called
	// when the task is ending (its context is done).
	Resumed(a approval.Approval, err error)
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
	// Approvals, when set, makes a call held for a person's approval wait
	// for the decision and then be sent again with the approval: the
	// model gets what became of it (its result, the rejection with its
	// reason, or the expiry) as the call's result, not the hold. Without
	// it the model gets the hold itself (send_message's conversations,
	// which cannot wait for a person).
	Approvals ApprovalWaiter
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
		reply, err := l.chat(ctx, turn, msgs, defs, obs)
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
			if why := unfinished(reply.FinishReason); why != "" {
				return Outcome{Answer: last, Turns: turn, Failure: &Failure{Code: FailModel, Message: why}}
			}
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
				meta := registry.Meta{SessionID: id, Source: source, Key: l.Key}
				res = l.Tools.Invoke(ctx, name, []byte(args), meta)
				if res.Status == registry.StatusApprovalRequired && l.Approvals != nil {
					res = l.awaitApproval(ctx, name, args, meta, res, obs)
				}
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

// chat asks the model for the reply of turn, passing its text on to
// obs as it arrives when obs is a TextObserver.
func (l *Loop) chat(ctx context.Context, turn int, msgs []Message, defs []registry.Definition, obs Observer) (Reply, error) {
	to, ok := obs.(TextObserver)
	if !ok {
		return l.Model.Chat(ctx, msgs, defs)
	}
	buf := textBuffer{emit: func(s string) { to.Text(turn, s) }}
	reply, err := l.Model.Chat(WithTextSink(ctx, buf.add), msgs, defs)
	buf.flush()
	return reply, err
}

// Bounds of textBuffer.
const (
	textEvery = 250 * time.Millisecond // at most this long between pieces
	textMax   = 4096                   // the longest piece without a space
)

// textBuffer gathers the pieces of a streamed reply into fewer, larger
// ones, which it emits at most every textEvery and only up to the last
// white space, so that a word (a key or a token the model repeats, which
// the task's redaction must see whole) is never split between two
// pieces, unless it is longer than textMax.
type textBuffer struct {
	emit func(string)
	buf  strings.Builder
	last time.Time
}

func (b *textBuffer) add(s string) {
	b.buf.WriteString(s)
	if time.Since(b.last) < textEvery && b.buf.Len() < textMax {
		return
	}
	t := b.buf.String()
	cut := strings.LastIndexAny(t, " \t\n")
	if cut < 0 && len(t) < textMax {
		return
	}
	if cut < 0 {
		cut = len(t) - 1
	}
	b.emit(t[:cut+1])
	b.buf.Reset()
	b.buf.WriteString(t[cut+1:])
	b.last = time.Now()
}

func (b *textBuffer) flush() {
	if b.buf.Len() > 0 {
		b.emit(b.buf.String())
		b.buf.Reset()
	}
}

// unfinished says why a reply without tool calls is not a final answer,
// by its finish_reason as OpenAI's API defines it
// (https://platform.openai.com/docs/api-reference/chat/object), which the
// compatible servers copy: "length", the output token limit cut it off;
// "content_filter", the provider's filter withheld it (Azure OpenAI,
// Gemini's safety settings). "": it is the answer. The transient reasons
// (DeepSeek's insufficient_system_resource, OpenRouter's error) never get
// here: the client retries them (see interrupted).
func unfinished(reason string) string {
	switch reason {
	case "length":
		return `the model's reply was cut off at its output token limit (finish_reason "length"), so it is no final answer; the task's answer is the text so far. Next: a model or endpoint with a larger output limit, or a smaller task`
	case "content_filter":
		return `the model's reply was withheld by the provider's content filter (finish_reason "content_filter"); the task's answer is the text so far`
	}
	return ""
}

// Bounds of the wait for a held call's decision.
const (
	// approvalGrace is how long past its expiry a wait goes on: the
	// approval service says an approval has expired by its own clock,
	// and a fake or a store that never answers must not hold a task for
	// ever.
	approvalGrace = time.Minute
	// approvalRetry is the first pause after a wait that failed (the
	// store of approvals could not be read); it doubles up to a minute.
	approvalRetry = time.Second
)

// awaitApproval waits for the decision on the held call res (of name
// with args, made with meta), bounded by the approval's expiry and ctx,
// then sends the call again presenting the approval and returns that
// result: the call's own when it was approved, a refusal saying it was
// rejected (with the reason) or expired. The wait is one step of the
// turn the call belongs to: it counts against no bound of turns. When
// ctx ends first, the held result is returned and the loop ends.
func (l *Loop) awaitApproval(ctx context.Context, name, args string, meta registry.Meta, res registry.Result, obs Observer) registry.Result {
	ao, _ := obs.(ApprovalObserver)
	if ao != nil {
		ao.Waiting(name, args, res)
	}
	a, err := l.waitDecision(ctx, res)
	if ctx.Err() != nil {
		// The task is ending: its end says so, not a resumption.
		return res
	}
	if ao != nil {
		ao.Resumed(a, err)
	}
	// Sent again even when the wait failed or ran out: the approval
	// service then says what is true of the approval (expired, or that
	// it cannot keep approvals now), which is what the model should
	// hear. It never holds a call that presents an approval anew.
	meta.Approval = res.ApprovalID
	out := l.Tools.Invoke(ctx, name, []byte(args), meta)
	if out.ApprovalID == "" {
		// For the task's record: the approval the call ran, or was
		// refused, under.
		out.ApprovalID = res.ApprovalID
	}
	return out
}

// waitDecision waits for the approval of the held result res until it is
// decided or expired, retrying after a failed read of the store, until
// the approval's expiry (with approvalGrace) or ctx ends.
func (l *Loop) waitDecision(ctx context.Context, res registry.Result) (approval.Approval, error) {
	wctx := ctx
	if res.ExpiresAt != nil {
		var cancel context.CancelFunc
		wctx, cancel = context.WithDeadline(ctx, res.ExpiresAt.Add(approvalGrace))
		defer cancel()
	}
	pause := approvalRetry
	for {
		a, err := l.Approvals.Wait(wctx, res.ApprovalID)
		if err == nil || wctx.Err() != nil {
			if a.ID == "" {
				a.ID, a.Tool = res.ApprovalID, res.Tool
			}
			return a, err
		}
		t := time.NewTimer(pause)
		select {
		case <-wctx.Done():
			t.Stop()
			return approval.Approval{ID: res.ApprovalID, Tool: res.Tool}, wctx.Err()
		case <-t.C:
		}
		pause = min(2*pause, time.Minute)
	}
}

func compact(s string) string {
	var b bytes.Buffer
	if json.Compact(&b, []byte(s)) == nil {
		return b.String()
	}
	return s
}
