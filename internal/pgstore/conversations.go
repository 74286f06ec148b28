package pgstore

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/countbot/toolsvc/internal/agent"
)

// Conversations keeps send_message's histories in the Store's database.
// Redact cleans the session ID kept beside each history (the key is a
// hash of the owner and the whole ID).
type Conversations struct {
	s      *Store
	redact func(string) string
}

// Conversations returns the conversation store over s.
func (s *Store) Conversations(redact func(string) string) *Conversations {
	if redact == nil {
		redact = func(v string) string { return v }
	}
	return &Conversations{s: s, redact: redact}
}

// Hold opens a transaction holding an advisory lock on the conversation,
// so that one message of a session is answered at a time whichever
// replica it reaches; the lock goes with the transaction, also when the
// connection or the replica dies.
func (c *Conversations) Hold(ctx context.Context, owner, session string) (agent.SessionHold, error) {
	sum := sha256.Sum256([]byte(owner + "\x00" + session))
	key := hex.EncodeToString(sum[:])
	tx, err := c.s.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	h := &pgHold{c: c, tx: tx, key: key, owner: owner, session: session}
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(binary.BigEndian.Uint64(sum[:8]))); err != nil {
		h.Release()
		return nil, err
	}
	var data []byte
	err = tx.QueryRow(ctx, "SELECT messages FROM conversations WHERE key = $1", key).Scan(&data)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		h.Release()
		return nil, err
	}
	if data != nil {
		if err := json.Unmarshal(data, &h.msgs); err != nil {
			c.s.log.Warn().Msg("send_message: a stored conversation cannot be read; starting afresh")
			h.msgs = nil
		}
	}
	return h, nil
}

type pgHold struct {
	c       *Conversations
	tx      pgx.Tx
	key     string
	owner   string
	session string
	msgs    []agent.Message
}

func (h *pgHold) Messages() []agent.Message { return h.msgs }

// Save writes the history and commits, which also frees the session.
func (h *pgHold) Save(ctx context.Context, msgs []agent.Message) error {
	data, err := json.Marshal(msgs)
	if err != nil {
		return err
	}
	if _, err := h.tx.Exec(ctx, `INSERT INTO conversations (key, owner, session, messages, updated_at) VALUES ($1, $2, $3, $4, now())
		ON CONFLICT (key) DO UPDATE SET messages = EXCLUDED.messages, updated_at = now()`,
		h.key, h.owner, h.c.redact(h.session), data); err != nil {
		return err
	}
	return h.tx.Commit(ctx)
}

// Release ends the transaction if Save did not, freeing the session.
func (h *pgHold) Release() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = h.tx.Rollback(ctx)
}

var _ agent.ConversationStore = (*Conversations)(nil)
