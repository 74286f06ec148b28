package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/agent"
	"github.com/countbot/toolsvc/internal/agent/agenttest"
)

// dashScopeStreamOnly is DashScope's answer to a request for QwQ (or
// QVQ) that is not streamed (https://docs.qwencloud.com/resources/faq-text-generation,
// "Which models require streaming?"; the body as its OpenAI-compatible
// mode sends it).
const dashScopeStreamOnly = `{"error":{"code":"invalid_parameter_error","param":null,"message":"This model only support stream mode, please enable the stream parameter to access the model. ","type":"invalid_request_error"},"id":"chatcmpl-7ed765de","request_id":"7ed765de-de61-9a89-87f2-da9f2e39f825"}`

// dashScopeChunk is a chunk of DashScope's OpenAI-compatible stream of a
// thinking model: reasoning_content first, then content or tool calls,
// whose later deltas carry an empty id and the arguments in pieces
// (https://www.alibabacloud.com/help/en/model-studio/deep-thinking,
// https://www.alibabacloud.com/help/en/model-studio/qwen-function-calling).
func dashScopeChunk(delta, finish string) string {
	fr := "null"
	if finish != "" {
		fr = fmt.Sprintf("%q", finish)
	}
	return fmt.Sprintf(`{"choices":[{"delta":%s,"finish_reason":%s,"index":0,"logprobs":null}],"object":"chat.completion.chunk","usage":null,"created":1767225600,"system_fingerprint":null,"model":"qwq-plus","id":"chatcmpl-3f8a"}`, delta, fr)
}

func dashScopeCall(think, id, name, args string) agenttest.Response {
	half := len(args) / 2
	a1, _ := json.Marshal(args[:half])
	a2, _ := json.Marshal(args[half:])
	return agenttest.Response{Chunks: []string{
		dashScopeChunk(`{"content":null,"role":"assistant","reasoning_content":"`+think[:3]+`"}`, ""),
		dashScopeChunk(`{"content":null,"role":"assistant","reasoning_content":"`+think[3:]+`"}`, ""),
		dashScopeChunk(fmt.Sprintf(`{"content":null,"role":"assistant","tool_calls":[{"index":0,"id":%q,"type":"function","function":{"name":%q,"arguments":%s}}]}`, id, name, a1), ""),
		dashScopeChunk(`{"tool_calls":[{"index":0,"id":"","type":"function","function":{"arguments":`+string(a2)+`}}]}`, ""),
		dashScopeChunk(`{"content":"","reasoning_content":null}`, "tool_calls"),
		`{"choices":[],"object":"chat.completion.chunk","usage":{"prompt_tokens":120,"completion_tokens":20,"total_tokens":140},"created":1767225600,"system_fingerprint":null,"model":"qwq-plus","id":"chatcmpl-3f8a"}`,
	}}
}

// TestStreamOnlyModel: a model served in stream mode only (DashScope's
// QwQ) is streamed once it says so, and a two-tool task completes with
// its tool calls assembled from their deltas.
func TestStreamOnlyModel(t *testing.T) {
	srv := agenttest.New(t, func(r agenttest.Request) agenttest.Response {
		if !r.Stream {
			return agenttest.Response{Status: 400, Body: dashScopeStreamOnly}
		}
		switch n := strings.Count(string(r.Body), `"role":"tool"`); n {
		case 0:
			return dashScopeCall("Read first.", "call_ec1fd5", "read_file", `{"path": "notes.txt"}`)
		case 1:
			return dashScopeCall("Now write.", "call_9b27aa", "write_file", `{"path": "summary.md", "content": "Two notes."}`)
		}
		return agenttest.Response{Chunks: []string{
			dashScopeChunk(`{"content":null,"role":"assistant","reasoning_content":"Done."}`, ""),
			dashScopeChunk(`{"content":"Wrote ","reasoning_content":null}`, ""),
			dashScopeChunk(`{"content":"summary.md.","reasoning_content":null}`, "stop"),
		}}
	})
	runTwoToolTask(t, srv.URL, "qwq-plus")
	reqs := srv.Requests()
	if len(reqs) != 4 || reqs[0].Stream || !reqs[1].Stream || !reqs[2].Stream || !reqs[3].Stream {
		t.Fatalf("%d requests; want one not streamed (refused) then three streamed", len(reqs))
	}
	if got := reqs[1].Header.Get("Accept"); got != "text/event-stream" {
		t.Errorf("Accept %q", got)
	}
	// The next requests carry the assembled calls and reasoning.
	var body struct{ Messages []map[string]json.RawMessage }
	if err := json.Unmarshal(reqs[3].Body, &body); err != nil {
		t.Fatal(err)
	}
	a := body.Messages[2]
	if str(a["reasoning_content"]) != "Read first." || !strings.Contains(string(a["tool_calls"]), `"id":"call_ec1fd5"`) {
		t.Errorf("the first reply sent back as %s", a)
	}
}

