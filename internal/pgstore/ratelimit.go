package pgstore

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
)

// RateBuckets keeps keys' token buckets in the table rate_buckets, so
// that every replica takes from the same bucket and a key's rate holds
// across all of them (policy.Bucket). It also says how many replicas take
// from them (Replicas), which is each replica's share of a rate when the
// database does not answer. Close releases it.
type RateBuckets struct {
	pool    *pgxpool.Pool
	replica string
	log     zerolog.Logger
	// live is the number of replicas seen at the last count (at least 1:
	// this one).
	live atomic.Int64
	stop context.CancelFunc
	wg   sync.WaitGroup
}

const (
	// rateConns bounds the buckets' own pool. A take holds a connection
	// for one statement (well under a millisecond), so a few serve
	// thousands of calls a second; the pool is apart from the store's so
	// that send_message calls, which hold a connection each for a whole
	// reply, never make a take wait.
	rateConns = 4
	// replicaBeat is how often each replica marks itself live and counts
	// the others; replicaLive is how long after its last mark a replica
	// still counts (a replica killed without Close stops counting then).
	replicaBeat = 10 * time.Second
	replicaLive = 3 * replicaBeat
	// rateConnect bounds each new connection of the buckets' pool. The
	// pool goes on opening a connection after the take that asked for it
	// gave up; without a bound, connections to a database that never
	// answers (a network that drops packets) would hold every place in
	// the pool, and takes would still time out once the database is back.
	rateConnect = 2 * time.Second
)

// takeRefill is the bucket's tokens at the take, refilled at $2 a second
// since updated_at, up to the burst $3. The take's time
// (EXCLUDED.updated_at) is the database's clock_timestamp() when the
// statement reached the row: one clock for every replica, so that skew
// between the replicas' clocks can neither mint tokens nor withhold them.
// A take that waited for the row's lock while another took may carry a
// time before the row's: it refills nothing, and the row keeps the later
// time (greatest), so the time a bucket has is never counted twice.
const takeRefill = `least($3::float8, b.tokens + $2::float8 *
	greatest(0, extract(epoch FROM EXCLUDED.updated_at - b.updated_at))::float8)`

// takeSQL is a whole take in one statement: a bucket never seen is made
// full less the token taken; else, under the row's lock, it is refilled
// and a token taken when there is one. It returns the tokens left and
// whether one was taken.
const takeSQL = `INSERT INTO rate_buckets AS b (key, tokens, taken, updated_at)
	VALUES ($1, $3::float8 - 1, true, clock_timestamp())
	ON CONFLICT (key) DO UPDATE SET
		tokens = ` + takeRefill + ` - CASE WHEN ` + takeRefill + ` >= 1 THEN 1 ELSE 0 END,
		taken = ` + takeRefill + ` >= 1,
		updated_at = greatest(b.updated_at, EXCLUDED.updated_at)
	RETURNING tokens, taken`

// beatSQL marks this replica ($1) live, forgets replicas gone for an
// hour, and counts the replicas seen within $2 seconds, this one
// included (the statement's own writes are not in what it reads).
const beatSQL = `WITH beat AS (
		INSERT INTO rate_replicas (replica, seen) VALUES ($1, clock_timestamp())
		ON CONFLICT (replica) DO UPDATE SET seen = EXCLUDED.seen
	), gone AS (
		DELETE FROM rate_replicas WHERE seen < clock_timestamp() - interval '1 hour'
	)
	SELECT 1 + count(*) FROM rate_replicas
	WHERE replica <> $1 AND seen > clock_timestamp() - make_interval(secs => $2)`

