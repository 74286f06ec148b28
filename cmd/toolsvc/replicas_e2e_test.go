package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/countbot/toolsvc/internal/agent"
	"github.com/countbot/toolsvc/internal/agent/agenttest"
	"github.com/countbot/toolsvc/internal/audit"
	"github.com/countbot/toolsvc/internal/pgstore/pgtest"
	"github.com/countbot/toolsvc/internal/registry"
)

// replicaLease is the tests' TOOLSVC_AGENT_LEASE: short, so that a dead
// replica's task is taken over soon.
const replicaLease = 3 * time.Second

// replica is one toolsvc process of a cluster, on a fixed loopback port so
// that it comes back where the balancer expects it.
type replica struct {
	name    string
	addr    string
	vars    map[string]string
	cmd     *exec.Cmd
	exited  chan error
	logs    *syncBuffer
	server  *testServer // for the request helpers, pointed at addr
	dataDir string
	owner   testing.TB // the test whose end stops the process
}

// cluster is three replicas sharing one PostgreSQL database and one
// workspace, behind HAProxy.
type cluster struct {
	db       string
	replicas []*replica
	lb       *testServer
	ws       string
}

// freePort returns a loopback port nothing listens on now.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func startCluster(t testing.TB, llmURL string, n int) *cluster {
	return startClusterWith(t, llmURL, n, true)
}

// startClusterWith starts n replicas, sharing a database unless shared is
// false (one replica then keeps its tasks in its data folder).
func startClusterWith(t testing.TB, llmURL string, n int, shared bool) *cluster {
	t.Helper()
	if _, err := exec.LookPath("haproxy"); err != nil {
		t.Fatal("haproxy is not installed; scripts/test.sh installs it (Debian's haproxy package)")
	}
	c := &cluster{db: pgtest.NewDatabase(t), ws: filepath.Join(t.TempDir(), "ws")}
	for i := range n {
		r := &replica{name: fmt.Sprintf("r%d", i+1), addr: freeAddr(t), dataDir: filepath.Join(t.TempDir(), "data"), owner: t}
		r.vars = map[string]string{
			"ADDR": r.addr, "WORKSPACE": c.ws, "DATA_DIR": r.dataDir, "LOG_LEVEL": "info",
			"DATABASE_URL": c.db, "REPLICA_ID": r.name, "AGENT_LEASE": replicaLease.String(),
			"LLM_BASE_URL": llmURL, "LLM_MODEL": "fake-model", "XIAOZHI_CONVERSATION": "true",
			"AGENT_MAX_CONCURRENT": "64", "MAX_CONCURRENT_CALLS": "64",
		}
		if !shared {
			delete(r.vars, "DATABASE_URL")
		}
		r.server = &testServer{URL: "http://" + r.addr}
		c.replicas = append(c.replicas, r)
		r.start(t)
	}
	c.lb = &testServer{URL: "http://" + startHAProxy(t, c.replicas)}
	return c
}

// start runs the replica's process and waits for it to listen.
func (r *replica) start(t testing.TB) {
	t.Helper()
	if err := r.startErr(); err != nil {
		t.Fatal(err)
	}
}

// startErr is start for another goroutine than the test's: it returns
// what went wrong.
func (r *replica) startErr() error {
	r.logs = &syncBuffer{}
	pr, pw := io.Pipe()
	r.cmd, r.exited = startProcess(r.owner, r.vars, nil, nil, pw, r.logs)
	addr, _ := watchLog(pr, r.logs)
	select {
	case <-addr:
		return nil
	case err := <-r.exited:
		return fmt.Errorf("replica %s did not start: %v\n%s", r.name, err, r.logs.String())
	case <-time.After(startGuard):
		return fmt.Errorf("replica %s did not start in time:\n%s", r.name, r.logs.String())
	}
}

// kill ends the replica with SIGKILL and waits until it is gone.
func (r *replica) kill(t *testing.T) {
	t.Helper()
	_ = r.cmd.Process.Signal(syscall.SIGKILL)
	<-r.exited
}

