package agent_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/agent"
	"github.com/countbot/toolsvc/internal/agent/agenttest"
)

// TestUnfinishedReplies: a reply without tool calls whose finish_reason
// says the model did not finish is not the task's answer. The values
// are those each platform documents for choices[].finish_reason:
//   - length, content_filter: OpenAI
//     (https://platform.openai.com/docs/api-reference/chat/object) and
//     Azure OpenAI, whose filter answers content_filter
//     (https://learn.microsoft.com/azure/ai-foundry/openai/concepts/content-filter);
//     final, the task ends saying why;
//   - insufficient_system_resource: DeepSeek, "the request is interrupted
//     due to insufficient resource of the inference system"
//     (https://api-docs.deepseek.com/api/create-chat-completion); retried;
//   - error: OpenRouter, "if the model finishes the request with an error"
//     (https://openrouter.ai/docs/api/reference/overview#finish-reason),
//     without an error member here; retried.
func TestUnfinishedReplies(t *testing.T) {
	partial := func(reason string) agenttest.Response {
		return agenttest.Message(`{"role":"assistant","content":"The notes say"}`, reason)
	}
	tests := []struct {
		name, reason string
		script       []agenttest.Response
		wantFail     string // "" means completed with "fine"
		wantReqs     int
	}{
		{"length is cut off", "length", []agenttest.Response{partial("length")}, `cut off at its output token limit (finish_reason "length")`, 1},
		{"content_filter is withheld", "content_filter", []agenttest.Response{partial("content_filter")}, `content filter (finish_reason "content_filter")`, 1},
		{"DeepSeek insufficient_system_resource is retried", "", []agenttest.Response{partial("insufficient_system_resource"), agenttest.Final("fine")}, "", 2},
		{"OpenRouter error is retried", "", []agenttest.Response{partial("error"), agenttest.Final("fine")}, "", 2},
		{"DeepSeek insufficient_system_resource every time", "", []agenttest.Response{partial("insufficient_system_resource")}, `finish_reason "insufficient_system_resource"`, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var steps []func(agenttest.Request) agenttest.Response
			for _, r := range tt.script {
				steps = append(steps, agenttest.Reply(r))
			}
			srv := agenttest.New(t, steps...)
			reg, _, _ := newRegistry(t, "read_file")
			c := agent.NewClient(agent.ClientOptions{BaseURL: srv.URL, Model: "m", Timeout: 5 * time.Second, Sleep: (&recorder{}).sleep})
			loop := &agent.Loop{Model: c, Tools: reg, Allowed: []string{"read_file"}, MaxTurns: 3}
			out := loop.Run(context.Background(), "sa-000000000001", "Summarise notes.txt.", &nopObserver{})
			switch {
			case tt.wantFail == "" && (out.Failure != nil || out.Answer != "fine"):
				t.Errorf("outcome %+v (%v), want the answer fine", out, out.Failure)
			case tt.wantFail != "" && (out.Failure == nil || out.Failure.Code != agent.FailModel || !strings.Contains(out.Failure.Message, tt.wantFail)):
				t.Errorf("outcome %+v (%v), want a model_error saying %q", out, out.Failure, tt.wantFail)
			}
			if tt.reason == "length" && out.Answer != "The notes say" {
				t.Errorf("answer %q, want the partial text kept", out.Answer)
			}
			if n := len(srv.Requests()); n != tt.wantReqs {
				t.Errorf("%d requests, want %d", n, tt.wantReqs)
			}
		})
	}
}
