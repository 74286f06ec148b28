package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/agent"
	"github.com/countbot/toolsvc/internal/agent/agenttest"
)

const testKey = "sk-test-0123456789-secret"

// recorder is a Sleep that records the waits asked for instead of taking them.
type recorder struct{ waits []time.Duration }

func (r *recorder) sleep(ctx context.Context, d time.Duration) error {
	r.waits = append(r.waits, d)
	return ctx.Err()
}

func newClient(srv *agenttest.Server, rec *recorder) *agent.Client {
	opts := agent.ClientOptions{BaseURL: srv.URL, APIKey: testKey, Model: "fake-model", Timeout: 5 * time.Second}
	if rec != nil {
		opts.Sleep = rec.sleep
	}
	return agent.NewClient(opts)
}

// TestClientNormalisesReplies sends each server quirk through the real
// client over HTTP and checks the reply it makes of it.
func TestClientNormalisesReplies(t *testing.T) {
	tests := []struct {
		name      string
		message   string
		finish    string
		content   string
		reasoning string
		calls     []agent.ToolCall // ID "" means: any generated one, checked non-empty and unique
	}{
		{
			name:    "content null with a well-formed call",
			message: `{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a.txt\"}"}}]}`,
			finish:  "tool_calls",
			calls:   []agent.ToolCall{{ID: "c1", Type: "function", Function: agent.FunctionCall{Name: "read_file", Arguments: `{"path":"a.txt"}`}}},
		},
		{
			name:    "calls without id or type (Ollama)",
			message: `{"role":"assistant","content":"","tool_calls":[{"function":{"name":"list_dir","arguments":"{\"path\":\".\"}"}},{"function":{"name":"read_file","arguments":"{\"path\":\"b\"}"}}]}`,
			finish:  "stop",
			calls: []agent.ToolCall{
				{Type: "function", Function: agent.FunctionCall{Name: "list_dir", Arguments: `{"path":"."}`}},
				{Type: "function", Function: agent.FunctionCall{Name: "read_file", Arguments: `{"path":"b"}`}},
			},
		},
		{
			name:    "arguments as a JSON object",
			message: `{"role":"assistant","content":null,"tool_calls":[{"id":"c2","type":"function","function":{"name":"write_file","arguments":{"path": "x.md", "content": "hi"}}}]}`,
			finish:  "tool_calls",
			calls:   []agent.ToolCall{{ID: "c2", Type: "function", Function: agent.FunctionCall{Name: "write_file", Arguments: `{"path":"x.md","content":"hi"}`}}},
		},
		{
			name:    "arguments empty string and null",
			message: `{"role":"assistant","content":null,"tool_calls":[{"id":"c3","type":"function","function":{"name":"list_dir","arguments":""}},{"id":"c4","type":"function","function":{"name":"list_dir","arguments":null}}]}`,
			finish:  "tool_calls",
			calls: []agent.ToolCall{
				{ID: "c3", Type: "function", Function: agent.FunctionCall{Name: "list_dir", Arguments: `{}`}},
				{ID: "c4", Type: "function", Function: agent.FunctionCall{Name: "list_dir", Arguments: `{}`}},
			},
		},
		{
			name:      "DeepSeek reasoning_content",
			message:   `{"role":"assistant","content":"","reasoning_content":"I should list first.","tool_calls":[{"id":"c5","type":"function","function":{"name":"list_dir","arguments":"{}"}}]}`,
			finish:    "tool_calls",
			reasoning: "I should list first.",
			calls:     []agent.ToolCall{{ID: "c5", Type: "function", Function: agent.FunctionCall{Name: "list_dir", Arguments: `{}`}}},
		},
		{
			name:    "content as text parts",
			message: `{"role":"assistant","content":[{"type":"text","text":"Done. "},{"type":"text","text":"All good."}]}`,
			finish:  "stop",
			content: "Done. All good.",
		},
		{
			name:    "invalid arguments are passed on as written",
			message: `{"role":"assistant","content":null,"tool_calls":[{"id":"c6","type":"function","function":{"name":"write_file","arguments":"{\"path\": \"x"}}]}`,
			finish:  "length",
			calls:   []agent.ToolCall{{ID: "c6", Type: "function", Function: agent.FunctionCall{Name: "write_file", Arguments: `{"path": "x`}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := agenttest.New(t, agenttest.Reply(agenttest.Message(tt.message, tt.finish)))
			reply, err := newClient(srv, nil).Chat(context.Background(), []agent.Message{{Role: "user", Content: "go"}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			m := reply.Message
			if m.Role != "assistant" || m.Content != tt.content || m.Reasoning() != tt.reasoning {
				t.Errorf("message role %q content %q reasoning %q; want assistant %q %q", m.Role, m.Content, m.Reasoning(), tt.content, tt.reasoning)
			}
			if reply.FinishReason != tt.finish {
				t.Errorf("finish_reason %q, want %q", reply.FinishReason, tt.finish)
			}
			if len(m.ToolCalls) != len(tt.calls) {
				t.Fatalf("tool calls %+v, want %+v", m.ToolCalls, tt.calls)
			}
			ids := map[string]bool{}
			for i, got := range m.ToolCalls {
				want := tt.calls[i]
				if want.ID == "" {
					if got.ID == "" || ids[got.ID] {
						t.Errorf("call %d: generated id %q is empty or not unique", i, got.ID)
					}
					want.ID = got.ID
				}
				ids[got.ID] = true
				if got.ID != want.ID || got.Type != want.Type || got.Function != want.Function || got.Extra != nil {
					t.Errorf("call %d: %+v, want %+v", i, got, want)
				}
			}
			// The request: the model, the bearer key, no streaming.
			req := srv.Requests()[0]
			if req.Model != "fake-model" || req.Header.Get("Authorization") != "Bearer "+testKey {
				t.Errorf("request model %q, authorization %q", req.Model, req.Header.Get("Authorization"))
			}
		})
	}
}

// TestClientRetries checks which failures are retried, how long the client
// waits, and that it gives up when the wait would pass the deadline.
func TestClientRetries(t *testing.T) {
	ok := agenttest.Final("fine")
	tests := []struct {
		name      string
		script    []agenttest.Response
		deadline  time.Duration // 0: none
		wantErr   string        // "" means success
		wantWaits []time.Duration
		wantReqs  int
	}{
		{"500 then success", []agenttest.Response{{Status: 500, Body: `{"error":{"message":"boom"}}`}, ok}, 0, "", []time.Duration{time.Second}, 2},
		{"429 with Retry-After seconds", []agenttest.Response{{Status: 429, Header: map[string]string{"Retry-After": "7"}, Body: `{}`}, ok}, 0, "", []time.Duration{7 * time.Second}, 2},
		{"503 twice then success", []agenttest.Response{{Status: 503}, {Status: 502}, ok}, 0, "", []time.Duration{time.Second, 2 * time.Second}, 3},
		{"always 500: bounded", []agenttest.Response{{Status: 500, Body: "down"}}, 0, "HTTP 500: down", []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}, 4},
		{"400 is not retried", []agenttest.Response{{Status: 400, Body: `{"error":{"message":"model not found"}}`}, ok}, 0, "HTTP 400", nil, 1},
		{"401 is not retried", []agenttest.Response{{Status: 401, Body: `{"error":{"message":"bad key"}}`}, ok}, 0, "HTTP 401", nil, 1},
		{"Retry-After past the deadline", []agenttest.Response{{Status: 429, Header: map[string]string{"Retry-After": "3600"}}, ok}, time.Minute, "past the task's deadline", nil, 1},
		{"not chat-completions JSON", []agenttest.Response{{Body: "<html>proxy</html>"}}, 0, "not chat-completions JSON", nil, 1},
		// https://platform.openai.com/docs/guides/error-codes: a spent quota is a 429 that waiting does not fix.
		{"OpenAI quota 429 is not retried", []agenttest.Response{{Status: 429, Header: map[string]string{"Retry-After": "1"}, Body: `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`}, ok}, 0, "HTTP 429", nil, 1},
		{"Gemini quota 429 (a list) is not retried", []agenttest.Response{{Status: 429, Body: `[{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details.","status":"RESOURCE_EXHAUSTED"}}]`}, ok}, 0, "HTTP 429", nil, 1},
		{"rate-limit 429 is retried", []agenttest.Response{{Status: 429, Body: `{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}`}, ok}, 0, "", []time.Duration{time.Second}, 2},
		// https://openrouter.ai/docs/api/reference/errors-and-debugging: after a model started, errors come in a 200 body.
		{"OpenRouter 200 with a final error", []agenttest.Response{{Body: `{"error":{"code":402,"message":"Insufficient credits"}}`}, ok}, 0, "Insufficient credits", nil, 1},
		{"OpenRouter 200 with a provider error in the choice is retried", []agenttest.Response{{Body: `{"id":"gen-1","choices":[{"index":0,"finish_reason":"error","message":{"role":"assistant","content":""},"error":{"code":502,"message":"Provider returned error"}}]}`}, ok}, 0, "", []time.Duration{time.Second}, 2},
		{"a string error in a 200 body", []agenttest.Response{{Body: `{"error":"upstream overloaded","choices":[]}`}, ok}, 0, "upstream overloaded", nil, 1},
		{"null error beside a reply", []agenttest.Response{{Body: `{"error":null,"choices":[{"index":0,"message":{"role":"assistant","content":"fine"},"finish_reason":"stop"}]}`}}, 0, "", nil, 1},
		{"null message", []agenttest.Response{{Body: `{"choices":[{"index":0,"message":null,"finish_reason":"stop"}]}`}}, 0, "has no message", nil, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var steps []func(agenttest.Request) agenttest.Response
			for _, r := range tt.script {
				steps = append(steps, agenttest.Reply(r))
			}
			srv := agenttest.New(t, steps...)
			rec := &recorder{}
			ctx := context.Background()
			if tt.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.deadline)
				defer cancel()
			}
			reply, err := newClient(srv, rec).Chat(ctx, []agent.Message{{Role: "user", Content: "go"}}, nil)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("error %v", err)
			case tt.wantErr == "" && reply.Message.Content != "fine":
				t.Errorf("reply %+v", reply)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("error %v, want one containing %q", err, tt.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), testKey) {
				t.Errorf("the error carries the API key: %v", err)
			}
			if !slices.Equal(rec.waits, tt.wantWaits) {
				t.Errorf("waits %v, want %v", rec.waits, tt.wantWaits)
			}
			if n := len(srv.Requests()); n != tt.wantReqs {
				t.Errorf("%d requests, want %d", n, tt.wantReqs)
			}
		})
	}
}