// startHAProxy balances round-robin over the replicas, checking /readyz;
// a connection refused by a dead replica is retried on another (a call
// that reached one is never sent twice). It returns the balancer's
// address.
func startHAProxy(t testing.TB, rs []*replica) string {
	t.Helper()
	addr := freeAddr(t)
	var b strings.Builder
	fmt.Fprintf(&b, `global
    maxconn 512
defaults
    mode http
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    retries 3
    option redispatch
    retry-on conn-failure
frontend fe
    bind %s
    default_backend replicas
backend replicas
    balance roundrobin
    option httpchk GET /readyz
`, addr)
	for _, r := range rs {
		fmt.Fprintf(&b, "    server %s %s check inter 300ms fall 1 rise 1\n", r.name, r.addr)
	}
	cfg := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(cfg, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("haproxy", "-db", "-f", cfg)
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// Ready when it answers as many times in a row as it has replicas
	// (round-robin: each of them once).
	deadline := time.Now().Add(startGuard)
	for inRow := 0; inRow < len(rs); {
		if time.Now().After(deadline) {
			t.Fatalf("haproxy did not answer; log:\n%s", logs.String())
		}
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				inRow++
				continue
			}
		}
		inRow = 0
		time.Sleep(50 * time.Millisecond)
	}
	return addr
}

// runningOn returns the replica whose process runs task id, as the
// database records it.
func (c *cluster) runningOn(t *testing.T, id string) *replica {
	t.Helper()
	var name string
	c.query(t, func(conn *pgx.Conn) error {
		return conn.QueryRow(context.Background(), "SELECT replica FROM agent_tasks WHERE id = $1", id).Scan(&name)
	})
	for _, r := range c.replicas {
		if r.name == name {
			return r
		}
	}
	t.Fatalf("task %s runs on %q, no replica of the cluster", id, name)
	return nil
}

func (c *cluster) query(t *testing.T, f func(*pgx.Conn) error) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), c.db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if err := f(conn); err != nil {
		t.Fatal(err)
	}
}

// scriptedModel hangs on tasks that say "hang" (until the task is
// canceled), and otherwise answers at once, a conversation's message with
// "reply to" and its last words.
func scriptedModel(t testing.TB) *agenttest.Server {
	return agenttest.New(t, func(req agenttest.Request) agenttest.Response {
		last := string(req.Messages[len(req.Messages)-1])
		switch {
		case strings.Contains(last, "hang"):
			return agenttest.Response{Hang: true}
		case strings.Contains(string(req.Messages[0]), "voice device"):
			var m agent.Message
			_ = json.Unmarshal(req.Messages[len(req.Messages)-1], &m)
			return agenttest.Final("reply to " + m.Content)
		}
		return agenttest.Final("done")
	})
}

// TestReplicas runs three replicas behind HAProxy with one PostgreSQL
// database and a scripted model, and checks what each replica answers for
// the others, in one cluster to keep the test short: the last subtest
// kills a replica for good.
func TestReplicas(t *testing.T) {
	llm := scriptedModel(t)
	c := startCluster(t, llm.URL, 3)
	t.Run("ShareTasks", func(t *testing.T) { replicasShareTasks(t, c, llm) })
	t.Run("RestartUnderLoad", func(t *testing.T) { replicaRestartUnderLoad(t, c) })
	t.Run("Killed", func(t *testing.T) { replicaKilled(t, c) })
}

