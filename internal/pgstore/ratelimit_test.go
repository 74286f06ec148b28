package pgstore_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/pgstore"
	"github.com/countbot/toolsvc/internal/pgstore/pgtest"
	"github.com/countbot/toolsvc/internal/policy"
)

func rateBuckets(t testing.TB, s *pgstore.Store) *pgstore.RateBuckets {
	t.Helper()
	b, err := s.RateBuckets(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// takeN takes n tokens of key and returns how many were taken and the
// longest wait given to the others.
func takeN(t testing.TB, b *pgstore.RateBuckets, key string, n int, perSecond, burst float64) (taken int, wait time.Duration) {
	t.Helper()
	for range n {
		w, err := b.Take(context.Background(), key, perSecond, burst, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if w == 0 {
			taken++
		}
		wait = max(wait, w)
	}
	return taken, wait
}

// age moves a bucket's time back by d, as if d had passed since its last
// take: the refill runs on the database's clock, which tests cannot set.
func age(t *testing.T, url, key string, d time.Duration) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), "UPDATE rate_buckets SET updated_at = updated_at - make_interval(secs => $2) WHERE key = $1", key, d.Seconds()); err != nil {
		t.Fatal(err)
	}
}

// TestRateBucketBurstAndRefill: a new bucket is full; an empty one says
// how long until its next token; time refills it at the rate, never above
// the burst (the burst of the take, which a reload may lower).
func TestRateBucketBurstAndRefill(t *testing.T) {
	url := pgtest.NewDatabase(t)
	b := rateBuckets(t, open(t, url, "a"))
	const rate, burst = 1.0, 5.0 // 60 a minute
	taken, wait := takeN(t, b, "carol", 8, rate, burst)
	if taken != 5 || wait <= 900*time.Millisecond || wait > time.Second {
		t.Fatalf("a new bucket: %d taken (want 5), wait %v (want just under 1s)", taken, wait)
	}
	age(t, url, "carol", 2500*time.Millisecond) // 2.5 tokens back
	taken, wait = takeN(t, b, "carol", 3, rate, burst)
	if taken != 2 || wait <= 400*time.Millisecond || wait > 500*time.Millisecond {
		t.Fatalf("after 2.5s: %d taken (want 2), wait %v (want just under 500ms)", taken, wait)
	}
	age(t, url, "carol", time.Hour)
	if taken, _ = takeN(t, b, "carol", 10, rate, burst); taken != 5 {
		t.Fatalf("after an hour: %d taken, want the burst (5)", taken)
	}
	age(t, url, "carol", time.Hour)
	if taken, _ = takeN(t, b, "carol", 10, rate, 2); taken != 2 {
		t.Fatalf("burst lowered to 2: %d taken", taken)
	}
	// Another key has a bucket of its own.
	if taken, _ = takeN(t, b, "dave", 3, rate, 3); taken != 3 {
		t.Fatalf("dave: %d taken of his own burst of 3", taken)
	}
}

// TestRateBucketAcrossReplicas: two stores (two replicas) take from the
// same bucket, and each counts the other.
func TestRateBucketAcrossReplicas(t *testing.T) {
	url := pgtest.NewDatabase(t)
	a := rateBuckets(t, open(t, url, "a"))
	sb := open(t, url, "b")
	b, err := sb.RateBuckets(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	taken := 0
	for i := range 20 {
		n, _ := takeN(t, []*pgstore.RateBuckets{a, b}[i%2], "carol", 1, 1, 5)
		taken += n
	}
	if taken < 5 || taken > 6 {
		t.Fatalf("carol's 20 calls over two replicas: %d taken, want the burst of 5 (6 if a second passed)", taken)
	}
	if err := a.CountReplicas(context.Background()); err != nil {
		t.Fatal(err)
	}
	if a.Replicas() != 2 || b.Replicas() != 2 {
		t.Fatalf("replicas counted: a %d, b %d; want 2", a.Replicas(), b.Replicas())
	}
	b.Close()
	if err := a.CountReplicas(context.Background()); err != nil {
		t.Fatal(err)
	}
	if a.Replicas() != 1 {
		t.Fatalf("after b closed, a counts %d replicas", a.Replicas())
	}
}

// TestRateBucketConcurrentTakes: fifty takes at once, from two replicas,
// never take more than the burst.
func TestRateBucketConcurrentTakes(t *testing.T) {
	url := pgtest.NewDatabase(t)
	bs := []*pgstore.RateBuckets{rateBuckets(t, open(t, url, "a")), rateBuckets(t, open(t, url, "b"))}
	for round := range 3 {
		key := []string{"carol", "dave", "erin"}[round]
		var mu sync.Mutex
		taken := 0
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range 50 {
			wg.Go(func() {
				<-start
				// One token an hour: nothing refills during the test.
				w, err := bs[i%2].Take(context.Background(), key, 1.0/3600, 5, time.Time{})
				if err != nil {
					t.Error(err)
					return
				}
				if w == 0 {
					mu.Lock()
					taken++
					mu.Unlock()
				} else if w < 59*time.Minute {
					t.Errorf("wait %v, want nearly an hour", w)
				}
			})
		}
		close(start)
		wg.Wait()
		if taken != 5 {
			t.Fatalf("%s: 50 takes at once took %d tokens, want the burst (5)", key, taken)
		}
	}
}

// stallProxy passes TCP connections to PostgreSQL. Stalled, it drops
// the connections it has and holds new ones without an answer, as a
// database behind a network that lost its way does; once healed, the
// held connections go through, late, as they would.
type stallProxy struct {
	l      net.Listener
	target string
	mu     sync.Mutex
	healed chan struct{} // closed while the proxy passes connections
	conns  map[net.Conn]struct{}
}

func newStallProxy(t *testing.T, target string) *stallProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{l: l, target: target, healed: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	close(p.healed)
	t.Cleanup(func() { l.Close(); p.closeAll() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			p.conns[c] = struct{}{}
			healed := p.healed
			p.mu.Unlock()
			go func() {
				<-healed
				up, err := net.Dial("tcp", p.target)
				if err != nil {
					c.Close()
					return
				}
				p.mu.Lock()
				p.conns[up] = struct{}{}
				p.mu.Unlock()
				go func() { _, _ = io.Copy(up, c); up.Close() }()
				_, _ = io.Copy(c, up)
				c.Close()
			}()
		}
	}()
	return p
}

// set stalls the proxy (dropping the connections it passes) or heals it.
func (p *stallProxy) set(stall bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.healed:
		if stall {
			p.healed = make(chan struct{})
			for c := range p.conns {
				c.Close()
			}
			p.conns = map[net.Conn]struct{}{}
		}
	default:
		if !stall {
			close(p.healed)
		}
	}
}

