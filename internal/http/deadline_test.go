package http

import (
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/registry"
)

// sleepTool returns after a while, writing nothing meanwhile.
type sleepTool time.Duration

func (sleepTool) Name() string                { return "sleep" }
func (sleepTool) Description() string         { return "returns after a while" }
func (sleepTool) Parameters() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (s sleepTool) Execute(ctx context.Context, _ json.RawMessage) (string, error) {
	select {
	case <-time.After(time.Duration(s)):
		return "woke up", nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// TestCallOutlastsWriteTimeout: a call may run past the server's
// WriteTimeout, over HTTP/1 and HTTP/2 alike; its result is written with
// a deadline of its own.
func TestCallOutlastsWriteTimeout(t *testing.T) {
	const writeTimeout = 100 * time.Millisecond
	for _, h2 := range []bool{false, true} {
		reg := registry.New(registry.Options{})
		if err := reg.Register(sleepTool(3 * writeTimeout)); err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewUnstartedServer(NewHandler(Options{Registry: reg, Log: zerolog.Nop()}))
		srv.Config.WriteTimeout = writeTimeout
		if h2 {
			srv.EnableHTTP2 = true
			srv.StartTLS()
		} else {
			srv.Start()
		}
		client := srv.Client()
		for range 2 { // the second call on the same connection
			resp, err := client.Post(srv.URL+"/tools/sleep/invoke", "application/json", strings.NewReader(`{}`))
			if err != nil {
				t.Fatalf("http2 %v: %v", h2, err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 || !strings.Contains(string(body), "woke up") || (resp.ProtoMajor == 2) != h2 {
				t.Errorf("http2 %v: %s %d %s %v", h2, resp.Proto, resp.StatusCode, body, err)
			}
		}
		srv.Close()
	}
}
