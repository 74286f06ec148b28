package http

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/agent"
	"github.com/countbot/toolsvc/internal/agent/agenttest"
	"github.com/countbot/toolsvc/internal/registry"
)

// TestAgentEventsOutlastReadTimeout: a sub-agent's event stream lasts as
// long as the task, past the server's ReadTimeout (net/http lifts the read
// deadline when it starts watching the idle connection of a request
// without a body; this keeps it so).
func TestAgentEventsOutlastReadTimeout(t *testing.T) {
	const readTimeout = 100 * time.Millisecond
	release := make(chan struct{})
	llm := agenttest.New(t, func(agenttest.Request) agenttest.Response {
		<-release
		return agenttest.Final("late answer")
	})
	reg := registry.New(registry.Options{})
	m, err := agent.NewManager(agent.ManagerOptions{Dir: t.TempDir(), Tools: reg, MaxConcurrent: 1,
		Model: agent.NewClient(agent.ClientOptions{BaseURL: llm.URL, Model: "m", Timeout: time.Minute})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	task, err := m.Start("slow", "")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(NewHandler(Options{Registry: reg, Log: zerolog.Nop(), Routes: AgentsRoutes(m)}))
	srv.Config.ReadTimeout = readTimeout
	srv.Start()
	t.Cleanup(srv.Close)

	resp, err := http.Get(srv.URL + "/agents/" + task.ID + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	time.Sleep(3 * readTimeout) // the read deadline, had it stayed, is past
	close(release)
	sc := bufio.NewScanner(resp.Body)
	var events []string
	for sc.Scan() {
		if name, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			events = append(events, name)
		}
	}
	if len(events) == 0 || events[len(events)-1] != "end" {
		t.Fatalf("events %v: the stream ended before the task", events)
	}
}
