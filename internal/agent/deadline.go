package agent

import (
	"context"
	"sync"
	"time"
)

// taskDeadline is a task's context: its parent's values and cancellation,
// and TOOLSVC_AGENT_TIMEOUT as a deadline that stands still while the
// task waits for a person to decide on a held call. The time a person
// takes is not the task's work: a task given ten minutes that waits an
// hour for an approval still has what was left of its ten minutes when
// the decision comes. Apart from the pause it behaves as
// context.WithTimeout does, so that what runs under it (the model
// client's retries, a tool call's own bound, the registry's timeout
// code) sees the deadline it has now and DeadlineExceeded when it is
// reached.
type taskDeadline struct {
	parent context.Context
	done   chan struct{}

	mu       sync.Mutex
	err      error
	deadline time.Time     // while running
	left     time.Duration // while paused
	paused   bool
	timer    *time.Timer
	unhook   func() bool // stops following the parent
}

// withTaskDeadline returns a context like context.WithTimeout(parent, d)
// whose deadline can be paused, and its cancel function.
func withTaskDeadline(parent context.Context, d time.Duration) (*taskDeadline, context.CancelFunc) {
	c := &taskDeadline{parent: parent, done: make(chan struct{}), deadline: time.Now().Add(d)}
	// Held while both callbacks are set up, which take it too: neither
	// can run before the other is in place.
	c.mu.Lock()
	c.timer = time.AfterFunc(d, func() { c.end(context.DeadlineExceeded) })
	c.unhook = context.AfterFunc(parent, func() { c.end(parent.Err()) })
	c.mu.Unlock()
	return c, func() { c.end(context.Canceled) }
}

func (c *taskDeadline) end(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	c.err = err
	c.timer.Stop()
	c.unhook()
	close(c.done)
}

// pause stops the clock, unless the deadline has passed already (its
// timer has fired: the task is ending).
func (c *taskDeadline) pause() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.paused || c.err != nil || !c.timer.Stop() {
		return
	}
	c.left, c.paused = time.Until(c.deadline), true
}

// resume starts the clock again with the time that was left at pause.
func (c *taskDeadline) resume() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.paused || c.err != nil {
		return
	}
	c.paused = false
	c.deadline = time.Now().Add(c.left)
	c.timer = time.AfterFunc(c.left, func() { c.end(context.DeadlineExceeded) })
}

// Deadline is the task's deadline as it stands now; none while paused.
func (c *taskDeadline) Deadline() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.paused {
		return time.Time{}, false
	}
	return c.deadline, true
}

func (c *taskDeadline) Done() <-chan struct{} { return c.done }

func (c *taskDeadline) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *taskDeadline) Value(key any) any { return c.parent.Value(key) }

var _ context.Context = (*taskDeadline)(nil)
