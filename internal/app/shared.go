package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"time"

	"github.com/countbot/toolsvc/internal/agent"
	"github.com/countbot/toolsvc/internal/config"
	"github.com/countbot/toolsvc/internal/pgstore"
)

// maxKeptShared is how many ended tasks, and conversations, the shared
// database keeps; older ones are removed at each replica's start, as the
// data folder's are.
const maxKeptShared = 1000

// openShared opens the PostgreSQL store when TOOLSVC_DATABASE_URL is set:
// start-up fails when the database cannot be reached.
func (a *App) openShared(cfg config.Replicas) error {
	if cfg.DatabaseURL == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(a.stopping, 30*time.Second)
	defer cancel()
	s, err := pgstore.Open(ctx, pgstore.Options{URL: string(cfg.DatabaseURL), Replica: a.replica, Log: a.log.With().Str("component", "shared_store").Logger()})
	if err != nil {
		return err
	}
	a.shared = s
	a.closers = append(a.closers, s.Close)
	if err := s.Prune(ctx, maxKeptShared); err != nil {
		a.log.Warn().Err(err).Msg("shared store: cannot remove old tasks and conversations")
	}
	return nil
}

// stores are what the sub-agents keep their state in: nil stores mean
// the data folder's files.
type stores struct {
	tasks         agent.TaskStore
	conversations agent.ConversationStore
	replica       string
	lease         time.Duration
}

func (a *App) agentStores(redact func(string) string) stores {
	st := stores{replica: a.replica, lease: a.cfg.Replicas.AgentLease}
	if a.shared != nil {
		st.tasks, st.conversations = a.shared, a.shared.Conversations(redact)
	}
	return st
}

// replicaID is TOOLSVC_REPLICA_ID, or else the host name (a pod's name on
// Kubernetes) and a random suffix, which tells two processes on one host
// apart.
func replicaID(set string) string {
	if set != "" {
		return set
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "toolsvc"
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	return strings.ToLower(host) + "-" + hex.EncodeToString(b[:])
}
