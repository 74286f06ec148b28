package approval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// The states of an approval.
const (
	StatusPending  = "pending"
	StatusApproved = "approved"
	StatusRejected = "rejected"
	StatusExpired  = "expired"
)

// Approval is one held call and what became of it. It is what GET
// /approvals lists and what the stores keep.
type Approval struct {
	ID string `json:"approval_id"`
	// Key is the name of the key whose call is held ("" without keys).
	Key  string `json:"key,omitempty"`
	Tool string `json:"tool"`
	// ArgumentsSHA256 is the hash of the held call's canonical arguments
	// (Hash): only a call with the same tool and the same hash runs under
	// the approval.
	ArgumentsSHA256 string `json:"arguments_sha256"`
	// Arguments are the held call's arguments, redacted and with long
	// strings cut, for the person deciding.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Summary says in words what the call will do.
	Summary   string `json:"summary"`
	Workspace string `json:"workspace,omitempty"`
	SessionID string `json:"session_id,omitempty"`
	// CallID is the held call's ID (its audit record).
	CallID    string    `json:"call_id"`
	Status    string    `json:"status"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
	// DecidedBy names the key that decided; DecidedAt and Reason go with
	// it.
	DecidedBy string     `json:"decided_by,omitempty"`
	DecidedAt *time.Time `json:"decided_at,omitempty"`
	Reason    string     `json:"reason,omitempty"`
	// UsedBy is the ID of the call that ran under the approval, once one
	// has: an approval runs one call.
	UsedBy string     `json:"used_by,omitempty"`
	UsedAt *time.Time `json:"used_at,omitempty"`
}

// Open reports whether a is still waiting at now.
func (a Approval) Open(now time.Time) bool {
	return a.Status == StatusPending && now.Before(a.ExpiresAt)
}

// Errors of the stores.
var (
	ErrNotFound = errors.New("no such approval")
	// ErrDecided: the approval is no longer pending (decided or expired).
	ErrDecided = errors.New("the approval is already decided")
	// ErrUsed: the approval has run its call.
	ErrUsed = errors.New("the approval has already run its call")
	// ErrNotApproved: Use of an approval that is not approved.
	ErrNotApproved = errors.New("the approval is not approved")
	ErrExpired     = errors.New("the approval has expired")
)

// Store keeps approvals. Every method that changes one does so only from
// the state it names, atomically: two replicas deciding, or two calls
// using, one approval cannot both succeed.
type Store interface {
	Create(ctx context.Context, a Approval) error
	Get(ctx context.Context, id string) (Approval, error)
	// Find returns the newest approval of the key named key for a call of
	// tool whose arguments hash to sha, that is pending, rejected, or
	// approved and not used, and not expired at now; ErrNotFound when
	// none is. A rejected one answers the same call sent again until it
	// expires: a person said no to exactly that call.
	Find(ctx context.Context, key, tool, sha string, now time.Time) (Approval, error)
	// Waiting counts the approvals of the key named key still pending and
	// not expired at now.
	Waiting(ctx context.Context, key string, now time.Time) (int, error)
	// Pending lists the approvals still pending, oldest first.
	Pending(ctx context.Context) ([]Approval, error)
	// Decide sets a pending approval, not yet expired at at, to status
	// (approved or rejected), by the key named by, with reason.
	Decide(ctx context.Context, id, status, by, reason string, at time.Time) (Approval, error)
	// Use marks an approved approval, not yet expired at at, as used by
	// the call callID.
	Use(ctx context.Context, id, callID string, at time.Time) (Approval, error)
	// Expire marks the pending approvals whose time is up at now as
	// expired, and returns them: each one to exactly one caller.
	Expire(ctx context.Context, now time.Time) ([]Approval, error)
	// Prune deletes the approvals no longer pending that ended before
	// before.
	Prune(ctx context.Context, before time.Time) error
}

// FileStore keeps approvals in memory and each in a file of its own in a
// folder, so that a restart loses none. It serves one process: replicas
// share approvals through PostgreSQL (pgstore.Approvals).
type FileStore struct {
	dir string
	mu  sync.Mutex
	m   map[string]Approval
}

// OpenFileStore reads the approvals kept in dir, which it creates (0700).
func OpenFileStore(dir string) (*FileStore, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("approvals folder: %w", err)
	}
	s := &FileStore{dir: dir, m: map[string]Approval{}}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("approvals folder: %w", err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("approvals folder: %w", err)
		}
		var a Approval
		if json.Unmarshal(data, &a) != nil || a.ID+".json" != e.Name() {
			continue // a file cut short by a crash: its call asks again
		}
		s.m[a.ID] = a
	}
	return s, nil
}

// save writes a to its file, whole or not at all (a rename), and with
// durable waits until the disk has it. Called with mu held. Only a use
// needs the wait: a creation or a decision lost in a crash is asked or
// decided again, but a use lost would let the approval run its call once
// more after a restart.
func (s *FileStore) save(a Approval, durable bool) error {
	data, err := json.Marshal(a)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(s.dir, ".tmp-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if err == nil && durable {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(s.dir, a.ID+".json"))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("approvals folder: %w", err)
	}
	return nil
}

func (s *FileStore) Create(_ context.Context, a Approval) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.save(a, false); err != nil {
		return err
	}
	s.m[a.ID] = a
	return nil
}

func (s *FileStore) Get(_ context.Context, id string) (Approval, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.m[id]
	if !ok {
		return Approval{}, ErrNotFound
	}
	return a, nil
}

func (s *FileStore) Find(_ context.Context, key, tool, sha string, now time.Time) (Approval, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var best Approval
	for _, a := range s.m {
		if a.Key != key || a.Tool != tool || a.ArgumentsSHA256 != sha || !now.Before(a.ExpiresAt) || a.UsedBy != "" {
			continue
		}
		if a.Status != StatusExpired && a.CreatedAt.After(best.CreatedAt) {
			best = a
		}
	}
	if best.ID == "" {
		return Approval{}, ErrNotFound
	}
	return best, nil
}

func (s *FileStore) Waiting(_ context.Context, key string, now time.Time) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, a := range s.m {
		if a.Key == key && a.Open(now) {
			n++
		}
	}
	return n, nil
}

func (s *FileStore) Pending(context.Context) ([]Approval, error) {
	s.mu.Lock()
	var out []Approval
	for _, a := range s.m {
		if a.Status == StatusPending {
			out = append(out, a)
		}
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out, nil
}

// change applies fn to the approval id under the lock and saves what it
// returns (durable: see save).
func (s *FileStore) change(id string, durable bool, fn func(a *Approval) error) (Approval, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.m[id]
	if !ok {
		return Approval{}, ErrNotFound
	}
	if err := fn(&a); err != nil {
		return a, err
	}
	if err := s.save(a, durable); err != nil {
		return Approval{}, err
	}
	s.m[id] = a
	return a, nil
}

func (s *FileStore) Decide(_ context.Context, id, status, by, reason string, at time.Time) (Approval, error) {
	return s.change(id, false, func(a *Approval) error { return Decided(a, status, by, reason, at) })
}

func (s *FileStore) Use(_ context.Context, id, callID string, at time.Time) (Approval, error) {
	return s.change(id, true, func(a *Approval) error { return Used(a, callID, at) })
}

func (s *FileStore) Expire(_ context.Context, now time.Time) ([]Approval, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Approval
	for id, a := range s.m {
		if a.Status != StatusPending || now.Before(a.ExpiresAt) {
			continue
		}
		a.Status = StatusExpired
		if err := s.save(a, false); err != nil {
			return out, err
		}
		s.m[id] = a
		out = append(out, a)
	}
	return out, nil
}

func (s *FileStore) Prune(_ context.Context, before time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, a := range s.m {
		if a.Status != StatusPending && a.ExpiresAt.Before(before) {
			if err := os.Remove(filepath.Join(s.dir, id+".json")); err != nil && !os.IsNotExist(err) {
				return err
			}
			delete(s.m, id)
		}
	}
	return nil
}

// Decided applies a decision to a, or says why a cannot take it at at
// (ErrDecided, ErrExpired): the one rule every Store follows.
func Decided(a *Approval, status, by, reason string, at time.Time) error {
	switch {
	case a.Status != StatusPending:
		return ErrDecided
	case !at.Before(a.ExpiresAt):
		return ErrExpired
	}
	a.Status, a.DecidedBy, a.Reason, a.DecidedAt = status, by, reason, &at
	return nil
}

// Used marks a as having run the call callID, or says why it cannot at at
// (ErrUsed, ErrNotApproved, ErrExpired): the one rule every Store follows.
func Used(a *Approval, callID string, at time.Time) error {
	switch {
	case a.UsedBy != "":
		return ErrUsed
	case a.Status != StatusApproved:
		return ErrNotApproved
	case !at.Before(a.ExpiresAt):
		return ErrExpired
	}
	a.UsedBy, a.UsedAt = callID, &at
	return nil
}
