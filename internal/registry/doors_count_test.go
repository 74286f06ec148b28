package registry_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/audit"
	svchttp "github.com/countbot/toolsvc/internal/http"
	"github.com/countbot/toolsvc/internal/registry"
)

// echo returns its arguments.
type echo struct{}

func (echo) Name() string        { return "echo" }
func (echo) Description() string { return "returns its arguments" }
func (echo) Parameters() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)
}
func (echo) Execute(_ context.Context, args json.RawMessage) (string, error) {
	return string(args), nil
}

// TestDoorsLookUpOnceReadOnce: a call through any door looks its tool up
// once and reads its arguments once, in the registry, for the checks and
// the audit record alike (the audit package's tests show the log reads
// what it is handed no more). The MCP door's own reading of the message
// around the arguments is one pass too (readEnvelope), not counted here;
// the tool's decoding of its typed arguments is the tool's.
func TestDoorsLookUpOnceReadOnce(t *testing.T) {
	log, err := audit.New(audit.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	reg := registry.New(registry.Options{Audit: log})
	if err := reg.Register(echo{}); err != nil {
		t.Fatal(err)
	}
	var lookups, reads atomic.Int64
	registry.CountWith(reg, func(string) { lookups.Add(1) }, func() { reads.Add(1) })
	h := svchttp.NewHandler(svchttp.Options{Registry: reg, Log: zerolog.Nop()})

	rest := func(body string, header ...string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/tools/echo/invoke", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(header); i += 2 {
			r.Header.Set(header[i], header[i+1])
		}
		return r
	}
	mcp := func(params string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":`+params+`}`))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		r.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		return r
	}
	cases := []struct {
		name           string
		req            *http.Request
		lookups, reads int64
	}{
		{"REST", rest(`{"text":"hi"}`), 1, 1},
		{"REST, white space and escapes", rest("{ \"text\" : \"a\\nb \\\"q\\\" \\u00e9\" }\n"), 1, 1},
		{"REST, empty body", rest(``), 1, 1},
		{"REST, streamed", rest(`{"text":"hi"}`, "Accept", "text/event-stream"), 1, 1},
		{"REST, unknown tool", httptest.NewRequest(http.MethodPost, "/tools/nope/invoke", strings.NewReader(`{}`)), 1, 0},
		{"MCP", mcp(`{"name":"echo","arguments":{"text":"hi"}}`), 1, 1},
		// _meta sends the call through the SDK's handler, which decodes
		// the message its own way; the registry still reads once.
		{"MCP through the SDK", mcp(`{"name":"echo","arguments":{"text":"hi"},"_meta":{"progressToken":1}}`), 1, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lookups.Store(0)
			reads.Store(0)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, tc.req)
			if tc.reads > 0 && (rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "success")) {
				t.Fatalf("%d %s", rec.Code, rec.Body)
			}
			if l, r := lookups.Load(), reads.Load(); l != tc.lookups || r != tc.reads {
				t.Errorf("%d look-ups and %d readings of the arguments, want %d and %d", l, r, tc.lookups, tc.reads)
			}
		})
	}
	// The counts see a second reading where there is one: arguments that
	// are not JSON are read again by the checks, to say what is wrong.
	reads.Store(0)
	h.ServeHTTP(httptest.NewRecorder(), rest(`{"text":`))
	if r := reads.Load(); r < 2 {
		t.Errorf("malformed arguments: %d readings counted, want 2 or more", r)
	}
}
