package pgstore_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/agent"
	"github.com/countbot/toolsvc/internal/pgstore/pgtest"
	"github.com/countbot/toolsvc/internal/registry"
)

// threeCalls is a model that calls the noop tool three times, then answers.
type threeCalls struct{}

func (threeCalls) Chat(_ context.Context, msgs []agent.Message, _ []registry.Definition) (agent.Reply, error) {
	calls := 0
	for _, m := range msgs {
		if m.Role == "tool" {
			calls++
		}
	}
	if calls == 3 {
		return agent.Reply{Message: agent.Message{Role: "assistant", Content: "done"}}, nil
	}
	return agent.Reply{Message: agent.Message{Role: "assistant", ToolCalls: []agent.ToolCall{{ID: "c", Type: "function",
		Function: agent.FunctionCall{Name: "noop", Arguments: `{"path":"a.txt"}`}}}}}, nil
}

// noopTool answers every call at once.
type noopTool struct{ n atomic.Int64 }

func (*noopTool) DefinitionsFor(string) []registry.Definition {
	var d registry.Definition
	d.Type, d.Function.Name, d.Function.Parameters = "function", "noop", json.RawMessage(`{"type":"object"}`)
	return []registry.Definition{d}
}

func (t *noopTool) Invoke(context.Context, string, []byte, registry.Meta) registry.Result {
	t.n.Add(1)
	return registry.Result{Status: registry.StatusSuccess, Result: "ok"}
}

// BenchmarkTaskState measures what keeping one sub-agent task costs, model
// and tools aside (both answer at once): a task of four model replies and
// three tool calls, started and waited for through the manager, its state
// and events kept in the data folder (the task file, written at the start,
// each reply and the end; events are not kept) or in PostgreSQL (the row
// at the start, each reply, each tool call and the end, and its eight
// events). Compare the two as a ratio; a real model reply takes hundreds
// of milliseconds.
func BenchmarkTaskState(b *testing.B) {
	stores := map[string]func(b *testing.B) agent.ManagerOptions{
		"file": func(b *testing.B) agent.ManagerOptions { return agent.ManagerOptions{Dir: b.TempDir()} },
		"postgres": func(b *testing.B) agent.ManagerOptions {
			return agent.ManagerOptions{Store: open(b, pgtest.NewDatabase(b), "bench")}
		},
	}
	for _, name := range []string{"file", "postgres"} {
		b.Run(name, func(b *testing.B) {
			o := stores[name](b)
			o.Model, o.Tools, o.Allowed, o.MaxConcurrent, o.Log = threeCalls{}, &noopTool{}, []string{"noop"}, 1, zerolog.Nop()
			m, err := agent.NewManager(o)
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close(context.Background())
			b.ReportAllocs()
			for b.Loop() {
				task, err := m.Start("benchmark task", "")
				if err != nil {
					b.Fatal(err)
				}
				if done, _ := m.Wait(context.Background(), task.ID); done.Status != agent.StatusCompleted || done.CallCount != 3 {
					b.Fatalf("%+v", done)
				}
			}
		})
	}
}
