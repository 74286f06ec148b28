package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/countbot/toolsvc/internal/approval"
)

// Approvals keeps approvals in the table approvals (approval.Store), so
// that a call held on one replica can be decided on another and run on a
// third, and a restart loses none. A change reads the row FOR UPDATE and
// applies the same rules as every store (approval.Decided, approval.Used)
// in one transaction: two replicas cannot both decide or both use one
// approval.
type Approvals struct{ pool *pgxpool.Pool }

// Approvals returns the store's approvals.
func (s *Store) Approvals() *Approvals { return &Approvals{pool: s.pool} }

func (p *Approvals) Create(ctx context.Context, a approval.Approval) error {
	body, err := json.Marshal(a)
	if err != nil {
		return err
	}
	_, err = p.pool.Exec(ctx, `INSERT INTO approvals (id, key, tool, sha256, status, used, created_at, expires_at, body)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		a.ID, a.Key, a.Tool, a.ArgumentsSHA256, a.Status, a.UsedBy != "", a.CreatedAt, a.ExpiresAt, body)
	return err
}

func scanApproval(row pgx.Row) (approval.Approval, error) {
	var body []byte
	var a approval.Approval
	if err := row.Scan(&body); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return a, approval.ErrNotFound
		}
		return a, err
	}
	return a, json.Unmarshal(body, &a)
}

func (p *Approvals) Get(ctx context.Context, id string) (approval.Approval, error) {
	return scanApproval(p.pool.QueryRow(ctx, `SELECT body FROM approvals WHERE id = $1`, id))
}

func (p *Approvals) Find(ctx context.Context, key, tool, sha string, now time.Time) (approval.Approval, error) {
	return scanApproval(p.pool.QueryRow(ctx, `SELECT body FROM approvals
		WHERE key = $1 AND tool = $2 AND sha256 = $3 AND status IN ('pending', 'approved', 'rejected') AND NOT used AND expires_at > $4
		ORDER BY created_at DESC LIMIT 1`, key, tool, sha, now))
}

func (p *Approvals) Waiting(ctx context.Context, key string, now time.Time) (int, error) {
	var n int
	err := p.pool.QueryRow(ctx, `SELECT count(*) FROM approvals WHERE key = $1 AND status = 'pending' AND expires_at > $2`, key, now).Scan(&n)
	return n, err
}

func (p *Approvals) Pending(ctx context.Context) ([]approval.Approval, error) {
	return p.list(ctx, `SELECT body FROM approvals WHERE status = 'pending' ORDER BY created_at`)
}

func (p *Approvals) list(ctx context.Context, sql string, args ...any) ([]approval.Approval, error) {
	rows, err := p.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []approval.Approval
	for rows.Next() {
		a, err := scanApproval(rows)
		if err != nil {
			return out, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// change applies fn to the approval id in one transaction, the row locked.
func (p *Approvals) change(ctx context.Context, id string, fn func(a *approval.Approval) error) (approval.Approval, error) {
	var out approval.Approval
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		a, err := scanApproval(tx.QueryRow(ctx, `SELECT body FROM approvals WHERE id = $1 FOR UPDATE`, id))
		if err != nil {
			return err
		}
		out = a
		if err := fn(&a); err != nil {
			return err
		}
		body, err := json.Marshal(a)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE approvals SET status = $2, used = $3, body = $4 WHERE id = $1`, id, a.Status, a.UsedBy != "", body); err != nil {
			return err
		}
		out = a
		return nil
	})
	return out, err
}

func (p *Approvals) Decide(ctx context.Context, id, status, by, reason string, at time.Time) (approval.Approval, error) {
	return p.change(ctx, id, func(a *approval.Approval) error { return approval.Decided(a, status, by, reason, at) })
}

func (p *Approvals) Use(ctx context.Context, id, callID string, at time.Time) (approval.Approval, error) {
	return p.change(ctx, id, func(a *approval.Approval) error { return approval.Used(a, callID, at) })
}

// Expire marks the pending approvals whose time is up as expired in one
// statement: each row is returned to exactly one replica.
func (p *Approvals) Expire(ctx context.Context, now time.Time) ([]approval.Approval, error) {
	return p.list(ctx, `UPDATE approvals SET status = 'expired', body = jsonb_set(body, '{status}', '"expired"')
		WHERE status = 'pending' AND expires_at <= $1 RETURNING body`, now)
}

func (p *Approvals) Prune(ctx context.Context, before time.Time) error {
	_, err := p.pool.Exec(ctx, `DELETE FROM approvals WHERE status <> 'pending' AND expires_at < $1`, before)
	return err
}
