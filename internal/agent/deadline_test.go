package agent

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestTaskDeadlinePauses: the deadline stands still while paused (no
// Deadline then), goes on with the time that was left, and ends the
// context with DeadlineExceeded as context.WithTimeout does; the parent's
// cancellation, with its cause, reaches it and what is derived from it.
func TestTaskDeadlinePauses(t *testing.T) {
	const d = 200 * time.Millisecond
	ctx, cancel := withTaskDeadline(context.Background(), d)
	defer cancel()
	first, ok := ctx.Deadline()
	if !ok || time.Until(first) > d {
		t.Fatalf("deadline %v %v", first, ok)
	}
	ctx.pause()
	if _, ok := ctx.Deadline(); ok {
		t.Error("a paused deadline is reported")
	}
	time.Sleep(2 * d)
	if ctx.Err() != nil {
		t.Fatalf("ended while paused: %v", ctx.Err())
	}
	ctx.resume()
	if dl, ok := ctx.Deadline(); !ok || !dl.After(first.Add(d)) {
		t.Errorf("the deadline after the pause: %v, want after %v", dl, first.Add(d))
	}
	child, stop := context.WithCancel(ctx)
	defer stop()
	select {
	case <-child.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the deadline never came")
	}
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) || !errors.Is(child.Err(), context.DeadlineExceeded) {
		t.Errorf("errors: %v, child %v", ctx.Err(), child.Err())
	}
	// Paused or resumed once ended: nothing changes.
	ctx.pause()
	ctx.resume()
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Errorf("after the end: %v", ctx.Err())
	}

	cause := errors.New("canceled by request")
	parent, cancelParent := context.WithCancelCause(context.Background())
	ctx2, cancel2 := withTaskDeadline(parent, time.Hour)
	defer cancel2()
	ctx2.pause()
	cancelParent(cause)
	select {
	case <-ctx2.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the parent's cancellation did not reach a paused task")
	}
	if !errors.Is(ctx2.Err(), context.Canceled) || !errors.Is(context.Cause(ctx2), cause) {
		t.Errorf("err %v, cause %v", ctx2.Err(), context.Cause(ctx2))
	}
}
