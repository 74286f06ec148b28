package agent

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Event types of a task's progress.
const (
	EventTurn     = "turn"      // the model replied (Turn is its number)
	EventToolCall = "tool_call" // a tool call ended (Call)
	EventEnd      = "end"       // the task ended (Status, Answer, Error)
	// EventText: a piece of the model's reply as it arrives (Delta; Turn
	// is the reply's number), with a streamed model only (Client with
	// Stream). Its turn event comes once the reply is whole.
	EventText = "text"
	// EventWaitingApproval: a tool call was held for a person's approval
	// and the task waits for the decision (Approval: its ID, tool,
	// summary and expiry).
	EventWaitingApproval = "waiting_approval"
	// EventResumed: the wait ended and the task runs again (Approval:
	// approved, rejected or expired, by whom and why); the call's
	// tool_call event follows.
	EventResumed = "resumed"
)

// maxEventChars bounds the answer an end event carries; the whole answer
// is at GET /agents/{id}.
const maxEventChars = 4000

// subQueue is how many events wait for a slow follower before later ones
// are dropped (and counted). A task never waits for a follower.
const subQueue = 64

// Event is one step of a task's progress.
type Event struct {
	Type   string      `json:"type"`
	Agent  string      `json:"agent"`
	Time   time.Time   `json:"time"`
	Turn   int         `json:"turn,omitempty"`
	Call   *CallRecord `json:"call,omitempty"`
	Status string      `json:"status,omitempty"`
	Answer string      `json:"answer,omitempty"`
	Error  string      `json:"error,omitempty"`
	// Delta is the text of a text event.
	Delta string `json:"text,omitempty"`
	// Approval is the approval of a waiting_approval or resumed event.
	Approval *ApprovalWait `json:"approval,omitempty"`
}

// Text is the event in one line, for progress streams read by people and
// models.
func (e Event) Text() string {
	switch e.Type {
	case EventTurn:
		return fmt.Sprintf("%s: model reply %d", e.Agent, e.Turn)
	case EventToolCall:
		s := fmt.Sprintf("%s: %s %s → %s", e.Agent, e.Call.Name, e.Call.Arguments, e.Call.Status)
		if e.Call.ErrorCode != "" {
			s += " (" + e.Call.ErrorCode + ")"
		}
		return s
	case EventText:
		return fmt.Sprintf("%s: model reply %d: %s", e.Agent, e.Turn, e.Delta)
	case EventWaitingApproval, EventResumed:
		if e.Approval == nil {
			break
		}
		return approvalText(e)
	case EventEnd:
		s := fmt.Sprintf("%s: %s after %d turns", e.Agent, e.Status, e.Turn)
		if e.Error != "" {
			s += ": " + e.Error
		}
		return s
	}
	return e.Agent + ": " + e.Type
}

// approvalText is a waiting_approval or resumed event in one line.
func approvalText(e Event) string {
	a := e.Approval
	if e.Type == EventWaitingApproval {
		return fmt.Sprintf("%s: waits for a person's approval %s of %s: %s", e.Agent, a.ID, a.Tool, a.Summary)
	}
	s := fmt.Sprintf("%s: approval %s of %s ", e.Agent, a.ID, a.Tool)
	switch {
	case a.Status == "":
		s += "not known (" + a.Error + ")"
	case a.DecidedBy != "":
		s += a.Status + " by " + a.DecidedBy
	default:
		s += a.Status
	}
	if a.Reason != "" {
		s += ": " + a.Reason
	}
	return s + "; running again"
}

// Subscription follows one task's events.
type Subscription struct {
	ch      chan Event
	done    <-chan struct{}
	dropped atomic.Int64
	once    sync.Once
	stop    func()
}

// Events delivers the task's events as they happen; it is never closed.
// The end event is delivered unless the queue was full; Done says the task
// has ended in any case.
func (s *Subscription) Events() <-chan Event { return s.ch }

// Done is closed when the task has ended.
func (s *Subscription) Done() <-chan struct{} { return s.done }

// Dropped returns, and resets, how many events were dropped because the
// follower read too slowly.
func (s *Subscription) Dropped() int64 { return s.dropped.Swap(0) }

// Close stops the subscription.
func (s *Subscription) Close() { s.once.Do(s.stop) }

// Subscribe follows a task. For a task that has ended, Done is closed at
// once and no event comes: Get has the final state. Another replica's
// running task is followed through the shared store until ctx is done or
// Close: its events so far come first.
func (m *Manager) Subscribe(ctx context.Context, id string) (*Subscription, bool, error) {
	s, ok := m.subscribeLocal(id)
	if ok || m.shared == nil {
		return s, ok, nil
	}
	t, ok, err := m.Find(ctx, id)
	if err != nil || !ok {
		return nil, false, err
	}
	done := make(chan struct{})
	s = &Subscription{ch: make(chan Event, subQueue), done: done}
	if !Active(t.Status) {
		close(done)
		s.stop = func() {}
		return s, true, nil
	}
	fctx, stop := context.WithCancel(ctx)
	s.stop = stop
	go m.followRemote(fctx, id, s, done)
	return s, true, nil
}

func (m *Manager) subscribeLocal(id string) (*Subscription, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.tasks[id]
	if !ok {
		return nil, false
	}
	s := &Subscription{ch: make(chan Event, subQueue), done: e.done}
	if e.cancel == nil { // ended (or loaded from disk)
		s.stop = func() {}
		return s, true
	}
	if e.subs == nil {
		e.subs = map[*Subscription]struct{}{}
	}
	e.subs[s] = struct{}{}
	s.stop = func() {
		m.mu.Lock()
		delete(e.subs, s)
		m.mu.Unlock()
	}
	return s, true
}

// publishLocked hands ev to the task's hook and followers without waiting
// for any of them. m.mu is held.
func (m *Manager) publishLocked(e *entry, ev Event) {
	e.events++
	if m.shared != nil {
		e.pending = append(e.pending, NumberedEvent{e.events, ev})
	}
	if e.hook != nil {
		e.hook(ev)
	}
	for s := range e.subs {
		select {
		case s.ch <- ev:
		default:
			s.dropped.Add(1)
		}
	}
}
