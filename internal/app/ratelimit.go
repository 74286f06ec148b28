package app

import (
	"context"
	"time"

	"github.com/countbot/toolsvc/internal/policy"
)

// newEnforcer builds the key policy's enforcer for the keys named keys.
// With the shared database (TOOLSVC_DATABASE_URL) each key's bucket is a
// row there, which every replica takes from, so that a key's rate holds
// across all of them; while the database does not answer, each replica
// decides at its share of the rate (the rate over the replicas last
// counted). Calls at once (max_concurrent) are counted on each replica.
// Without the database, each key's bucket is in this replica's memory.
func (a *App) newEnforcer(keys []string) *policy.Enforcer {
	if a.shared == nil {
		return policy.NewEnforcer(keys, nil)
	}
	log := a.log.With().Str("component", "rate_limits").Logger()
	ctx, cancel := context.WithTimeout(a.stopping, 10*time.Second)
	defer cancel()
	buckets, err := a.shared.RateBuckets(ctx)
	if err != nil {
		// Only a pool that cannot be built gets here (the database
		// answered at start-up): the rates still hold, on each replica.
		log.Error().Err(err).Msg("rate limits: the shared buckets cannot be opened; each replica lets each key through at its whole rate")
		return policy.NewEnforcer(keys, nil)
	}
	a.closers = append(a.closers, buckets.Close)
	return policy.NewSharedEnforcer(keys, nil, policy.Shared{Bucket: buckets, Replicas: buckets.Replicas, Log: log})
}
