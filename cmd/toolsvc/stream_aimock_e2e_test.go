package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/agent"
)

// TestStreamingSubAgentAimock: with TOOLSVC_LLM_STREAM, a sub-agent whose
// model is aimock (a third-party OpenAI-compatible mock that streams text
// and tool calls as OpenAI does, arguments in pieces:
// https://aimock.copilotkit.dev/streaming-physics) finishes a three-step
// tool loop from streamed replies, and GET /agents/{id}/events carries
// the model's answer in text events while aimock is still writing it
// (slowly, at a few tokens a second), before that turn's turn event.
func TestStreamingSubAgentAimock(t *testing.T) {
	t.Parallel()
	const task = "Note two things and check the note."
	const answer = "Wrote notes.txt and read it back: it says two notes."
	fixture := func(turn int, after string, response map[string]any, extra map[string]any) string {
		match := map[string]any{"userMessage": task, "turnIndex": turn, "hasToolResult": after != ""}
		if after != "" {
			match["toolCallId"] = after
		}
		f := map[string]any{"match": match, "response": response}
		for k, v := range extra {
			f[k] = v
		}
		b, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	call := func(id, name string, args any) map[string]any {
		return map[string]any{"toolCalls": []any{map[string]any{"id": id, "name": name, "arguments": args}}}
	}
	fixtures := `{"fixtures": [` + strings.Join([]string{
		fixture(0, "", call("call_write", "write_file", map[string]any{"path": "notes.txt", "content": "two notes\n"}), map[string]any{"chunkSize": 8}),
		fixture(1, "call_write", call("call_read", "read_file", map[string]any{"path": "notes.txt"}), map[string]any{"chunkSize": 8}),
		fixture(2, "call_read", map[string]any{"content": answer}, map[string]any{"chunkSize": 4, "streamingProfile": map[string]any{"ttft": 50, "tps": 12}}),
	}, ",\n") + `]}`
	llm := startAimock(t, fixtures)
	s := startServer(t, llmEnv(llm, map[string]string{"LLM_STREAM": "true"}))

	out := mustSucceed(t, s.invoke(t, "spawn", map[string]any{"task": task}))
	id := agentID.FindString(out)
	resp, stream := s.follow(t, "/agents/"+id+"/events")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /agents/%s/events: %d", id, resp.StatusCode)
	}
	var names []string
	var text strings.Builder
	var firstText, lastTurn time.Time
	for {
		ev := stream.next(t)
		if len(names) == 0 || names[len(names)-1] != ev.name {
			names = append(names, ev.name)
		}
		switch ev.name {
		case "text":
			var e agent.Event
			if err := json.Unmarshal([]byte(ev.data), &e); err != nil || e.Agent != id || e.Turn != 3 {
				t.Errorf("text event %s", ev.data)
			}
			text.WriteString(e.Delta)
			if firstText.IsZero() {
				firstText = time.Now()
			}
		case "turn":
			lastTurn = time.Now()
		}
		if ev.name == "end" {
			var done agent.Task
			if err := json.Unmarshal([]byte(ev.data), &done); err != nil || done.Status != agent.StatusCompleted || done.Turns != 3 || done.Answer != answer ||
				len(done.ToolCalls) != 2 || done.ToolCalls[0].Name != "write_file" || done.ToolCalls[1].Name != "read_file" ||
				done.ToolCalls[0].Status != "success" || done.ToolCalls[1].Status != "success" {
				t.Errorf("end event %s", ev.data)
			}
			break
		}
	}
	// The first steps may be over before the stream is open; the last
	// are the answer's text, then its turn.
	if want := []string{"text", "turn", "end"}; len(names) < len(want) || !slices.Equal(names[len(names)-len(want):], want) {
		t.Errorf("events %v, want them to end with %v", names, want)
	}
	if text.String() != answer {
		t.Errorf("text events %q, want %q", text.String(), answer)
	}
	// About 13 pieces at 12 a second: the first words came well before
	// the last.
	if gap := lastTurn.Sub(firstText); gap < 300*time.Millisecond {
		t.Errorf("the first text came %s before the reply was whole; want it while aimock was still writing", gap)
	}
	if b, err := os.ReadFile(filepath.Join(s.Workspace, "notes.txt")); err != nil || string(b) != "two notes\n" {
		t.Errorf("notes.txt: %q, %v", b, err)
	}
	// Every request asked for a stream.
	r, err := http.Get(strings.TrimSuffix(llm, "/v1") + "/__aimock/journal?path=/v1/chat/completions")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	data, _ := io.ReadAll(r.Body)
	var journal []struct {
		Body     struct{ Stream bool }
		Response struct{ Status int }
	}
	if err := json.Unmarshal(data, &journal); err != nil || len(journal) != 3 {
		t.Fatalf("aimock's journal (%v): %s", err, data)
	}
	for i, j := range journal {
		if !j.Body.Stream || j.Response.Status != http.StatusOK {
			t.Errorf("request %d: stream %v, aimock answered %d", i, j.Body.Stream, j.Response.Status)
		}
	}
}
