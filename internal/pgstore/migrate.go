package pgstore

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The schema's versions: migrations/NNNN_name.sql, applied in order, each
// once. A small versioned table (schema_migrations) does the bookkeeping
// instead of a migration library: the schema is a few tables that only
// grow forward, start-up must apply them without an operator's step, and
// one transaction under an advisory lock is all that replicas starting
// together need.
//
//go:embed migrations/*.sql
var migrations embed.FS

// migrationLock is the advisory lock key replicas take while migrating
// (the bytes of "toolsvc1").
const migrationLock int64 = 0x746f6f6c73766331

// migrate applies the migrations the database lacks, in one transaction,
// under an advisory lock so that replicas starting at once apply each
// exactly once. It returns the version the schema is at.
func migrate(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	steps, err := readMigrations()
	if err != nil {
		return 0, err
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrationLock); err != nil {
		return 0, err
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return 0, err
	}
	var current int
	if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&current); err != nil {
		return 0, err
	}
	if last := steps[len(steps)-1].version; current > last {
		return 0, fmt.Errorf("the database schema is at version %d, newer than this toolsvc knows (%d): run a newer toolsvc", current, last)
	}
	for _, s := range steps {
		if s.version <= current {
			continue
		}
		if _, err := tx.Exec(ctx, s.sql); err != nil {
			return 0, fmt.Errorf("migration %s: %w", s.name, err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", s.version, s.name); err != nil {
			return 0, err
		}
		current = s.version
	}
	return current, tx.Commit(ctx)
}

type step struct {
	version int
	name    string
	sql     string
}

// readMigrations returns the embedded migrations in order; their numbers
// must run 1, 2, 3...
func readMigrations() ([]step, error) {
	entries, err := fs.ReadDir(migrations, "migrations")
	if err != nil {
		return nil, err
	}
	var out []step
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || !strings.HasSuffix(e.Name(), ".sql") {
			return nil, fmt.Errorf("migration %s: want NNNN_name.sql", e.Name())
		}
		data, err := migrations.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, step{version: v, name: e.Name(), sql: string(data)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i, s := range out {
		if s.version != i+1 {
			return nil, fmt.Errorf("migration %s: versions must run 1, 2, 3... without gaps", s.name)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no migrations")
	}
	return out, nil
}
