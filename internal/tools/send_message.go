package tools

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/countbot/toolsvc/internal/agent"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/tooldef"
	"github.com/countbot/toolsvc/internal/toolerr"
)

// SendMessage is the voice-device conversation mode's tool: it passes what
// the user said to an agent with the service's tools and returns the
// agent's reply. The conversation continues per session (X-Session-ID).
// It is offered only with TOOLSVC_XIAOZHI_CONVERSATION=true and a model.
type SendMessage struct {
	tooldef.Def[sendMessageArgs]
	conv          *agent.Conversations
	maxConcurrent int
}

type sendMessageArgs struct {
	Text string `json:"text" jsonschema:"what the user said, as recognised from speech"`
}

// NewSendMessage returns the send_message tool over c.
func NewSendMessage(c *agent.Conversations, maxConcurrent int) *SendMessage {
	def := tooldef.New[sendMessageArgs]("send_message",
		"Pass what the user said on the voice device to the assistant agent, which can use the service's tools, and return its spoken reply. "+
			"The conversation continues within the session (X-Session-ID), so follow-up questions keep their context. Waits at most 120 seconds.",
		func(p tooldef.Prop) {
			p.Prop("text").MinLength(1).MaxLength(4000)
		},
		tooldef.Sample(sendMessageArgs{Text: "hello"}),
		// It asks a model, which may call tools that change and delete
		// files and run commands.
		tooldef.Title("Message the assistant"), tooldef.Hints(tooldef.Destructive, tooldef.OpenWorld))
	return &SendMessage{Def: def, conv: c, maxConcurrent: maxConcurrent}
}

// Timeout leaves the agent its 120 seconds and a margin to say it ran out.
func (t *SendMessage) Timeout() time.Duration { return agent.ConversationTimeout + 10*time.Second }

func (t *SendMessage) Execute(ctx context.Context, raw json.RawMessage) (string, error) {
	a, err := t.Decode(raw)
	if err != nil {
		return "", err
	}
	if strings.TrimSpace(a.Text) == "" {
		return "", toolerr.Errorf(toolerr.InvalidArguments, "text is empty. Next: pass what the user said in text.")
	}
	// The conversation is the caller's key's own in this session.
	call, _ := registry.CallFrom(ctx)
	out, err := t.conv.Send(ctx, call.Key, call.SessionID, a.Text, func(ev agent.Event) {
		registry.Progress(ctx, "progress", ev.Text()+"\n")
	})
	switch {
	case errors.Is(err, agent.ErrBusy):
		return "", toolerr.Errorf(toolerr.Busy, "%d messages are already being answered. Next: try again in a moment.", t.maxConcurrent)
	case errors.Is(err, agent.ErrConversationTimeout):
		return "", toolerr.Errorf(toolerr.Timeout, "the agent did not reply within %s. Next: tell the user it is taking too long, or ask something smaller.", agent.ConversationTimeout)
	case errors.Is(err, agent.ErrUnavailable):
		return "", toolerr.Errorf(toolerr.Unavailable, "the conversation database cannot be reached, so this session's history cannot be read. Next: try again in a minute, or tell the user the assistant is briefly unavailable.")
	case errors.Is(err, context.Canceled):
		return "", toolerr.Errorf(toolerr.Canceled, "the message was canceled before the agent replied (the client went away or the service is shutting down).")
	case err != nil:
		return "", toolerr.Errorf(toolerr.ToolError, "the agent could not reply: %v. Next: try again, or tell the user the assistant is unavailable.", err)
	}
	if strings.TrimSpace(out.Answer) == "" {
		return "(the agent gave no reply)", nil
	}
	return out.Answer, nil
}

var _ registry.Tool = (*SendMessage)(nil)
var _ registry.Timeouter = (*SendMessage)(nil)
