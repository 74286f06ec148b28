package registry

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// recorder is an Observer that writes down what it is told.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, s)
}
func (r *recorder) CallStarted(tool string) { r.add("start " + tool) }
func (r *recorder) CallEnded(tool, status, code string, d time.Duration) {
	r.add(fmt.Sprintf("end %s %s %s %v", tool, status, code, d >= 0))
}
func (r *recorder) AuditFailed(stage string)       { r.add("audit " + stage) }
func (r *recorder) CallRefused(key, reason string) { r.add("refused " + key + " " + reason) }

func TestObserverSeesEveryCall(t *testing.T) {
	rec := &recorder{}
	al := &memAudit{}
	r := New(Options{Audit: al, Observer: rec})
	if err := r.Register(&fakeTool{name: "ok", schema: `{"type":"object"}`}); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(&fakeTool{name: "bad", schema: `{"type":"object","properties":{"n":{"type":"integer"}}}`}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r.Invoke(ctx, "ok", nil, Meta{})
	r.Invoke(ctx, "bad", []byte(`{"n":"x"}`), Meta{})
	// A name the model invents is counted under one label.
	r.Invoke(ctx, "made_up_by_a_model", nil, Meta{})
	al.finishErr = errors.New("disk full")
	r.Invoke(ctx, "ok", nil, Meta{})
	al.finishErr, al.startErr = nil, errors.New("read-only")
	r.Invoke(ctx, "ok", nil, Meta{})

	want := []string{
		"start ok", "end ok success  true",
		"start bad", "end bad error invalid_arguments true",
		"start _unknown", "end _unknown error unknown_tool true",
		"start ok", "audit finish", "end ok error audit_failed true",
		"start ok", "audit start", "end ok error audit_unavailable true",
	}
	if fmt.Sprint(rec.events) != fmt.Sprint(want) {
		t.Errorf("observer was told\n%q\nwant\n%q", rec.events, want)
	}
}
