package approval

import (
	"context"
	"errors"
	"time"

	"github.com/countbot/toolsvc/internal/audit"
)

// Errors of Decide and Get that the doors answer with their own status.
var (
	// ErrNotApprover: the key may not decide approvals (403).
	ErrNotApprover = errors.New("this key may not decide approvals: TOOLSVC_APPROVER_KEYS names the keys that may, and admin keys may")
	// ErrOwnCall: the key asked for the call and may not approve its own
	// (403).
	ErrOwnCall = errors.New("this key made the call and may not decide its own approval (the policy's self_approve allows it)")
	// ErrDecision: a decision other than approve or reject (400).
	ErrDecision = errors.New(`the decision must be "approve" or "reject"`)
)

// Approver reports whether the key named key may decide approvals.
func (s *Service) Approver(key string) bool {
	return s.o.Approver != nil && s.o.Approver(key)
}

// Pending lists the approvals waiting for a decision, oldest first, for
// an approver (ErrNotApprover otherwise).
func (s *Service) Pending(ctx context.Context, viewer string) ([]Approval, error) {
	if !s.Approver(viewer) {
		return nil, ErrNotApprover
	}
	all, err := s.o.Store.Pending(ctx)
	if err != nil {
		return nil, err
	}
	now := s.o.Now()
	out := all[:0]
	for _, a := range all {
		if a.Open(now) {
			out = append(out, a)
		}
	}
	return out, nil
}

// Get returns the approval id to the key that asked for it or to an
// approver; ErrNotFound to anyone else, as for an approval that does not
// exist.
func (s *Service) Get(ctx context.Context, viewer, id string) (Approval, error) {
	a, err := s.o.Store.Get(ctx, id)
	if err != nil {
		return Approval{}, err
	}
	if a.Key != viewer && !s.Approver(viewer) {
		return Approval{}, ErrNotFound
	}
	if a.Status == StatusPending && !s.o.Now().Before(a.ExpiresAt) {
		a.Status = StatusExpired
	}
	return a, nil
}

// Decide approves or rejects the approval id ("approve" or "reject") as
// the key named by, with reason. The decision wakes the callers waiting
// on it here (Wait); callers on other replicas read it from the store.
func (s *Service) Decide(ctx context.Context, by, id, decision, reason string) (Approval, error) {
	if !s.Approver(by) {
		return Approval{}, ErrNotApprover
	}
	status := map[string]string{"approve": StatusApproved, "reject": StatusRejected}[decision]
	if status == "" {
		return Approval{}, ErrDecision
	}
	a, err := s.o.Store.Get(ctx, id)
	if err != nil {
		return Approval{}, err
	}
	if a.Key == by && !s.selfApprove(by) {
		return Approval{}, ErrOwnCall
	}
	a, err = s.o.Store.Decide(ctx, id, status, by, s.o.Redact(reason), s.o.Now().UTC())
	if err != nil {
		return a, err
	}
	s.o.Log.Info().Str("approval_id", a.ID).Str("tool", a.Tool).Str("key", a.Key).Str("decided_by", by).Str("decision", a.Status).
		Msg("approval: decided")
	if s.o.Record != nil {
		rec := record(a, "decided")
		s.o.Record(a, *rec)
	}
	s.wake(id)
	return a, nil
}

// Wait waits until the approval id is no longer pending (decided or
// expired) or ctx ends, and returns it as it then is.
func (s *Service) Wait(ctx context.Context, id string) (Approval, error) {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	s.waiters[id] = append(s.waiters[id], ch)
	s.mu.Unlock()
	defer s.unwait(id, ch)
	tick := time.NewTicker(s.o.Poll)
	defer tick.Stop()
	for {
		a, err := s.o.Store.Get(ctx, id)
		if err != nil {
			return a, err
		}
		if a.Status != StatusPending {
			return a, nil
		}
		if !s.o.Now().Before(a.ExpiresAt) {
			a.Status = StatusExpired
			return a, nil
		}
		expiry := time.NewTimer(time.Until(a.ExpiresAt))
		select {
		case <-ctx.Done():
			expiry.Stop()
			return a, ctx.Err()
		case <-ch:
		case <-tick.C:
		case <-expiry.C:
		}
		expiry.Stop()
	}
}

func (s *Service) wake(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ch := range s.waiters[id] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (s *Service) unwait(id string, ch chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	list := s.waiters[id]
	for i, c := range list {
		if c == ch {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(s.waiters, id)
	} else {
		s.waiters[id] = list
	}
}

// Sweep marks the approvals whose time ran out without a decision as
// expired, records each (an audit record with the outcome "expired"), and
// deletes the ones that ended more than keep ago. Run it now and then
// (Start).
func (s *Service) Sweep(ctx context.Context, keep time.Duration) error {
	now := s.o.Now()
	expired, err := s.o.Store.Expire(ctx, now)
	for _, a := range expired {
		s.o.Log.Info().Str("approval_id", a.ID).Str("tool", a.Tool).Str("key", a.Key).Msg("approval: expired without a decision")
		if s.o.Record != nil {
			s.o.Record(a, audit.Approval{ID: a.ID, Outcome: "expired", ArgumentsSHA256: a.ArgumentsSHA256, ExpiresAt: &a.ExpiresAt})
		}
		s.wake(a.ID)
	}
	if err != nil {
		return err
	}
	return s.o.Store.Prune(ctx, now.Add(-keep))
}

// Start sweeps now and every interval, in the background, until ctx ends.
func (s *Service) Start(ctx context.Context, every, keep time.Duration) {
	go s.run(ctx, every, keep)
}

func (s *Service) run(ctx context.Context, every, keep time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if err := s.Sweep(ctx, keep); err != nil && ctx.Err() == nil {
			s.o.Log.Error().Err(err).Msg("approval: sweeping expired approvals failed")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// selfApprove reports whether the key named key may decide its own calls.
func (s *Service) selfApprove(key string) bool {
	if s.o.Rules == nil {
		return false
	}
	_, self := s.o.Rules(key)
	return self
}