// replicasShareTasks: a task spawned through the balancer is listed,
// shown, followed and canceled through each of the other replicas; a
// conversation's two messages through two replicas make one conversation
// in order.
func replicasShareTasks(t *testing.T, c *cluster, llm *agenttest.Server) {

	out := mustSucceed(t, c.lb.invoke(t, "spawn", map[string]any{"task": "hang until canceled"}))
	id := agentID.FindString(out)
	home := c.runningOn(t, id)
	var others []*replica
	for _, r := range c.replicas {
		if r != home {
			others = append(others, r)
		}
	}
	var streams []*bufio.Reader
	for _, r := range others {
		resp, body := r.server.do(t, "GET", "/agents", nil, nil)
		if resp.StatusCode != 200 || !strings.Contains(string(body), id) {
			t.Fatalf("GET /agents on %s: %d %s", r.name, resp.StatusCode, body)
		}
		if got := r.server.agentTask(t, id); got.Status != agent.StatusRunning {
			t.Fatalf("GET /agents/%s on %s: %+v", id, r.name, got)
		}
		req, _ := http.NewRequest("GET", r.server.URL+"/agents/"+id+"/events", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("events on %s: %v %v", r.name, err, resp)
		}
		t.Cleanup(func() { resp.Body.Close() })
		streams = append(streams, bufio.NewReader(resp.Body))
	}
	// Canceled through the first other replica; both followers see the end.
	resp, body := others[0].server.do(t, "DELETE", "/agents/"+id, nil, nil)
	var task agent.Task
	if resp.StatusCode != 200 || json.Unmarshal(body, &task) != nil || task.Status != agent.StatusCanceled {
		t.Fatalf("DELETE on %s: %d %s", others[0].name, resp.StatusCode, body)
	}
	for i, sr := range streams {
		if end := readEnd(t, sr); end.Status != agent.StatusCanceled || end.ID != id {
			t.Errorf("the stream on %s ended with %+v", others[i].name, end)
		}
	}
	// And the second other replica cancels a task too.
	out = mustSucceed(t, c.lb.invoke(t, "spawn", map[string]any{"task": "hang again"}))
	id2 := agentID.FindString(out)
	for _, r := range c.replicas {
		if r != c.runningOn(t, id2) {
			resp, body := r.server.do(t, "DELETE", "/agents/"+id2, nil, nil)
			if resp.StatusCode != 200 || !strings.Contains(string(body), `"canceled"`) {
				t.Fatalf("DELETE on %s: %d %s", r.name, resp.StatusCode, body)
			}
			break
		}
	}

	// Two messages of one session, at once, through two replicas: one
	// waits for the other and sees its exchange.
	var wg sync.WaitGroup
	for i, r := range c.replicas[:2] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := r.server.invoke(t, "send_message", map[string]any{"text": fmt.Sprintf("message %d", i)}, "X-Session-ID", "s1")
			if res.Status != registry.StatusSuccess {
				t.Errorf("send_message on %s: %+v", r.name, res)
			}
		}()
	}
	wg.Wait()
	var msgs []agent.Message
	c.query(t, func(conn *pgx.Conn) error {
		var data []byte
		err := conn.QueryRow(context.Background(), "SELECT messages FROM conversations").Scan(&data)
		if err == nil {
			err = json.Unmarshal(data, &msgs)
		}
		return err
	})
	if len(msgs) != 4 || msgs[1].Content != "reply to "+msgs[0].Content || msgs[3].Content != "reply to "+msgs[2].Content || msgs[0].Content == msgs[2].Content {
		t.Fatalf("one conversation in order, want 4 messages: %+v", msgs)
	}
	var sizes []int
	for _, req := range llm.Requests() {
		if strings.Contains(string(req.Messages[0]), "voice device") {
			sizes = append(sizes, len(req.Messages))
		}
	}
	// The system prompt and the message; then those, the first exchange, and the second message.
	if len(sizes) != 2 || sizes[0] != 2 || sizes[1] != 4 {
		t.Errorf("the model saw conversations of %v messages, want [2 4]", sizes)
	}
}

// readEnd reads server-sent events until the "end" one and returns its
// task.
func readEnd(t *testing.T, r *bufio.Reader) agent.Task {
	t.Helper()
	event := ""
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended before its end event: %v", err)
		}
		line = strings.TrimRight(line, "\n")
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			event = v
		}
		if v, ok := strings.CutPrefix(line, "data: "); ok && event == "end" {
			var task agent.Task
			if err := json.Unmarshal([]byte(v), &task); err != nil {
				t.Fatal(err)
			}
			return task
		}
	}
}

