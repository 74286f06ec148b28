package agent

import (
	"context"
	"errors"
	"time"
)

// ErrUnavailable wraps the error of a store that cannot be reached (the
// database is down): the call may succeed later.
var ErrUnavailable = errors.New("the task store is unreachable")

// ErrLost is returned by a shared store's Save when the task is no longer
// this replica's to write: another replica marked it interrupted after
// this one stopped renewing its lease.
var ErrLost = errors.New("the task was taken over by another replica")

// TaskStore keeps sub-agent tasks and their events. FileTaskStore keeps
// them in the data folder for one process; a SharedStore (PostgreSQL)
// keeps them for several replicas.
type TaskStore interface {
	// Load returns the tasks this process answers for from memory at
	// start, those it left running marked interrupted. A shared store
	// returns none: its tasks are asked for when needed.
	Load(ctx context.Context) ([]Task, error)
	// Save records the task as it is now, creating it the first time,
	// and appends evs to its events, at once: a follower that reads an
	// event finds the state it leads to. An event whose number the task
	// has already is skipped (a retry after a lost reply).
	Save(ctx context.Context, t Task, evs []NumberedEvent) error
}

// NumberedEvent is a task's event with its number, from 1.
type NumberedEvent struct {
	N     int
	Event Event
}

// SharedStore is a TaskStore that several replicas use at once.
type SharedStore interface {
	TaskStore
	// Get returns any replica's task.
	Get(ctx context.Context, id string) (Task, bool, error)
	// List returns every task, newest first.
	List(ctx context.Context) ([]Summary, error)
	// EventsAfter returns the task's events numbered above n, in order,
	// with the number of the last.
	EventsAfter(ctx context.Context, id string, n int) ([]Event, int, error)
	// RequestCancel asks the replica running the task to cancel it; it
	// reports false when the task is not running.
	RequestCancel(ctx context.Context, id string) (bool, error)
	// Renew extends the lease of this replica's running tasks ids and
	// returns those it no longer holds (lost) and those whose
	// cancellation was asked for.
	Renew(ctx context.Context, ids []string) (lost, cancel []string, err error)
	// Expire marks interrupted, once, every running task whose lease ran
	// out, and returns their IDs.
	Expire(ctx context.Context, lease time.Duration) ([]string, error)
	// Cancellations delivers the IDs of tasks whose cancellation any
	// replica asked for, as they are asked (LISTEN/NOTIFY).
	Cancellations() <-chan string
	// Ping reports whether the store can be reached.
	Ping(ctx context.Context) error
}
