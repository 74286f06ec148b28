package main

import (
	"os"
	"path/filepath"
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
