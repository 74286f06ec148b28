package agent_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/countbot/toolsvc/internal/agent"
	"github.com/countbot/toolsvc/internal/agent/agenttest"
)

// BenchmarkLoopTwoTurns measures what a sub-agent costs the service beyond
// the model's own time: two chat-completions round trips on loopback with
// the eight tools' definitions, normalising the replies, and one tool call
// through the registry (audited in memory). A model's own latency is
// hundreds of milliseconds at least; this should be a small fraction.
func BenchmarkLoopTwoTurns(b *testing.B) {
	reg, _, _ := newRegistry(b, "list_dir", "read_file", "write_file", "edit_file", "file_search", "exec", "web_fetch", "memory")
	call := agenttest.Message(`{"role":"assistant","content":null,"tool_calls":[{"function":{"name":"list_dir","arguments":{"path":"."}}}]}`, "stop")
	final := agenttest.Final("done")
	var n atomic.Int64
	srv := agenttest.New(b, func(agenttest.Request) agenttest.Response {
		if n.Add(1)%2 == 1 {
			return call
		}
		return final
	})
	loop := &agent.Loop{Model: newClient(srv, nil), Tools: reg, Allowed: subagentTools, MaxTurns: 3}
	b.ReportAllocs()
	for b.Loop() {
		if out := loop.Run(context.Background(), "sa-000000000009", "x", &nopObserver{}); out.Failure != nil || out.Turns != 2 {
			b.Fatalf("%+v", out)
		}
	}
}

// BenchmarkWorkflowGraph measures what a workflow's orchestration costs
// beyond its agents' own model time: a graph of ten agents (one root, eight
// in parallel after it, one joining them), each one model reply on
// loopback, through the manager (task files written at start, each turn and
// the end). Compare with BenchmarkLoopTwoTurns times ten.
func BenchmarkWorkflowGraph(b *testing.B) {
	reg, _, _ := newRegistry(b, "list_dir")
	srv := agenttest.New(b, agenttest.Reply(agenttest.Final("an output of a few words")))
	m, err := agent.NewManager(agent.ManagerOptions{Dir: b.TempDir(), Model: newClient(srv, nil), Tools: reg, Allowed: subagentTools, MaxTurns: 3, MaxConcurrent: 4})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close(context.Background())
	w := agent.Workflow{Goal: "g", Mode: agent.ModeGraph, Agents: []agent.Slot{{ID: "root", Task: "t"}}}
	var mid []string
	for i := range 8 {
		id := string(rune('a' + i))
		mid = append(mid, id)
		w.Agents = append(w.Agents, agent.Slot{ID: id, Task: "t", DependsOn: []string{"root"}})
	}
	w.Agents = append(w.Agents, agent.Slot{ID: "join", Task: "t", DependsOn: mid})
	if err := w.Normalize(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if c, _, _ := agent.RunWorkflow(context.Background(), m, w, nil).Counts(); c != 10 {
			b.Fatalf("%d completed", c)
		}
	}
}