// TestClientSlowModel: a model that does not answer within the request
// timeout is given up on, and the task's deadline ends the retries.
func TestClientSlowModel(t *testing.T) {
	srv := agenttest.New(t, agenttest.Reply(agenttest.Response{Hang: true}))
	c := agent.NewClient(agent.ClientOptions{BaseURL: srv.URL, Model: "m", Timeout: 200 * time.Millisecond, MaxRetries: 1,
		Sleep: (&recorder{}).sleep})
	_, err := c.Chat(context.Background(), []agent.Message{{Role: "user", Content: "go"}}, nil)
	if err == nil || !strings.Contains(err.Error(), "did not answer within 200ms") {
		t.Fatalf("error %v", err)
	}
	if n := len(srv.Requests()); n != 2 {
		t.Errorf("%d requests, want 2 (one retry)", n)
	}
	// The task's own deadline: no retry after it.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	c = agent.NewClient(agent.ClientOptions{BaseURL: srv.URL, Model: "m", Timeout: time.Minute})
	_, err = c.Chat(ctx, []agent.Message{{Role: "user", Content: "go"}}, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want the context's deadline", err)
	}
}

// TestClientSendsToolsAndMessages checks the request body a server gets:
// the tools in OpenAI's format and an assistant message as the API wants
// it back (arguments as a string, reasoning_content kept).
func TestClientSendsToolsAndMessages(t *testing.T) {
	srv := agenttest.New(t, agenttest.Reply(agenttest.Final("ok")))
	msgs := []agent.Message{
		{Role: "user", Content: "go"},
		{Role: "assistant", Extra: map[string]json.RawMessage{"reasoning_content": json.RawMessage(`"think"`)}, ToolCalls: []agent.ToolCall{{ID: "c1", Type: "function", Function: agent.FunctionCall{Name: "list_dir", Arguments: `{}`}}}},
		{Role: "tool", ToolCallID: "c1", Content: "a.txt"},
	}
	if _, err := newClient(srv, nil).Chat(context.Background(), msgs, nil); err != nil {
		t.Fatal(err)
	}
	var body struct {
		Stream   bool `json:"stream"`
		Messages []struct {
			Role             string  `json:"role"`
			Content          *string `json:"content"`
			ReasoningContent string  `json:"reasoning_content"`
			ToolCallID       string  `json:"tool_call_id"`
			ToolCalls        []struct {
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Arguments any `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(srv.Requests()[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	a := body.Messages[1]
	if body.Stream || a.ReasoningContent != "think" || a.Content == nil || len(a.ToolCalls) != 1 || a.ToolCalls[0].Type != "function" {
		t.Fatalf("assistant message sent as %+v", a)
	}
	if s, ok := a.ToolCalls[0].Function.Arguments.(string); !ok || s != "{}" {
		t.Errorf("arguments sent as %#v, want the string {}", a.ToolCalls[0].Function.Arguments)
	}
	if body.Messages[2].ToolCallID != "c1" {
		t.Errorf("tool message %+v", body.Messages[2])
	}
}

// TestClientOwnBackoffPastDeadline: when the client's own backoff, not a
// server's Retry-After, would end past the deadline, the error says so
// and does not blame the server.
func TestClientOwnBackoffPastDeadline(t *testing.T) {
	srv := agenttest.New(t, agenttest.Reply(agenttest.Response{Status: 503, Body: "busy"}))
	c := agent.NewClient(agent.ClientOptions{BaseURL: srv.URL, Model: "m", Backoff: func(int) time.Duration { return time.Hour }})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := c.Chat(ctx, []agent.Message{{Role: "user", Content: "go"}}, nil)
	if err == nil || !strings.Contains(err.Error(), "not retried: the next attempt, after 1h0m0s, would be past the task's deadline") || strings.Contains(err.Error(), "server asked") {
		t.Fatalf("error %v", err)
	}
}

// TestClientEchoesOnlyDocumentedFields: of a reply's fields the client
// does not know, only those a provider documents as required back are
// sent with the next request: DeepSeek's reasoning_content
// (https://api-docs.deepseek.com/guides/thinking_mode), OpenRouter's
// reasoning_details
// (https://openrouter.ai/docs/use-cases/reasoning-tokens#preserving-reasoning-blocks)
// and Gemini's extra_content on a tool call
// (https://ai.google.dev/gemini-api/docs/openai#thinking). Groq refuses
// anything else on an assistant message, its own reasoning included
// (https://console.groq.com/docs/api-reference#chat-create: "property
// 'reasoning' is unsupported"). EchoFields keeps more, "*" all.
func TestClientEchoesOnlyDocumentedFields(t *testing.T) {
	extra := map[string]json.RawMessage{
		"reasoning_content": json.RawMessage(`""`),
		"reasoning_details": json.RawMessage(`[{"type":"reasoning.encrypted","data":"x"}]`),
		"reasoning":         json.RawMessage(`"thinking aloud"`),
		"refusal":           json.RawMessage(`"no"`),
	}
	callExtra := map[string]json.RawMessage{
		"extra_content": json.RawMessage(`{"google":{"thought_signature":"sig"}}`),
		"provider_x":    json.RawMessage(`1`),
	}
	tests := []struct {
		echo           []string
		want, wantCall []string
	}{
		{nil, []string{"reasoning_content", "reasoning_details"}, []string{"extra_content"}},
		{[]string{"reasoning"}, []string{"reasoning", "reasoning_content", "reasoning_details"}, []string{"extra_content"}},
		{[]string{"*"}, []string{"reasoning", "reasoning_content", "reasoning_details", "refusal"}, []string{"extra_content", "provider_x"}},
	}
	known := []string{"role", "content", "tool_calls", "tool_call_id", "id", "type", "function"}
	for _, tt := range tests {
		t.Run(strings.Join(tt.echo, ","), func(t *testing.T) {
			srv := agenttest.New(t, agenttest.Reply(agenttest.Final("ok")))
			c := agent.NewClient(agent.ClientOptions{BaseURL: srv.URL, Model: "m", EchoFields: tt.echo})
			msgs := []agent.Message{
				{Role: "user", Content: "go"},
				{Role: "assistant", Extra: extra, ToolCalls: []agent.ToolCall{{ID: "c1", Type: "function", Function: agent.FunctionCall{Name: "list_dir", Arguments: `{}`}, Extra: callExtra}}},
				{Role: "tool", ToolCallID: "c1", Content: "a.txt"},
			}
			if _, err := c.Chat(context.Background(), msgs, nil); err != nil {
				t.Fatal(err)
			}
			var body struct{ Messages []map[string]json.RawMessage }
			if err := json.Unmarshal(srv.Requests()[0].Body, &body); err != nil {
				t.Fatal(err)
			}
			names := func(m map[string]json.RawMessage) []string {
				var out []string
				for k := range m {
					if !slices.Contains(known, k) {
						out = append(out, k)
					}
				}
				slices.Sort(out)
				return out
			}
			a := body.Messages[1]
			var tc []map[string]json.RawMessage
			_ = json.Unmarshal(a["tool_calls"], &tc)
			if got := names(a); !slices.Equal(got, tt.want) {
				t.Errorf("assistant message sent with %v, want %v", got, tt.want)
			}
			if len(tc) != 1 || !slices.Equal(names(tc[0]), tt.wantCall) {
				t.Errorf("tool call sent as %v, want the fields %v", tc, tt.wantCall)
			}
			if len(msgs[1].Extra) != 4 {
				t.Errorf("the caller's message was changed: %v", msgs[1].Extra)
			}
		})
	}
}
