package policy

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Why Admit refuses a call (also the reason label of the refusal metric).
const (
	// ReasonDenied: the key may not call the tool (Admit never says it;
	// the registry does, when Allows is false).
	ReasonDenied = "denied"
	// ReasonRate: the key's bucket is empty.
	ReasonRate = "rate"
	// ReasonConcurrency: the key's max_concurrent calls are running.
	ReasonConcurrency = "concurrency"
)

// Enforcer holds the policy in force and each key's state: its bucket
// and its calls running. The state belongs to the key's name, not to a
// policy, so that a reload keeps what each key has spent and runs. Safe
// for concurrent use; every method is cheap and allocates nothing, except
// Admit of a key with a rate when the buckets are shared
// (NewSharedEnforcer): that asks the shared store, within its timeout.
type Enforcer struct {
	cur atomic.Pointer[Policy]
	// gen counts the policies set, for caches of what a key sees.
	gen atomic.Uint64
	// keys is fixed at construction (the service's keys do not change
	// while it runs): looked up without a lock.
	keys map[string]*keyState
	now  func() time.Time
	// shared, when set, holds the buckets every replica takes from
	// (NewSharedEnforcer); nil: each key's bucket is its keyState's.
	shared *sharedBuckets
}

// keyState is one key's bucket and calls running. With shared buckets,
// its bucket decides only while they do not answer.
type keyState struct {
	mu     sync.Mutex
	tokens float64
	last   time.Time // the bucket's last refill; zero: full
	// running counts the key's calls admitted and not yet released,
	// whatever the policy says of them, so that a reload that sets a
	// bound counts the calls already running.
	running atomic.Int64
}

// NewEnforcer returns an enforcer for the keys named keys, with no policy
// in force (every key calls every tool, unlimited) until Set. now is the
// clock (nil: time.Now).
func NewEnforcer(keys []string, now func() time.Time) *Enforcer {
	if now == nil {
		now = time.Now
	}
	e := &Enforcer{keys: make(map[string]*keyState, len(keys)), now: now}
	for _, k := range keys {
		e.keys[k] = &keyState{}
	}
	return e
}

// Set puts p in force (nil: none). Calls running keep counting against
// their key.
func (e *Enforcer) Set(p *Policy) {
	e.cur.Store(p)
	e.gen.Add(1)
}

// Generation changes whenever Set is called.
func (e *Enforcer) Generation() uint64 { return e.gen.Load() }

// Active reports whether a policy is in force.
func (e *Enforcer) Active() bool { return e.cur.Load() != nil }

// Allows reports whether the key named key may call, and see, tool.
func (e *Enforcer) Allows(key, tool string) bool {
	p := e.cur.Load()
	return p == nil || p.Allows(key, tool)
}

// SeesAll reports whether the key named key may call every tool, so that
// what it is shown is what every key without a tools rule is shown.
func (e *Enforcer) SeesAll(key string) bool {
	p := e.cur.Load()
	return p == nil || p.SeesAll(key)
}

// Folder returns the key's own folder, relative to the workspace, under
// the policy in force; "" (the whole workspace) without a policy or a
// folder for the key.
func (e *Enforcer) Folder(key string) string {
	p := e.cur.Load()
	if p == nil {
		return ""
	}
	return p.Folder(key)
}

// Subagents returns the bounds the policy in force sets on the key's
// sub-agents: how many may run at once and how many turns each may take;
// 0: no bound of the key's own (both 0 without a policy, and for a key the
// enforcer was not built with, such as a task's without keys). A task
// takes them when it starts, so that a reload bounds the tasks started
// after it.
func (e *Enforcer) Subagents(key string) (maxRunning, maxTurns int) {
	p := e.cur.Load()
	if p == nil || e.keys[key] == nil { // as Admit: a key it does not know is not bounded
		return 0, 0
	}
	return p.Subagents(key)
}

// Admit lets one call of the key named key start, or says why not
// (ReasonRate, ReasonConcurrency) and how long to wait before a retry
// can pass. A call admitted must be released with Release once it ends.
// A key the enforcer was not built with is never limited.
func (e *Enforcer) Admit(key string) (wait time.Duration, reason string) {
	st := e.keys[key]
	if st == nil {
		return 0, ""
	}
	n := st.running.Add(1)
	p := e.cur.Load()
	if p == nil {
		return 0, ""
	}
	r := p.rule(key)
	if r.maxConcurrent > 0 && n > r.maxConcurrent {
		st.running.Add(-1)
		// Nothing says when a running call ends: a second is a fair
		// first wait.
		return time.Second, ReasonConcurrency
	}
	if r.perSecond > 0 {
		var wait time.Duration
		if e.shared == nil {
			wait = st.take(e.now(), r.perSecond, r.burst)
		} else {
			wait = e.shared.take(st, key, e.now(), r.perSecond, r.burst)
		}
		if wait > 0 {
			st.running.Add(-1)
			return wait, ReasonRate
		}
	}
	return 0, ""
}

// Release ends a call Admit let through.
func (e *Enforcer) Release(key string) {
	if st := e.keys[key]; st != nil {
		st.running.Add(-1)
	}
}

// take takes a token from the bucket (refilled at perSecond up to burst
// since its last refill), or returns how long until one is there.
func (st *keyState) take(now time.Time, perSecond, burst float64) time.Duration {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.last.IsZero() {
		st.tokens = burst
	} else if d := now.Sub(st.last); d > 0 {
		st.tokens += d.Seconds() * perSecond
	}
	st.tokens = math.Min(st.tokens, burst)
	st.last = now
	if st.tokens >= 1 {
		st.tokens--
		return 0
	}
	return time.Duration(math.Ceil((1 - st.tokens) / perSecond * float64(time.Second)))
}