// TestStreamedReplies: with Stream set, every request is streamed and
// the reply assembled: text, usage from the last chunk (OpenAI's
// include_usage, https://platform.openai.com/docs/api-reference/chat-streaming),
// comment lines skipped (OpenRouter's ": OPENROUTER PROCESSING",
// https://openrouter.ai/docs/api/reference/streaming); an error chunk
// mid-stream (OpenRouter's, same page, "Handling Errors During
// Streaming") and a stream cut before its end are retried.
func TestStreamedReplies(t *testing.T) {
	withUsage := agenttest.StreamText("fi", "ne")
	withUsage.Chunks = append([]string{": OPENROUTER PROCESSING"}, withUsage.Chunks...)
	withUsage.Chunks = append(withUsage.Chunks, `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"fake","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}`)
	midError := agenttest.Response{NoDone: true, Chunks: []string{
		agenttest.Chunk(`{"role":"assistant","content":"The"}`, ""),
		`{"id":"cmpl-abc123","object":"chat.completion.chunk","created":1234567890,"model":"gpt-3.5-turbo","provider":"openai","error":{"code":"server_error","message":"Provider disconnected unexpectedly"},"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}]}`,
	}}
	cut := agenttest.Response{NoDone: true, Chunks: []string{agenttest.Chunk(`{"role":"assistant","content":"The"}`, "")}}
	tests := []struct {
		name      string
		script    []agenttest.Response
		wantWaits int
	}{
		{"text and usage", []agenttest.Response{withUsage}, 0},
		{"OpenRouter error chunk is retried", []agenttest.Response{midError, withUsage}, 1},
		{"a cut stream is retried", []agenttest.Response{cut, withUsage}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var steps []func(agenttest.Request) agenttest.Response
			for _, r := range tt.script {
				steps = append(steps, agenttest.Reply(r))
			}
			srv := agenttest.New(t, steps...)
			rec := &recorder{}
			c := agent.NewClient(agent.ClientOptions{BaseURL: srv.URL, Model: "m", Timeout: 5 * time.Second, Sleep: rec.sleep, Stream: true})
			var pieces []string
			ctx := agent.WithTextSink(context.Background(), func(s string) { pieces = append(pieces, s) })
			reply, err := c.Chat(ctx, []agent.Message{{Role: "user", Content: "go"}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if reply.Message.Content != "fine" || reply.FinishReason != "stop" || reply.Usage == nil || reply.Usage.CompletionTokens != 2 {
				t.Errorf("reply %+v usage %+v", reply, reply.Usage)
			}
			if got := strings.Join(pieces, ""); !strings.HasSuffix(got, "fine") {
				t.Errorf("text passed on %q", pieces)
			}
			if len(rec.waits) != tt.wantWaits {
				t.Errorf("waits %v, want %d", rec.waits, tt.wantWaits)
			}
			for _, r := range srv.Requests() {
				if !r.Stream {
					t.Error("a request not streamed")
				}
			}
		})
	}
}

// TestStreamingSubAgentEvents: a streaming sub-agent finishes a
// three-step tool loop, and its text events come while the model is
// still writing its answer: the fake model holds the rest of the answer
// until the task's followers have been told its first words.
func TestStreamingSubAgentEvents(t *testing.T) {
	reg, tools, _ := newRegistry(t, "read_file", "write_file")
	sawText := make(chan struct{})
	var once sync.Once
	final := agenttest.StreamText("Wrote ", "summary.md. ", "All done.")
	final.Gate = func(i int) {
		if i == 2 { // the first words are out; the rest waits
			select {
			case <-sawText:
			case <-time.After(10 * time.Second):
				t.Error("no text event while the model was still writing")
			}
		}
	}
	srv := agenttest.New(t,
		agenttest.Reply(agenttest.StreamCall("c1", "read_file", `{"path":"notes.txt"}`)),
		agenttest.Reply(agenttest.StreamCall("c2", "write_file", `{"path":"summary.md","content":"x"}`)),
		agenttest.Reply(final))
	m := manager(t, srv, reg, t.TempDir(), func(o *agent.ManagerOptions) {
		o.Model = agent.NewClient(agent.ClientOptions{BaseURL: srv.URL, Model: "m", Timeout: 20 * time.Second, Stream: true})
	})
	var mu sync.Mutex
	var events []agent.Event
	task, err := m.StartWith(context.Background(), "Summarise notes.txt", agent.StartOptions{OnEvent: func(ev agent.Event) {
		mu.Lock()
		events = append(events, ev)
		mu.Unlock()
		if ev.Type == agent.EventText {
			once.Do(func() { close(sawText) })
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	done, _ := m.Wait(context.Background(), task.ID)
	if done.Status != agent.StatusCompleted || done.Turns != 3 || done.Answer != "Wrote summary.md. All done." {
		t.Fatalf("task %+v", done)
	}
	if len(tools["read_file"].calls()) != 1 || len(tools["write_file"].calls()) != 1 {
		t.Errorf("calls: read_file %v, write_file %v", tools["read_file"].calls(), tools["write_file"].calls())
	}
	mu.Lock()
	defer mu.Unlock()
	var types []string
	var text strings.Builder
	for _, ev := range events {
		if len(types) == 0 || types[len(types)-1] != ev.Type {
			types = append(types, ev.Type)
		}
		if ev.Type == agent.EventText {
			text.WriteString(ev.Delta)
			if ev.Turn != 3 {
				t.Errorf("text event of turn %d", ev.Turn)
			}
		}
	}
	want := []string{"turn", "tool_call", "turn", "tool_call", "text", "turn", "end"}
	if !slices.Equal(types, want) || text.String() != "Wrote summary.md. All done." {
		t.Errorf("events %v with text %q; want %v", types, text.String(), want)
	}
}
