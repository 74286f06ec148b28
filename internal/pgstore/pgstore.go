// Package pgstore keeps sub-agent tasks, their events and send_message's
// conversations in PostgreSQL, so that several toolsvc replicas answer
// for each other's tasks: agent.SharedStore and agent.ConversationStore
// over pgx.
package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/agent"
)

// cancelChannel is the LISTEN/NOTIFY channel cancellations travel on; the
// payload is the task's ID.
const cancelChannel = "toolsvc_cancel"

// Options configure a Store.
type Options struct {
	URL     string // postgres://...
	Replica string // this process's name, written on the tasks it runs
	Log     zerolog.Logger
	// MaxConns bounds the pool when the URL does not (pool_max_conns);
	// each send_message in progress holds one. Default 20.
	MaxConns int32
}

// Store is the PostgreSQL store. Close releases it.
type Store struct {
	pool    *pgxpool.Pool
	replica string
	log     zerolog.Logger
	cancels chan string
	stop    context.CancelFunc
	wg      sync.WaitGroup
}

// Open connects, checks the database answers, applies the migrations it
// lacks and starts listening for cancellations. It fails when the
// database cannot be reached.
func Open(ctx context.Context, o Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(o.URL)
	if err != nil {
		// The parser's error may quote the URL; the redactor cuts its
		// secrets, and the message says what to fix.
		return nil, errors.New("TOOLSVC_DATABASE_URL does not parse as a PostgreSQL URL (postgres://user:password@host:5432/db)")
	}
	if o.MaxConns <= 0 {
		o.MaxConns = 20
	}
	if !strings.Contains(o.URL, "pool_max_conns") {
		cfg.MaxConns = o.MaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	where := fmt.Sprintf("%s:%d/%s", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("TOOLSVC_DATABASE_URL: cannot reach PostgreSQL at %s: %w", where, err)
	}
	version, err := migrate(pctx, pool)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("TOOLSVC_DATABASE_URL: migrating the schema at %s: %w", where, err)
	}
	lctx, stop := context.WithCancel(context.Background())
	s := &Store{pool: pool, replica: o.Replica, log: o.Log, cancels: make(chan string, 64), stop: stop}
	s.wg.Add(1)
	go s.listen(lctx, cfg.ConnConfig)
	o.Log.Info().Str("database", where).Int("schema_version", version).Str("replica", o.Replica).Msg("shared store: PostgreSQL")
	return s, nil
}

// Close stops listening and closes the connections.
func (s *Store) Close() {
	s.stop()
	s.wg.Wait()
	s.pool.Close()
}

// Ping reports whether the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }

// listen holds one connection that LISTENs for cancellations, and opens
// another when it breaks. A notice is passed on only when the task's row
// asks for the cancellation (cancelRequested). A cancellation asked while
// the connection is away is not lost: the task row keeps
// cancel_requested, which the next lease renewal reads.
func (s *Store) listen(ctx context.Context, cc *pgx.ConnConfig) {
	defer s.wg.Done()
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := s.listenOnce(ctx, cc.Copy(), func() { backoff = 100 * time.Millisecond })
		if ctx.Err() != nil {
			return
		}
		s.log.Warn().Err(err).Msg("shared store: the LISTEN connection broke; reconnecting")
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func (s *Store) listenOnce(ctx context.Context, cc *pgx.ConnConfig, connected func()) error {
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+cancelChannel); err != nil {
		return err
	}
	connected()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		ok, err := s.cancelRequested(ctx, conn, n.Payload)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		select {
		case s.cancels <- n.Payload:
		default: // the renewal reads cancel_requested in any case
		}
	}
}

