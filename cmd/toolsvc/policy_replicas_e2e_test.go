package main

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/countbot/toolsvc/internal/pgstore/pgtest"
)

// startRateReplicas starts two replicas with carol at 60 a minute, burst
// 5, on one database (dbURL) and one workspace: the first in this
// process, the second in a process of its own.
func startRateReplicas(t *testing.T, dbURL string) [2]*testServer {
	t.Helper()
	file := writePolicy(t, `
keys:
  carol: {rate: {per_minute: 60, burst: 5}}
`)
	env := map[string]string{"API_KEYS": policyKeys(), "POLICY_FILE": file, "DATABASE_URL": dbURL}
	a := startServer(t, env)
	env["WORKSPACE"] = a.Workspace
	b := startServer(t, env, asProcess())
	a.writeWS(t, "a.txt", "hello\n")
	return [2]*testServer{a, b}
}

// burst sends n of carol's read_file calls at once, spread evenly over the
// replicas, and returns how many passed and the Retry-After of each 429;
// any other answer fails the test.
func burst(t *testing.T, rs [2]*testServer, n int) (passed int, retries []string) {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := range n {
		carol := rs[i%2].asKey(policyCarolKey)
		wg.Go(func() {
			resp, body := carol.do(t, "POST", "/tools/read_file/invoke", strings.NewReader(`{"path":"a.txt"}`), map[string]string{"Content-Type": "application/json"})
			mu.Lock()
			defer mu.Unlock()
			switch resp.StatusCode {
			case 200:
				passed++
			case 429:
				retries = append(retries, resp.Header.Get("Retry-After"))
			default:
				t.Errorf("carol's call on replica %d: HTTP %d %s", i%2, resp.StatusCode, body)
			}
		})
	}
	wg.Wait()
	return passed, retries
}

// TestPolicyRateAcrossReplicas: with TOOLSVC_DATABASE_URL, a key's rate
// holds across replicas. carol's burst of 20 calls, half on each of two
// replicas, lets 5 to 7 through in all (each replica alone would let 5
// through: 10), the rest get 429 with Retry-After 1 (a token a second),
// and after that second a call passes again on either replica. MCP on the
// other replica refuses with the JSON-RPC error. alice, without a rate,
// is not slowed, and never touches the shared buckets.
func TestPolicyRateAcrossReplicas(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDatabase(t)
	rs := startRateReplicas(t, db)

	passed, retries := burst(t, rs, 20)
	t.Logf("carol's burst of 20 over two replicas: %d passed, %d refused", passed, len(retries))
	if passed < 5 || passed > 7 || passed+len(retries) != 20 {
		t.Fatalf("carol's burst of 20 over two replicas: %d passed, %d got 429; want 5 to 7 to pass in all, and the rest 429", passed, len(retries))
	}
	for _, r := range retries {
		if r != "1" {
			t.Errorf("429 with Retry-After %q, want 1 (a token a second)", r)
		}
	}
	_, body := rs[1].asKey(policyCarolKey).do(t, "POST", "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"a.txt"}}}`), mcpHeaders)
	if !strings.Contains(string(body), `"error":{"code":-32029`) || !strings.Contains(string(body), `"retry_after":1`) {
		t.Errorf("carol's MCP call over the rate on the other replica: %s", body)
	}
	// The wait given is right: a second on, one call passes, on the
	// replica that did not refuse the last one.
	time.Sleep(1100 * time.Millisecond)
	mustSucceed(t, rs[0].asKey(policyCarolKey).invoke(t, "read_file", map[string]string{"path": "a.txt"}))

	start := time.Now()
	for i := range 30 {
		mustSucceed(t, rs[i%2].asKey(policyAliceKey).invoke(t, "read_file", map[string]string{"path": "a.txt"}))
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("alice's 30 calls took %s", d)
	}
	conn, err := pgx.Connect(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var keys []string
	rows, err := conn.Query(context.Background(), "SELECT key FROM rate_buckets ORDER BY key")
	if err != nil {
		t.Fatal(err)
	}
	if keys, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || keys[0] != "carol" {
		t.Errorf("shared buckets: %v, want carol's only (alice has no rate)", keys)
	}
	for i, s := range rs {
		if strings.Contains(s.Logs(), "did not answer") {
			t.Errorf("replica %d fell back while the database answered:\n%s", i, s.Logs())
		}
	}
}

// TestPolicyRateDatabaseAway: when the shared buckets' database goes
// away, calls are not held up and not let through unlimited: each of the
// two replicas lets carol through at half her rate and burst (2 of her
// burst of 5 each), and warns once.
func TestPolicyRateDatabaseAway(t *testing.T) {
	t.Parallel()
	proxy := newCuttableProxy(t, "127.0.0.1:5432")
	db := strings.Replace(pgtest.NewDatabase(t), "127.0.0.1:5432", proxy.l.Addr().String(), 1)
	rs := startRateReplicas(t, db)
	// The first replica counted itself alone when it started; it counts
	// the second at its next count (every 10s).
	for deadline := time.Now().Add(waitGuard); !strings.Contains(rs[0].Logs(), `"replicas":2`); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the first replica never counted two replicas:\n%s", rs[0].Logs())
		}
	}

	proxy.setCut(true)
	start := time.Now()
	passed, retries := burst(t, rs, 20)
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("20 calls with the database away took %v", d)
	}
	if passed != 4 || len(retries) != 16 {
		t.Errorf("database away: %d passed, %d got 429; want 2 on each replica (half of the burst of 5 each)", passed, len(retries))
	}
	for _, r := range retries {
		// Half the burst is 2.5 tokens: after 2 calls half a token is
		// left, refilled at half the rate (a token every 2s) in 1s.
		if r != "1" {
			t.Errorf("429 with Retry-After %q, want 1", r)
		}
	}
	for i, s := range rs {
		if n := strings.Count(s.Logs(), "the shared buckets did not answer"); n != 1 || !strings.Contains(s.Logs(), `"replicas":2,`) {
			t.Errorf("replica %d: %d warnings, want one naming the share of 2:\n%s", i, n, s.Logs())
		}
	}
}