func (p *stallProxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]struct{}{}
	select {
	case <-p.healed:
	default:
		close(p.healed) // held connections dial, and find the listener's side closed
	}
}

// syncBuffer is a log the test reads while the enforcer writes it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestRateBucketFallback: the policy's enforcer on the real buckets. A
// database that stops answering (connections dropped, new ones never
// answered) costs a call at most the take's timeout; the key's rate is
// then decided on the replica at its share (two replicas: half the burst
// and half the rate), with a warning naming the share; once the database
// answers again, the shared bucket decides again. A closed pool (the
// database gone for good) is decided the same way.
func TestRateBucketFallback(t *testing.T) {
	url := pgtest.NewDatabase(t)
	proxy := newStallProxy(t, "127.0.0.1:5432")
	via := strings.Replace(url, "127.0.0.1:5432", proxy.l.Addr().String(), 1)
	a := rateBuckets(t, open(t, via, "a"))
	rateBuckets(t, open(t, url, "b")) // the other replica, counted
	if err := a.CountReplicas(context.Background()); err != nil || a.Replicas() != 2 {
		t.Fatalf("replicas: %d, %v", a.Replicas(), err)
	}
	names := policy.Names{Keys: []string{"alice", "carol"}, Tools: []string{"read_file"}}
	p, err := policy.Parse([]byte(`keys: {carol: {rate: {per_minute: 60, burst: 6}}}`), names)
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	e := policy.NewSharedEnforcer(names.Keys, nil, policy.Shared{Bucket: a, Replicas: a.Replicas,
		Retry: 300 * time.Millisecond, Log: zerolog.New(logs)})
	e.Set(p)
	admit := func(n int) (passed int, wait time.Duration) {
		for range n {
			w, reason := e.Admit("carol")
			if reason == "" {
				passed++
				e.Release("carol")
			}
			wait = max(wait, w)
		}
		return passed, wait
	}
	if passed, _ := admit(2); passed != 2 {
		t.Fatalf("with the database: %d of 2 passed", passed)
	}

	proxy.set(true)
	start := time.Now()
	passed, wait := admit(10)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("10 calls with the database stalled took %v; each take must give up after %v", d, policy.DefaultSharedTimeout)
	}
	// Half the burst (3) on this replica, refilled at half the rate (a
	// token every 2s).
	if passed != 3 || wait <= time.Second || wait > 2*time.Second {
		t.Fatalf("database stalled: %d passed (want 3), longest wait %v (want about 2s)", passed, wait)
	}
	if e.SharedFallbacks() != 10 {
		t.Errorf("SharedFallbacks = %d, want 10", e.SharedFallbacks())
	}
	if l := logs.String(); strings.Count(l, "did not answer") != 1 || !strings.Contains(l, `"replicas":2`) {
		t.Errorf("want one warning naming the share; log:\n%s", l)
	}

	// Past Retry one call asks again. The pool's dropped connections
	// fail at once; then a new connection is never answered, and the
	// call waits for the take's timeout, no longer.
	var longest time.Duration
	for range 4 {
		time.Sleep(400 * time.Millisecond)
		start = time.Now()
		admit(1)
		longest = max(longest, time.Since(start))
	}
	if longest < policy.DefaultSharedTimeout/2 || longest > time.Second {
		t.Errorf("the longest take from a database that does not answer took %v, want about %v", longest, policy.DefaultSharedTimeout)
	}
	if e.SharedFallbacks() != 14 {
		t.Errorf("SharedFallbacks = %d, want 14", e.SharedFallbacks())
	}

	proxy.set(false)
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(logs.String(), "answer again") {
		if time.Now().After(deadline) {
			t.Fatalf("the shared buckets never decided again; log:\n%s", logs)
		}
		admit(1)
		time.Sleep(100 * time.Millisecond)
	}
	// The shared bucket decides again: it had 4 tokens left of 6, and has
	// refilled since, never above 6.
	if passed, _ := admit(10); passed < 1 || passed > 6 {
		t.Fatalf("database back: %d passed of the shared bucket's tokens", passed)
	}

	a.Close() // the pool is closed: every take fails at once
	before := e.SharedFallbacks()
	time.Sleep(400 * time.Millisecond) // past Retry
	if _, reason := e.Admit("carol"); reason == "" {
		e.Release("carol")
	}
	if e.SharedFallbacks() != before+1 {
		t.Fatal("a take from a closed pool was not decided on the replica")
	}
}
