package registry

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/countbot/toolsvc/internal/redact"
)

// TestProgressRedactedAcrossEvents sends a secret cut into pieces across
// progress events, interleaved with another event: no event carries any
// piece of it, and the text that arrives is the text sent, redacted.
func TestProgressRedactedAcrossEvents(t *testing.T) {
	const secret = "sk-0123456789-secret"
	red := redact.New(secret)
	pieces := []string{"a\rb\nkey=sk-01", "23456789", "-secret done; and sk-0", "1 is not one\n", "sk-0123"}
	tool := &fakeTool{name: "talk", schema: `{"type":"object"}`, run: func(ctx context.Context, _ json.RawMessage) (string, error) {
		for _, p := range pieces {
			Progress(ctx, "output", p)
			Progress(ctx, "status", "working")
		}
		return "done " + secret, nil
	}}
	r := New(Options{Redact: red.String, RedactProgress: red.Progress})
	if err := r.Register(tool); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []string
	byName := map[string]*strings.Builder{"output": {}, "status": {}}
	res := r.Invoke(WithProgress(context.Background(), func(ev, data string) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, data)
		byName[ev].WriteString(data)
	}), "talk", nil, Meta{})
	for _, d := range got {
		// The pieces of the one real occurrence; the "sk-0123" the output
		// ends with is not a secret and arrives as it is.
		for _, part := range []string{"sk-01234", "23456789", "-secret"} {
			if strings.Contains(d, part) {
				t.Errorf("event %q carries %q of the secret", d, part)
			}
		}
	}
	want := red.String(strings.Join(pieces, ""))
	if byName["output"].String() != want {
		t.Errorf("output events joined:\n%q\nwant\n%q", byName["output"].String(), want)
	}
	if byName["status"].String() != strings.Repeat("working", len(pieces)) {
		t.Errorf("status events: %q", byName["status"].String())
	}
	if res.Result != "done [REDACTED]" {
		t.Errorf("result %q", res.Result)
	}
	// Nothing reaches the listener once the call is over.
	over, sent := make(chan struct{}), make(chan struct{})
	tool.run = func(ctx context.Context, _ json.RawMessage) (string, error) {
		go func() {
			<-over
			Progress(ctx, "output", "late")
			close(sent)
		}()
		return "", nil
	}
	got = nil
	r.Invoke(WithProgress(context.Background(), func(ev, data string) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, data)
	}), "talk", nil, Meta{})
	close(over)
	<-sent
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 0 {
		t.Errorf("events after the call ended: %q", got)
	}
}
