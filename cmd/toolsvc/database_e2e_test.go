package main

import (
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/countbot/toolsvc/internal/agent"
	"github.com/countbot/toolsvc/internal/agent/agenttest"
	"github.com/countbot/toolsvc/internal/pgstore/pgtest"
	"github.com/countbot/toolsvc/internal/toolerr"
)

// cuttableProxy passes TCP connections to a PostgreSQL server until cut,
// which drops every connection and refuses new ones, as a network
// partition or a database restart does.
type cuttableProxy struct {
	l      net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]struct{}
}

func newCuttableProxy(t *testing.T, target string) *cuttableProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cuttableProxy{l: l, target: target, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() { l.Close(); p.setCut(true) })
	go p.serve()
	return p
}

func (p *cuttableProxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		go func() { _, _ = io.Copy(up, c); up.Close() }()
		go func() { _, _ = io.Copy(c, up); c.Close() }()
	}
}

func (p *cuttableProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			c.Close()
		}
		p.conns = map[net.Conn]struct{}{}
	}
}

// TestDatabaseOutage: a database that cannot be reached at start-up stops
// the start with a clear message; one that goes away later makes /readyz
// 503, /agents 503 and the agent tools return unavailable while the file
// tools work; when it comes back, the task that ended meanwhile is in the
// database once, with each of its events once.
func TestDatabaseOutage(t *testing.T) {
	llm := agenttest.New(t, func(req agenttest.Request) agenttest.Response {
		if strings.Contains(string(req.Messages[len(req.Messages)-1]), "hang") {
			return agenttest.Response{Hang: true}
		}
		return agenttest.Final("done")
	})
	env := llmEnv(llm.URL, map[string]string{"AGENT_LEASE": "3s", "XIAOZHI_CONVERSATION": "true"})

	env["DATABASE_URL"] = "postgres://postgres:hunter2-db-password@" + freeAddr(t) + "/toolsvc?connect_timeout=5"
	err := startError(t, env)
	if err == nil || !strings.Contains(err.Error(), "TOOLSVC_DATABASE_URL: cannot reach PostgreSQL at 127.0.0.1:") {
		t.Fatalf("start-up with an unreachable database: %v", err)
	}

	db := pgtest.NewDatabase(t)
	proxy := newCuttableProxy(t, "127.0.0.1:5432")
	env["DATABASE_URL"] = strings.Replace(db, "127.0.0.1:5432", proxy.l.Addr().String(), 1)
	s := startServer(t, env)
	id := agentID.FindString(mustSucceed(t, s.invoke(t, "spawn", map[string]any{"task": "hang for a while"})))

	proxy.setCut(true)
	resp, body := s.do(t, "GET", "/readyz", nil, nil)
	if resp.StatusCode != 503 || !strings.Contains(string(body), `"database"`) {
		t.Errorf("/readyz with the database away: %d %s", resp.StatusCode, body)
	}
	mustFail(t, s.invoke(t, "spawn", map[string]any{"task": "another"}), toolerr.Unavailable, "Next:")
	mustFail(t, s.invoke(t, "send_message", map[string]any{"text": "hello"}, "X-Session-ID", "s1"), toolerr.Unavailable, "Next:")
	mustSucceed(t, s.invoke(t, "write_file", map[string]any{"path": "still.txt", "content": "works"}))
	mustSucceed(t, s.invoke(t, "read_file", map[string]any{"path": "still.txt"}))
	if resp, body := s.do(t, "GET", "/agents", nil, nil); resp.StatusCode != 503 {
		t.Errorf("GET /agents with the database away: %d %s", resp.StatusCode, body)
	}
	// This replica's own task is canceled at once; the database hears of
	// it when it is back.
	if resp, body := s.do(t, "DELETE", "/agents/"+id, nil, nil); resp.StatusCode != 200 || !strings.Contains(string(body), `"canceled"`) {
		t.Errorf("DELETE /agents/%s with the database away: %d %s", id, resp.StatusCode, body)
	}

	proxy.setCut(false)
	for deadline := time.Now().Add(waitGuard); ; time.Sleep(100 * time.Millisecond) {
		if resp, _ := s.do(t, "GET", "/readyz", nil, nil); resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("/readyz stayed 503 after the database came back")
		}
	}
	conn, err := pgx.Connect(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var status string
	for deadline := time.Now().Add(waitGuard); status != agent.StatusCanceled; time.Sleep(100 * time.Millisecond) {
		if err := conn.QueryRow(context.Background(), "SELECT status FROM agent_tasks WHERE id = $1", id).Scan(&status); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s is %s in the database", id, status)
		}
	}
	var events, ends, maxN int
	if err := conn.QueryRow(context.Background(), `SELECT count(*), count(*) FILTER (WHERE data->>'type' = 'end'), coalesce(max(n), 0)
		FROM agent_events WHERE task_id = $1`, id).Scan(&events, &ends, &maxN); err != nil {
		t.Fatal(err)
	}
	if ends != 1 || events != maxN {
		t.Errorf("events of %s: %d (numbered up to %d), %d end events; want each once", id, events, maxN, ends)
	}
	mustSucceed(t, s.invoke(t, "spawn", map[string]any{"task": "after the outage"}))
	if strings.Contains(s.Logs(), "hunter2-db-password") {
		t.Error("the database password is in the log")
	}
}