// replicaKilled: after kill -9 of the replica running a task, another
// marks it interrupted once the lease has run out, exactly once.
func replicaKilled(t *testing.T, c *cluster) {
	out := mustSucceed(t, c.lb.invoke(t, "spawn", map[string]any{"task": "hang until the replica dies"}))
	id := agentID.FindString(out)
	home := c.runningOn(t, id)
	var other *replica
	for _, r := range c.replicas {
		if r != home {
			other = r
		}
	}
	killed := time.Now()
	home.kill(t)
	var task agent.Task
	for deadline := time.Now().Add(waitGuard); task.Status != agent.StatusInterrupted; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("task %s still %s", id, task.Status)
		}
		task = other.server.agentTask(t, id)
	}
	t.Logf("interrupted %s after the kill (lease %s)", time.Since(killed).Round(100*time.Millisecond), replicaLease)
	if task.Error == nil || task.Error.Code != agent.FailInterrupted || !strings.Contains(task.Error.Message, "TOOLSVC_AGENT_LEASE") {
		t.Errorf("interrupted task: %+v", task.Error)
	}
	// Once: one end event, and one replica says it marked it. A lease
	// never runs out early: the mark is a lease after the last renewal.
	var ends int
	var early bool
	c.query(t, func(conn *pgx.Conn) error {
		if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM agent_events WHERE task_id = $1 AND data->>'type' = 'end'", id).Scan(&ends); err != nil {
			return err
		}
		return conn.QueryRow(context.Background(), "SELECT (data->>'finished_at')::timestamptz < heartbeat + make_interval(secs => $2) FROM agent_tasks WHERE id = $1", id, replicaLease.Seconds()).Scan(&early)
	})
	if ends != 1 || early {
		t.Errorf("%d end events (want 1); marked before the lease ran out: %v", ends, early)
	}
	// Let a few more rounds of every survivor pass: still one mark.
	time.Sleep(replicaLease)
	marks := 0
	for _, r := range c.replicas {
		if r != home {
			for _, line := range strings.Split(r.logs.String(), "\n") {
				if strings.Contains(line, "a task's replica stopped renewing it") && strings.Contains(line, id) {
					marks++
				}
			}
		}
	}
	if marks != 1 {
		t.Errorf("%d replicas marked the task, want 1", marks)
	}
}

// replicaRestartUnderLoad: 1,000 mixed calls through the balancer
// while one replica is killed and restarted. Every call answered 200 did
// its work and is audited exactly once; every call left without an answer
// was in flight on the killed replica (at most as many as run at once),
// and either has one audit record there, final or, reconciled at its
// restart, interrupted, or never began: no record anywhere and no effect.
func replicaRestartUnderLoad(t *testing.T, c *cluster) {
	const calls, workers = 1000, 8
	victim := c.replicas[1]
	results := make([]loadOutcome, calls)
	next := make(chan int)
	var wg sync.WaitGroup
	client := &http.Client{Timeout: time.Minute}
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				results[i] = loadCall(client, c.lb.URL, i)
			}
		}()
	}
	restarted := make(chan struct{})
	for i := range calls {
		if i == calls/3 {
			victim.kill(t)
			go func() {
				defer close(restarted)
				if err := victim.startErr(); err != nil {
					t.Error(err)
				}
			}()
		}
		next <- i
	}
	close(next)
	wg.Wait()
	<-restarted

	records := map[string][]audit.Record{}
	for _, r := range c.replicas {
		for _, rec := range auditRecords(t, r.dataDir) {
			if m := markerOf(rec); m != "" {
				records[m] = append(records[m], rec)
			}
		}
	}
	failed, interrupted, finished, never := 0, 0, 0, 0
	for _, o := range results {
		recs := records[o.marker]
		if o.ok {
			if len(recs) != 1 || recs[0].Status != o.status {
				t.Errorf("call %s (%s) answered 200 but audited %d times: %+v", o.marker, o.tool, len(recs), recs)
			}
			continue
		}
		failed++
		switch len(recs) {
		case 0:
			never++
		case 1:
			if recs[0].Status == audit.StatusInterrupted {
				interrupted++
			} else {
				finished++
			}
		}
		switch {
		case len(recs) > 1:
			t.Errorf("unanswered call %s audited %d times", o.marker, len(recs))
		case len(recs) == 1 && recs[0].Replica != victim.name:
			t.Errorf("unanswered call %s was audited on %s, not on the killed replica", o.marker, recs[0].Replica)
		case len(recs) == 0 && o.tool == "write_file":
			if _, err := os.Stat(filepath.Join(c.ws, "load", o.marker+".txt")); err == nil {
				t.Errorf("unanswered call %s wrote its file but has no audit record", o.marker)
			}
		}
	}
	t.Logf("%d of %d calls unanswered (in flight on the killed replica): %d reconciled as interrupted, %d with a final record, %d never began",
		failed, calls, interrupted, finished, never)
	if failed > workers {
		t.Errorf("%d calls unanswered, more than the %d that can be in flight at once", failed, workers)
	}
}

