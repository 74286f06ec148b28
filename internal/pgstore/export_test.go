package pgstore

import "context"

// CountReplicas counts the replicas now, as the background count does
// every replicaBeat, for tests that cannot wait for it.
func (b *RateBuckets) CountReplicas(ctx context.Context) error { return b.countReplicas(ctx) }
