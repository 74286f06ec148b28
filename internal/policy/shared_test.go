package policy

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// fakeBucket is a shared store: a bucket per key in memory, with the
// caller's clock, that fails while down is set, or hangs until the take's
// context ends while slow is set.
type fakeBucket struct {
	mu         sync.Mutex
	down, slow bool
	takes      int
	tokens     map[string]float64
	last       map[string]time.Time
}

func (f *fakeBucket) Take(ctx context.Context, key string, perSecond, burst float64, now time.Time) (time.Duration, error) {
	f.mu.Lock()
	f.takes++
	down, slow := f.down, f.slow
	f.mu.Unlock()
	if slow {
		<-ctx.Done()
		return 0, ctx.Err()
	}
	if down {
		return 0, errors.New("connection refused")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	st := keyState{tokens: f.tokens[key], last: f.last[key]}
	w := st.take(now, perSecond, burst)
	f.tokens[key], f.last[key] = st.tokens, st.last
	return w, nil
}

func (f *fakeBucket) set(down, slow bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down, f.slow = down, slow
}

func (f *fakeBucket) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.takes
}

// syncLog is a log that tests read while the enforcer writes it.
type syncLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// admitted counts the calls of key let through out of n, and returns the
// last wait of a refused one.
func admitted(t *testing.T, e *Enforcer, key string, n int) (passed int, wait time.Duration) {
	t.Helper()
	for range n {
		w, reason := e.Admit(key)
		switch reason {
		case "":
			passed++
			e.Release(key)
		case ReasonRate:
			wait = w
		default:
			t.Fatalf("reason %q", reason)
		}
	}
	return passed, wait
}

// TestSharedBucketAcrossEnforcers: two enforcers (two replicas) taking
// from one store let carol through at her rate once, not once each.
func TestSharedBucketAcrossEnforcers(t *testing.T) {
	p, err := Parse([]byte(`keys: {carol: {rate: {per_minute: 60, burst: 5}}}`), testNames())
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: time.Unix(1000, 0)}
	store := &fakeBucket{tokens: map[string]float64{}, last: map[string]time.Time{}}
	var es [2]*Enforcer
	for i := range es {
		es[i] = NewSharedEnforcer(testNames().Keys, clk.now, Shared{Bucket: store, Replicas: func() int { return 2 }, Log: zerolog.Nop()})
		es[i].Set(p)
	}
	passed := 0
	var wait time.Duration
	for i := range 20 {
		n, w := admitted(t, es[i%2], "carol", 1)
		passed += n
		if w > 0 {
			wait = w
		}
	}
	if passed != 5 || wait != time.Second {
		t.Fatalf("carol over two replicas: %d passed (want 5), wait %v (want 1s)", passed, wait)
	}
	// alice has no rate: the store is never asked for her.
	before := store.count()
	if n, _ := admitted(t, es[0], "alice", 50); n != 50 || store.count() != before {
		t.Fatalf("alice: %d of 50 passed, %d takes from the store", n, store.count()-before)
	}
	if es[0].SharedFallbacks() != 0 {
		t.Fatal("fallbacks counted while the store answered")
	}
}

