package http

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/toolerr"
)

type blockTool struct {
	started chan struct{}
	release chan struct{}
}

func (b *blockTool) Name() string                { return "block" }
func (b *blockTool) Description() string         { return "blocks until released" }
func (b *blockTool) Parameters() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (b *blockTool) Execute(ctx context.Context, _ json.RawMessage) (string, error) {
	registry.Progress(ctx, "output", "line one\nline two")
	b.started <- struct{}{}
	select {
	case <-b.release:
		return "released", nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func newTestServer(t *testing.T, opts Options) (*httptest.Server, *blockTool) {
	t.Helper()
	bt := &blockTool{started: make(chan struct{}, 8), release: make(chan struct{})}
	reg := registry.New(registry.Options{})
	if err := reg.Register(bt); err != nil {
		t.Fatal(err)
	}
	opts.Registry = reg
	opts.Log = zerolog.Nop()
	srv := httptest.NewServer(NewHandler(opts))
	t.Cleanup(srv.Close)
	return srv, bt
}

func TestPanicInHandlerIs500WithoutDetails(t *testing.T) {
	srv, _ := newTestServer(t, Options{Routes: func(r chi.Router) {
		r.Get("/boom", func(http.ResponseWriter, *http.Request) { panic("secret internal detail") })
	}})
	resp, err := http.Get(srv.URL + "/boom")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 500 || strings.Contains(string(body), "secret") || !strings.Contains(string(body), `"internal_error"`) {
		t.Errorf("%d %s", resp.StatusCode, body)
	}
	// The server keeps serving.
	if resp, err := http.Get(srv.URL + "/healthz"); err != nil || resp.StatusCode != 200 {
		t.Errorf("after a panic: %v %v", resp, err)
	}
}

func TestOverloadIs503(t *testing.T) {
	srv, bt := newTestServer(t, Options{MaxConcurrent: 1})
	done := make(chan int)
	go func() {
		resp, err := http.Post(srv.URL+"/tools/block/invoke", "application/json", nil)
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	<-bt.started
	resp, err := http.Post(srv.URL+"/tools/block/invoke", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(string(body), `"overloaded"`) || resp.Header.Get("Retry-After") == "" {
		t.Errorf("second call: %d %s", resp.StatusCode, body)
	}
	close(bt.release)
	if code := <-done; code != 200 {
		t.Errorf("first call: %d", code)
	}
}

func TestStoppingCancelsAndRefuses(t *testing.T) {
	stopping, stop := context.WithCancel(context.Background())
	srv, bt := newTestServer(t, Options{Stopping: stopping})
	res := make(chan registry.Result)
	go func() {
		resp, err := http.Post(srv.URL+"/tools/block/invoke", "application/json", nil)
		var r registry.Result
		if err == nil {
			json.NewDecoder(resp.Body).Decode(&r)
			resp.Body.Close()
		}
		res <- r
	}()
	<-bt.started
	stop()
	if r := <-res; r.Error == nil || r.Error.Code != toolerr.Canceled {
		t.Errorf("running call after stop: %+v", r)
	}
	resp, _ := http.Post(srv.URL+"/tools/block/invoke", "application/json", nil)
	if resp.StatusCode != 503 {
		t.Errorf("new call while stopping: %d", resp.StatusCode)
	}
	resp, _ = http.Get(srv.URL + "/readyz")
	if resp.StatusCode != 503 {
		t.Errorf("readyz while stopping: %d", resp.StatusCode)
	}
}

func TestEventStream(t *testing.T) {
	srv, bt := newTestServer(t, Options{})
	close(bt.release)
	go func() { <-bt.started }()
	req, _ := http.NewRequest("POST", srv.URL+"/tools/block/invoke", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	type event struct{ name, data string }
	var events []event
	var cur event
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			if cur.data != "" {
				cur.data += "\n"
			}
			cur.data += strings.TrimPrefix(line, "data: ")
		case line == "":
			events = append(events, cur)
			cur = event{}
		}
	}
	if len(events) != 2 || events[0].name != "output" || events[0].data != `{"text":"line one\nline two"}` || events[1].name != "result" {
		t.Fatalf("events %+v", events)
	}
	var r registry.Result
	if err := json.Unmarshal([]byte(events[1].data), &r); err != nil || r.Status != "success" || r.Result != "released" {
		t.Errorf("result event: %v %+v", err, r)
	}
}
