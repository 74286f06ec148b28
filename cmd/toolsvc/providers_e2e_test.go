package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/countbot/toolsvc/internal/agent/agenttest"
)

// TestSpawnAgainstMockLLM runs a sub-agent through the service, with its
// real tools, against @dwmkerr/mock-llm from npm serving each provider's
// documented replies (internal/agent/testdata/providers). The mock
// refuses, as the provider does, a follow-up request that breaks the
// provider's rule (Gemini 3's thought signatures, Mistral's content or
// tool calls, DeepSeek's reasoning_content, OpenRouter's
// reasoning_details), so a completed task is a round trip that held.
func TestSpawnAgainstMockLLM(t *testing.T) {
	t.Parallel()
	fixtures := agenttest.LoadFixtures(t, filepath.Join("..", "..", agenttest.FixtureDir))
	base := agenttest.MockLLM(t, agenttest.MockRules(fixtures))
	for name, fx := range fixtures {
		t.Run(name, func(t *testing.T) {
			s := startServer(t, llmEnv(base, map[string]string{"LLM_MODEL": fx.Model}))
			if err := os.WriteFile(filepath.Join(s.Workspace, "notes.txt"), []byte("one\ntwo\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			out := mustSucceed(t, s.invoke(t, "spawn", map[string]any{"task": "Summarise notes.txt into summary.md.", "wait": true}))
			assertContains(t, "spawn result", out, "completed in 3 turns with 2 tool calls", "Wrote summary.md.")
			data, err := os.ReadFile(filepath.Join(s.Workspace, "summary.md"))
			if err != nil || string(data) != "Two notes." {
				t.Errorf("summary.md: %q, %v", data, err)
			}
		})
	}
}

// TestSendMessageMistralSurvivesEmptyAnswer: a send_message session on a
// model with Mistral's rule (an assistant message has either content or
// tool_calls: not both, not neither; https://docs.mistral.ai/capabilities/function_calling/)
// gets text beside a tool call, then an empty answer, and the session's
// next message is still answered.
func TestSendMessageMistralSurvivesEmptyAnswer(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	replies := []agenttest.Response{
		agenttest.Message(`{"role":"assistant","content":"Let me check.","tool_calls":[{"id":"D681PevKs","type":null,"function":{"name":"exec","arguments":"{\"command\": \"echo sunny\"}"},"index":0}]}`, "tool_calls"),
		agenttest.Final(""),
		agenttest.Final("It is sunny."),
	}
	llm := agenttest.New(t, func(r agenttest.Request) agenttest.Response {
		for _, raw := range r.Messages {
			var m struct {
				Role      string
				Content   string
				ToolCalls []json.RawMessage `json:"tool_calls"`
			}
			_ = json.Unmarshal(raw, &m)
			if m.Role == "assistant" && (m.Content != "") == (len(m.ToolCalls) > 0) {
				which := "none"
				if m.Content != "" {
					which = "both"
				}
				return agenttest.Response{Status: 400, Body: `{"object":"error","message":"Assistant message must have either content or tool_calls, but not ` + which + `.","type":"invalid_request_error","param":null,"code":null}`}
			}
		}
		mu.Lock()
		defer mu.Unlock()
		next := replies[0]
		if len(replies) > 1 {
			replies = replies[1:]
		}
		return next
	})
	s := startServer(t, llmEnv(llm.URL, map[string]string{"XIAOZHI_CONVERSATION": "true", "EXEC_SANDBOX": "none"}))
	out := mustSucceed(t, s.invoke(t, "send_message", map[string]any{"text": "hello"}, "X-Session-ID", "device-7"))
	if out != "(the agent gave no reply)" {
		t.Fatalf("first reply %q", out)
	}
	out = mustSucceed(t, s.invoke(t, "send_message", map[string]any{"text": "what is the weather"}, "X-Session-ID", "device-7"))
	if out != "It is sunny." {
		t.Fatalf("second reply %q", out)
	}
}