// TestSharedBucketFallback: a store that fails or hangs makes each
// replica decide at its share of the rate (1/replicas of rate and burst),
// bounds the wait by the timeout, asks the store again only after Retry,
// one call at a time, warns at most once a minute, and says when the
// store answers again.
func TestSharedBucketFallback(t *testing.T) {
	p, err := Parse([]byte(`keys: {carol: {rate: {per_minute: 60, burst: 6}}}`), testNames())
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: time.Unix(1000, 0)}
	store := &fakeBucket{tokens: map[string]float64{}, last: map[string]time.Time{}}
	logs := &syncLog{}
	e := NewSharedEnforcer(testNames().Keys, clk.now, Shared{Bucket: store, Timeout: 50 * time.Millisecond,
		Replicas: func() int { return 3 }, Log: zerolog.New(logs)})
	e.Set(p)

	store.set(true, false)
	passed, wait := admitted(t, e, "carol", 10)
	// A third of the burst (2) passes; a third of the rate refills a
	// token in 3s.
	if passed != 2 || wait != 3*time.Second {
		t.Fatalf("store down: %d passed (want 2), wait %v (want 3s)", passed, wait)
	}
	if store.count() != 1 {
		t.Fatalf("the store was asked %d times while down, want once until Retry passed", store.count())
	}
	if got := e.SharedFallbacks(); got != 10 {
		t.Fatalf("SharedFallbacks = %d, want 10", got)
	}
	if n := strings.Count(logs.String(), "did not answer"); n != 1 || !strings.Contains(logs.String(), `"replicas":3`) || !strings.Contains(logs.String(), "connection refused") {
		t.Fatalf("want one warning naming the share and the error; log:\n%s", logs)
	}

	// After Retry one call asks again; the store is slow now: the call
	// waits the timeout, no longer, and is decided here.
	store.set(false, true)
	clk.t = clk.t.Add(DefaultSharedRetry)
	start := time.Now()
	passed, _ = admitted(t, e, "carol", 1)
	if d := time.Since(start); d > time.Second {
		t.Fatalf("a take from a slow store took %v, want about the timeout", d)
	}
	if passed != 1 || store.count() != 2 {
		t.Fatalf("after Retry: %d passed, %d takes from the store", passed, store.count())
	}
	if n := strings.Count(logs.String(), "did not answer"); n != 1 {
		t.Fatalf("%d warnings within a minute, want 1", n)
	}
	clk.t = clk.t.Add(time.Minute)
	admitted(t, e, "carol", 1)
	if n := strings.Count(logs.String(), "did not answer"); n != 2 {
		t.Fatalf("%d warnings after a minute, want 2", n)
	}

	// Back: the store decides again, from its own bucket.
	store.set(false, false)
	clk.t = clk.t.Add(DefaultSharedRetry)
	if passed, _ = admitted(t, e, "carol", 10); passed != 6 {
		t.Fatalf("store back: %d passed, want its full bucket (6)", passed)
	}
	if !strings.Contains(logs.String(), "answer again") {
		t.Fatalf("no line saying the store answers again; log:\n%s", logs)
	}
}

// TestSharedBucketProbeOnce: while the store is down, calls at once do
// not all wait for it: one asks, the others are decided here.
func TestSharedBucketProbeOnce(t *testing.T) {
	p, err := Parse([]byte(`keys: {carol: {rate: {per_minute: 6000, burst: 1000}}}`), testNames())
	if err != nil {
		t.Fatal(err)
	}
	store := &fakeBucket{tokens: map[string]float64{}, last: map[string]time.Time{}}
	e := NewSharedEnforcer(testNames().Keys, nil, Shared{Bucket: store, Timeout: 200 * time.Millisecond, Retry: time.Nanosecond, Log: zerolog.Nop()})
	e.Set(p)
	store.set(false, true)
	// Until a take has failed, nothing says the store is down: this one
	// waits the timeout and marks it.
	if _, reason := e.Admit("carol"); reason == "" {
		e.Release("carol")
	}
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if _, reason := e.Admit("carol"); reason == "" {
				e.Release("carol")
			}
		})
	}
	wg.Wait()
	// Retry has passed at once, but one call at a time asks, each for
	// the timeout, and the others are decided here meanwhile.
	if n := store.count() - 1; n > 10 {
		t.Fatalf("%d of 50 calls at once waited for a hanging store", n)
	}
}

func TestSharedFallbackAllocatesNothingWithoutRate(t *testing.T) {
	p, err := Parse([]byte(`keys: {bob: {max_concurrent: 4}}`), testNames())
	if err != nil {
		t.Fatal(err)
	}
	e := NewSharedEnforcer(testNames().Keys, nil, Shared{Bucket: &fakeBucket{}, Log: zerolog.Nop()})
	e.Set(p)
	allocs := testing.AllocsPerRun(1000, func() {
		if _, reason := e.Admit("bob"); reason != "" {
			t.Fatal(reason)
		}
		e.Release("bob")
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per call of a key without a rate, want 0", allocs)
	}
}
