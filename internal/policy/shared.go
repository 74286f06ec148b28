package policy

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// Bucket holds keys' token buckets outside the enforcer's memory, in a
// store every replica takes from (internal/pgstore keeps them in
// PostgreSQL), so that a key's rate holds across all replicas instead of
// once per replica.
type Bucket interface {
	// Take takes one token from the bucket of the key named key, which
	// refills at perSecond tokens a second up to burst (at least 1); a
	// bucket never taken from is full. It returns 0 when a token was
	// taken, else how long until one is there. now is the caller's
	// clock; a store with a clock of its own that every replica shares
	// (the database's) uses that instead. An error means nothing was
	// decided: ctx ended, or the store did not answer.
	Take(ctx context.Context, key string, perSecond, burst float64, now time.Time) (wait time.Duration, err error)
}

// Shared is what an enforcer needs to take its keys' tokens from a Bucket
// the replicas share.
type Shared struct {
	Bucket Bucket
	// Timeout bounds each take (default 250ms): a call waits no longer
	// for the store before its key's rate is decided here.
	Timeout time.Duration
	// Retry is how long the enforcer decides on its own after a take
	// failed (default 5s) before it asks the store again, so that calls
	// during an outage do not each wait Timeout. One call at a time asks.
	Retry time.Duration
	// Replicas returns how many replicas share the rates, as last known;
	// while the store does not answer each replica lets its key through
	// at its share of the rate and burst (1/Replicas), so that together
	// they stay near the rate. Nil, or under 1: 1 (each replica the whole
	// rate).
	Replicas func() int
	// Log receives a warning, at most once a minute, while calls are
	// decided here, and a line when the store answers again.
	Log zerolog.Logger
}

// Defaults of Shared.
const (
	DefaultSharedTimeout = 250 * time.Millisecond
	DefaultSharedRetry   = 5 * time.Second
)

// warnEvery spaces the warnings of a store that does not answer.
const warnEvery = time.Minute

// NewSharedEnforcer is NewEnforcer whose keys' buckets are taken from
// s.Bucket, shared by every replica; when it does not answer within
// s.Timeout, a key's bucket on this replica decides, at the replica's
// share of the key's rate. Calls at once (max_concurrent) are counted on
// each replica, as with NewEnforcer.
func NewSharedEnforcer(keys []string, now func() time.Time, s Shared) *Enforcer {
	e := NewEnforcer(keys, now)
	if s.Timeout <= 0 {
		s.Timeout = DefaultSharedTimeout
	}
	if s.Retry <= 0 {
		s.Retry = DefaultSharedRetry
	}
	e.shared = &sharedBuckets{Shared: s}
	return e
}

// sharedBuckets is an enforcer's way to the shared buckets and what it
// knows of their health.
type sharedBuckets struct {
	Shared
	// down is the time (Unix nanoseconds, the enforcer's clock) until
	// which takes are decided here without asking the store; 0: ask.
	down atomic.Int64
	// local counts the takes decided here; unwarned those since the last
	// warning, warned its time (0: none yet).
	local    atomic.Uint64
	unwarned atomic.Uint64
	warned   atomic.Int64
	// lastErr is the store's last failure, for the warning.
	lastErr atomic.Pointer[error]
}

// take takes a token of the key's bucket from the store, or from st, at
// this replica's share, when the store is down or does not answer.
func (s *sharedBuckets) take(st *keyState, key string, now time.Time, perSecond, burst float64) time.Duration {
	n := now.UnixNano()
	probe := false
	if d := s.down.Load(); d != 0 {
		// While the store is down one call at a time asks it again, once
		// Retry has passed; the others are decided here meanwhile.
		if n < d || !s.down.CompareAndSwap(d, n+int64(s.Timeout)) {
			return s.takeLocal(st, key, now, perSecond, burst)
		}
		probe = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.Timeout)
	wait, err := s.Bucket.Take(ctx, key, perSecond, burst, now)
	cancel()
	if err != nil {
		s.lastErr.Store(&err)
		s.down.Store(n + int64(s.Retry))
		return s.takeLocal(st, key, now, perSecond, burst)
	}
	if probe {
		s.down.Store(0)
		s.Log.Info().Uint64("decided_here", s.local.Load()).Msg("rate limits: the shared buckets answer again; keys' rates hold across replicas again")
	}
	return wait
}

// takeLocal decides the take with the key's bucket on this replica, at
// its share of the rate and the burst, and warns at most once a minute.
func (s *sharedBuckets) takeLocal(st *keyState, key string, now time.Time, perSecond, burst float64) time.Duration {
	share := 1
	if s.Replicas != nil {
		share = max(1, s.Replicas())
	}
	s.local.Add(1)
	s.unwarned.Add(1)
	if last := s.warned.Load(); last == 0 || now.UnixNano()-last >= int64(warnEvery) {
		if s.warned.CompareAndSwap(last, now.UnixNano()) {
			ev := s.Log.Warn().Str("key", key).Int("replicas", share).
				Uint64("decided_here", s.unwarned.Swap(0)).Uint64("decided_here_total", s.local.Load())
			if err := s.lastErr.Load(); err != nil {
				ev = ev.AnErr("error", *err)
			}
			ev.Msg("rate limits: the shared buckets did not answer; each key's rate is decided on this replica at 1/replicas of it until they do (this warning repeats at most once a minute)")
		}
	}
	f := float64(share)
	return st.take(now, perSecond/f, max(1, burst/f))
}

// SharedFallbacks returns how many takes were decided on this replica
// because the shared buckets did not answer (0 without them).
func (e *Enforcer) SharedFallbacks() uint64 {
	if e.shared == nil {
		return 0
	}
	return e.shared.local.Load()
}