// cancelRequested reports whether the notification for task id is backed
// by its row: the task runs on this replica and cancel_requested is set.
// Any role that can connect to the database can NOTIFY the channel, but
// only the cancel path (RequestCancel, which notifies in the same
// statement that sets the flag, so the row is committed by the time the
// notice arrives) sets the flag; a notice without it is ignored. The
// lookup is one primary-key read on the LISTEN connection itself, so a
// pool held by long send_message calls does not delay it; notices that
// arrive meanwhile wait in the connection's queue.
func (s *Store) cancelRequested(ctx context.Context, conn *pgx.Conn, id string) (bool, error) {
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var mine, requested bool
	err := conn.QueryRow(qctx, `SELECT replica = $2 AND status = 'running', cancel_requested
		FROM agent_tasks WHERE id = $1`, id, s.replica).Scan(&mine, &requested)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		s.log.Debug().Str("agent", id).Msg("shared store: ignored a cancellation notice for no task")
		return false, nil
	case err != nil:
		return false, err
	case mine && !requested:
		// Someone who can reach the database tried to stop a task this
		// replica runs without asking through the service.
		s.log.Warn().Str("agent", id).Msg("shared store: ignored a cancellation notice without a cancellation request on the task")
		return false, nil
	case !requested:
		s.log.Debug().Str("agent", id).Msg("shared store: ignored a cancellation notice without a cancellation request on the task")
		return false, nil
	}
	// A requested cancellation of another replica's task is that
	// replica's to act on; one of a task that already ended is moot.
	return mine, nil
}

// Cancellations delivers the IDs of this replica's running tasks whose
// cancellation was asked: notices on the channel whose row does not ask
// for it are dropped.
func (s *Store) Cancellations() <-chan string { return s.cancels }

// Load returns nothing: every replica asks the database for tasks.
func (s *Store) Load(context.Context) ([]agent.Task, error) { return nil, nil }

// Save creates the task or replaces its state, renews its lease and adds
// its new events, in one transaction (one commit). Only the replica
// running it may replace it, and only while it is running: once another
// replica marked it interrupted, Save returns agent.ErrLost and adds
// nothing.
//
// The status column says whether a replica holds the task, which is what
// the leases, cancellations and pruning ask: a task waiting for an
// approval is held as a running one is (its replica renews its lease and
// resumes it), so the column says running; its data says
// waiting_approval, as GET /agents shows.
func (s *Store) Save(ctx context.Context, t agent.Task, evs []agent.NumberedEvent) error {
	data, err := json.Marshal(t)
	if err != nil {
		return err
	}
	status := t.Status
	if agent.Active(status) {
		status = agent.StatusRunning
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	tag, err := tx.Exec(ctx, `INSERT INTO agent_tasks (id, owner, status, replica, created_at, heartbeat, data)
		VALUES ($1, $2, $3, $4, $5, now(), $6)
		ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status, data = EXCLUDED.data, heartbeat = now()
		WHERE agent_tasks.replica = EXCLUDED.replica AND agent_tasks.status = 'running'`,
		t.ID, t.Owner, status, s.replica, t.CreatedAt, data)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return agent.ErrLost
	}
	if len(evs) > 0 {
		var batch pgx.Batch
		for _, ev := range evs {
			data, err := json.Marshal(ev.Event)
			if err != nil {
				return err
			}
			batch.Queue("INSERT INTO agent_events (task_id, n, data) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING", t.ID, ev.N, data)
		}
		if err := tx.SendBatch(ctx, &batch).Close(); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}

// Get returns a task.
func (s *Store) Get(ctx context.Context, id string) (agent.Task, bool, error) {
	var data []byte
	err := s.pool.QueryRow(ctx, "SELECT data FROM agent_tasks WHERE id = $1", id).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return agent.Task{}, false, nil
	}
	if err != nil {
		return agent.Task{}, false, err
	}
	var t agent.Task
	if err := json.Unmarshal(data, &t); err != nil {
		return agent.Task{}, false, fmt.Errorf("task %s: %w", id, err)
	}
	return t, true, nil
}

// List returns every task, newest first, without their calls and answers.
func (s *Store) List(ctx context.Context) ([]agent.Summary, error) {
	rows, err := s.pool.Query(ctx, `SELECT data - 'tool_calls' - 'answer' - 'task' FROM agent_tasks ORDER BY created_at DESC, id`)
	if err != nil {
		return nil, err
	}
	out := []agent.Summary{}
	for rows.Next() {
		var data []byte
		if err := rows.Scan(&data); err != nil {
			return nil, err
		}
		var sum agent.Summary
		if err := json.Unmarshal(data, &sum); err != nil {
			return nil, err
		}
		out = append(out, sum)
	}
	return out, rows.Err()
}