// loadOutcome is what became of one call of the load.
type loadOutcome struct {
	marker string
	tool   string
	ok     bool   // answered 200 with a result
	status string // the result's
}

// loadCall makes call i of the load: write_file (its file named by the
// marker), read_file, list_dir, or spawn, whose arguments carry the marker.
func loadCall(client *http.Client, base string, i int) (o loadOutcome) {
	o.marker = fmt.Sprintf("m%04d", i)
	var args string
	switch i % 10 {
	case 0:
		o.tool, args = "spawn", fmt.Sprintf(`{"task":"quick %s"}`, o.marker)
	case 1, 2:
		o.tool, args = "read_file", fmt.Sprintf(`{"path":"load/%s-missing.txt"}`, o.marker)
	case 3, 4:
		o.tool, args = "list_dir", fmt.Sprintf(`{"path":"load/../load/%s/.."}`, o.marker)
	default:
		o.tool, args = "write_file", fmt.Sprintf(`{"path":"load/%s.txt","content":"%s"}`, o.marker, o.marker)
	}
	resp, err := client.Post(base+"/tools/"+o.tool+"/invoke", "application/json", strings.NewReader(args))
	if err != nil {
		return o
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	var res registry.Result
	o.ok = err == nil && resp.StatusCode == 200 && json.Unmarshal(body, &res) == nil && res.CallID != ""
	o.status = res.Status
	return o
}

// markerOf returns the load marker in a record's arguments.
func markerOf(rec audit.Record) string {
	data, _ := json.Marshal(rec.Arguments)
	s := string(data)
	for j := 0; j+5 <= len(s); j++ {
		if s[j] == 'm' && isDigits(s[j+1:j+5]) {
			return s[j : j+5]
		}
	}
	return ""
}

func isDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

// auditRecords returns every final record under a data folder.
func auditRecords(t *testing.T, dataDir string) []audit.Record {
	t.Helper()
	var out []audit.Record
	files, _ := filepath.Glob(filepath.Join(dataDir, "audit_logs", "*", "*.json"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var rec audit.Record
		if err := json.Unmarshal(data, &rec); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, rec)
	}
	return out
}

// BenchmarkReplicasSpawnStatus measures the throughput of spawn plus one
// GET /agents/{id} through HAProxy, over one replica keeping its tasks in
// its data folder, and over one and three sharing one PostgreSQL database,
// with 16 clients at once; each task is
// one reply of a scripted model. Compare ops/s across the two; on a
// machine with few cores the replicas share them, and the database's
// commits bound both.
func BenchmarkReplicasSpawnStatus(b *testing.B) {
	for _, v := range []struct {
		name   string
		n      int
		shared bool
	}{{"files,replicas=1", 1, false}, {"postgres,replicas=1", 1, true}, {"postgres,replicas=3", 3, true}} {
		b.Run(v.name, func(b *testing.B) {
			c := startClusterWith(b, scriptedModel(b).URL, v.n, v.shared)
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			b.SetParallelism(8) // 8 per core
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := spawnAndStatus(client, c.lb.URL); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ops/s")
		})
	}
}

func spawnAndStatus(client *http.Client, base string) error {
	resp, err := client.Post(base+"/tools/spawn/invoke", "application/json", strings.NewReader(`{"task":"quick"}`))
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var res registry.Result
	if err := json.Unmarshal(body, &res); err != nil || res.Status != registry.StatusSuccess {
		return fmt.Errorf("spawn: %d %s", resp.StatusCode, body)
	}
	id := agentID.FindString(res.Result)
	resp, err = client.Get(base + "/agents/" + id)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET /agents/%s: %d", id, resp.StatusCode)
	}
	return nil
}