// RateBuckets opens the shared buckets on a small pool of their own,
// counts the replicas once (a failure is logged: the count stays 1 until
// a later one succeeds) and keeps counting them in the background.
func (s *Store) RateBuckets(ctx context.Context) (*RateBuckets, error) {
	cfg := s.pool.Config()
	// Every connection is kept open, with the take's statement prepared
	// on it, and made before the first call: a take made while a
	// connection is still being opened (or its statement parsed) can
	// outlast the take's bound on a busy machine, and the replica would
	// then fall back to its share with the database answering.
	cfg.MaxConns, cfg.MinConns = rateConns, rateConns
	if t := cfg.ConnConfig.ConnectTimeout; t <= 0 || t > rateConnect {
		cfg.ConnConfig.ConnectTimeout = rateConnect
	}
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Prepare(ctx, takeSQL, takeSQL)
		return err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("rate buckets: %w", err)
	}
	warm(ctx, pool, rateConns)
	b := &RateBuckets{pool: pool, replica: s.replica, log: s.log}
	b.live.Store(1)
	if err := b.countReplicas(ctx); err != nil {
		b.log.Warn().Err(err).Msg("rate buckets: cannot count the replicas yet; until a count succeeds, this replica takes its keys' whole rates when the buckets do not answer")
	}
	bctx, stop := context.WithCancel(context.Background())
	b.stop = stop
	b.wg.Go(func() { b.beat(bctx) })
	return b, nil
}

// warm opens n connections of pool at once, within rateConnect, so that
// the first calls find them; one that cannot be opened now is opened
// later, by the pool, when a take asks for it.
func warm(ctx context.Context, pool *pgxpool.Pool, n int) {
	ctx, cancel := context.WithTimeout(ctx, rateConnect)
	defer cancel()
	conns := make(chan *pgxpool.Conn, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if c, err := pool.Acquire(ctx); err == nil {
				conns <- c
			}
		})
	}
	wg.Wait()
	close(conns)
	for c := range conns {
		c.Release()
	}
}

// Take takes a token of key's bucket in one statement (see takeSQL); now
// is not used: the bucket's time is the database's. ctx bounds the wait
// for a connection and the statement. A rate of 0 or less is no rate; a
// burst under 1 is 1.
func (b *RateBuckets) Take(ctx context.Context, key string, perSecond, burst float64, _ time.Time) (time.Duration, error) {
	if perSecond <= 0 {
		return 0, nil
	}
	burst = max(burst, 1)
	var tokens float64
	var taken bool
	if err := b.pool.QueryRow(ctx, takeSQL, key, perSecond, burst).Scan(&tokens, &taken); err != nil {
		return 0, err
	}
	if taken {
		return 0, nil
	}
	return time.Duration(math.Ceil((1 - tokens) / perSecond * float64(time.Second))), nil
}

// Replicas returns how many replicas took part in the last count (every
// replicaBeat), this one included; the last count stands while the
// database does not answer.
func (b *RateBuckets) Replicas() int { return int(b.live.Load()) }

// countReplicas marks this replica live and counts the live ones.
func (b *RateBuckets) countReplicas(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var n int64
	if err := b.pool.QueryRow(ctx, beatSQL, b.replica, replicaLive.Seconds()).Scan(&n); err != nil {
		return err
	}
	if old := b.live.Swap(n); old != n {
		b.log.Info().Int64("replicas", n).Int64("before", old).Msg("rate buckets: replicas sharing the keys' rates")
	}
	return nil
}

// beat counts the replicas every replicaBeat until ctx ends. A failed
// count keeps the last one; the policy's enforcer says when the buckets
// themselves do not answer.
func (b *RateBuckets) beat(ctx context.Context) {
	t := time.NewTicker(replicaBeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := b.countReplicas(ctx); err != nil && ctx.Err() == nil {
				b.log.Debug().Err(err).Msg("rate buckets: counting the replicas failed; the last count stands")
			}
		}
	}
}

// Close stops counting, removes this replica from the count so that the
// others' shares grow at their next count, and closes the pool.
func (b *RateBuckets) Close() {
	b.stop()
	b.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := b.pool.Exec(ctx, "DELETE FROM rate_replicas WHERE replica = $1", b.replica); err != nil {
		b.log.Debug().Err(err).Msg("rate buckets: cannot remove this replica from the count; it ages out")
	}
	b.pool.Close()
}