// EventsAfter returns up to 500 of the task's events numbered above n.
func (s *Store) EventsAfter(ctx context.Context, id string, n int) ([]agent.Event, int, error) {
	rows, err := s.pool.Query(ctx, "SELECT n, data FROM agent_events WHERE task_id = $1 AND n > $2 ORDER BY n LIMIT 500", id, n)
	if err != nil {
		return nil, n, err
	}
	var out []agent.Event
	for rows.Next() {
		var data []byte
		if err := rows.Scan(&n, &data); err != nil {
			return nil, n, err
		}
		var ev agent.Event
		if err := json.Unmarshal(data, &ev); err != nil {
			return nil, n, err
		}
		out = append(out, ev)
	}
	return out, n, rows.Err()
}

// RequestCancel marks a running task for cancellation and notifies every
// replica; the one running it stops it.
func (s *Store) RequestCancel(ctx context.Context, id string) (bool, error) {
	tag, err := s.pool.Exec(ctx, `WITH u AS (UPDATE agent_tasks SET cancel_requested = true
		WHERE id = $1 AND status = 'running' RETURNING id)
		SELECT pg_notify('`+cancelChannel+`', id) FROM u`, id)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() > 0, nil
}

// Renew extends the lease of this replica's running tasks ids.
func (s *Store) Renew(ctx context.Context, ids []string) (lost, cancel []string, err error) {
	rows, err := s.pool.Query(ctx, `UPDATE agent_tasks SET heartbeat = now()
		WHERE replica = $1 AND status = 'running' AND id = ANY($2) RETURNING id, cancel_requested`, s.replica, ids)
	if err != nil {
		return nil, nil, err
	}
	held := map[string]bool{}
	for rows.Next() {
		var id string
		var c bool
		if err := rows.Scan(&id, &c); err != nil {
			return nil, nil, err
		}
		held[id] = true
		if c {
			cancel = append(cancel, id)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	for _, id := range ids {
		if !held[id] {
			lost = append(lost, id)
		}
	}
	return lost, cancel, nil
}

// interruptedMessage is the error of a task whose replica stopped.
const interruptedMessage = "the replica running the task stopped renewing it (it died, or lost the database) for longer than TOOLSVC_AGENT_LEASE; its work so far is in the tool calls. Next: spawn it again if it is still needed."

// Expire marks interrupted every running task whose lease ran out (one
// that waited for an approval no longer names it), with its end event,
// in one statement: when replicas race, the row lock lets
// one of them mark each task, and the others find it no longer running.
func (s *Store) Expire(ctx context.Context, lease time.Duration) ([]string, error) {
	rows, err := s.pool.Query(ctx, `WITH x AS (
			UPDATE agent_tasks SET status = 'interrupted', data = (data - 'approval') || jsonb_build_object(
				'status', 'interrupted', 'updated_at', now(), 'finished_at', now(),
				'error', jsonb_build_object('code', 'interrupted', 'message', $2::text))
			WHERE status = 'running' AND heartbeat < now() - make_interval(secs => $1)
			RETURNING id, data
		), ev AS (
			INSERT INTO agent_events (task_id, n, data)
			SELECT x.id, coalesce((SELECT max(n) FROM agent_events e WHERE e.task_id = x.id), 0) + 1,
				jsonb_build_object('type', 'end', 'agent', x.id, 'time', now(), 'turn', x.data->'turns',
					'status', 'interrupted', 'error', $2::text)
			FROM x ON CONFLICT DO NOTHING
		)
		SELECT id FROM x`, lease.Seconds(), interruptedMessage)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// Prune removes the ended tasks beyond the keep newest, with their
// events, and the conversations beyond the keep most recent.
func (s *Store) Prune(ctx context.Context, keep int) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM agent_tasks WHERE status <> 'running' AND id NOT IN
		(SELECT id FROM agent_tasks ORDER BY created_at DESC, id LIMIT $1)`, keep); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, `DELETE FROM conversations WHERE key NOT IN
		(SELECT key FROM conversations ORDER BY updated_at DESC LIMIT $1)`, keep)
	return err
}

var _ agent.SharedStore = (*Store)(nil)
