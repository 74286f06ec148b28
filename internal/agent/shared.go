package agent

import (
	"context"
	"time"
)

// followPoll is how often a follower of another replica's task, or a
// waiter for it, asks the shared store for news.
const followPoll = 200 * time.Millisecond

// leaseLoop runs while a shared store is in use: every third of the lease
// it renews this replica's running tasks, stops those it lost or whose
// cancellation another replica asked for, hands the store the final
// states it could not take before, and marks interrupted the tasks of
// replicas that stopped renewing theirs. Cancellations asked through
// LISTEN/NOTIFY are acted on at once. At shutdown it waits for the tasks
// to end and hands their final states over once more.
func (m *Manager) leaseLoop() {
	defer close(m.loop)
	tick := time.NewTicker(m.opts.Lease / 3)
	defer tick.Stop()
	m.tend()
	for {
		select {
		case id := <-m.shared.Cancellations():
			m.cancelLocal(id, errCanceledByRequest)
		case <-tick.C:
			m.tend()
		case <-m.base.Done():
			m.wg.Wait()
			m.flush()
			return
		}
	}
}

// tend is one round of the lease loop.
func (m *Manager) tend() {
	m.flush()
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	var running []string
	m.mu.Lock()
	for id, e := range m.tasks {
		if e.cancel != nil && e.stored {
			running = append(running, id)
		}
	}
	m.mu.Unlock()
	if len(running) > 0 {
		lost, canceled, err := m.shared.Renew(ctx, running)
		if err != nil {
			m.opts.Log.Warn().Err(err).Msg("agents: cannot renew this replica's tasks in the database")
			return
		}
		for _, id := range lost {
			m.cancelLocal(id, errLeaseLost)
		}
		for _, id := range canceled {
			m.cancelLocal(id, errCanceledByRequest)
		}
	}
	expired, err := m.shared.Expire(ctx, m.opts.Lease)
	if err != nil {
		m.opts.Log.Warn().Err(err).Msg("agents: cannot look for tasks of replicas that stopped")
		return
	}
	for _, id := range expired {
		m.opts.Log.Warn().Str("agent", id).Str("replica", m.opts.Replica).Dur("lease", m.opts.Lease).
			Msg("agents: a task's replica stopped renewing it; marked interrupted")
	}
}

// flush hands the store the final states it could not take before.
func (m *Manager) flush() {
	m.mu.Lock()
	var todo []*entry
	for e := range m.unsynced {
		todo = append(todo, e)
	}
	m.mu.Unlock()
	for _, e := range todo {
		if err := m.save(e); err != nil {
			return // the store is still away; next round
		}
		m.mu.Lock()
		delete(m.unsynced, e)
		m.mu.Unlock()
	}
}

// cancelLocal stops this replica's task id, if it runs here.
func (m *Manager) cancelLocal(id string, cause error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.tasks[id]; ok && e.cancel != nil {
		e.cancel(cause)
	}
}

// waitRemote waits for another replica's task to end, asking the store,
// until ctx is done; it returns the task as it last saw it.
func (m *Manager) waitRemote(ctx context.Context, id string) (Task, bool) {
	tick := time.NewTicker(followPoll)
	defer tick.Stop()
	var last Task
	seen := false
	for {
		sctx, cancel := context.WithTimeout(ctx, storeTimeout)
		t, ok, err := m.shared.Get(sctx, id)
		cancel()
		switch {
		case err == nil && !ok:
			return last, seen
		case err == nil:
			last, seen = t, true
			if !Active(t.Status) {
				return t, true
			}
		}
		select {
		case <-ctx.Done():
			return last, seen
		case <-tick.C:
		}
	}
}

// followRemote feeds s with another replica's task's events, from the
// first, as the store gets them, and closes done once the task has ended.
func (m *Manager) followRemote(ctx context.Context, id string, s *Subscription, done chan struct{}) {
	defer close(done)
	tick := time.NewTicker(followPoll)
	defer tick.Stop()
	n := 0
	for rounds := 0; ; rounds++ {
		sctx, cancel := context.WithTimeout(ctx, storeTimeout)
		evs, last, err := m.shared.EventsAfter(sctx, id, n)
		cancel()
		if err == nil {
			n = last
			for _, ev := range evs {
				select {
				case s.ch <- ev:
				default:
					s.dropped.Add(1)
				}
				if ev.Type == EventEnd {
					return
				}
			}
			// A task ended without an end event (it was removed): every
			// few rounds, its state says whether to go on.
			if len(evs) == 0 && rounds%10 == 9 {
				if t, ok, err := m.Find(ctx, id); err == nil && (!ok || !Active(t.Status)) {
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
