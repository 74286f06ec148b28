package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/toolerr"
)

// sayTool returns its "text" argument, or fails with it when "fail" is set.
type sayTool struct{}

func (sayTool) Name() string        { return "say" }
func (sayTool) Description() string { return "says its text" }
func (sayTool) Parameters() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"},"fail":{"type":"boolean"}}}`)
}
func (sayTool) Execute(_ context.Context, args json.RawMessage) (string, error) {
	var a struct {
		Text string `json:"text"`
		Fail bool   `json:"fail"`
	}
	if err := json.Unmarshal(args, &a); err != nil {
		return "", err
	}
	if a.Fail {
		return "", toolerr.Errorf(toolerr.ToolError, "%s", a.Text)
	}
	return a.Text, nil
}

// countingHandler counts the requests it hands on.
type countingHandler struct {
	h http.Handler
	n int
}

func (c *countingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.n++
	c.h.ServeHTTP(w, r)
}

func testHandlers(t *testing.T) (fast, viaSDK *Handler, sdkCalls *countingHandler) {
	t.Helper()
	when := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	reg := registry.New(registry.Options{NewID: func() string { return "call-1" }, Now: func() time.Time { return when }})
	if err := reg.Register(sayTool{}); err != nil {
		t.Fatal(err)
	}
	invoke := func(ctx context.Context, t registry.Target, args []byte) (registry.Result, string) {
		if t.Name() == "say" && strings.Contains(string(args), "refuse me") {
			return registry.Result{}, "every slot is taken. Next: retry."
		}
		if strings.Contains(string(args), "slow down") {
			res := registry.Failed("say", toolerr.RateLimited, `the key "carol" is over its rate. Next: wait 3 seconds <&>.`)
			res.RetryAfter = 2500 * time.Millisecond
			return res, ""
		}
		return reg.InvokeTarget(ctx, t, args, registry.Meta{}), ""
	}
	opts := Options{Registry: reg, Invoke: invoke, Version: "test", MaxBodyBytes: 1 << 20}
	fast, viaSDK = NewHandler(opts), NewHandler(opts)
	viaSDK.noFastPath = true
	sdkCalls = &countingHandler{h: fast.sdk}
	fast.sdk = sdkCalls
	return fast, viaSDK, sdkCalls
}

// TestFastPathAnswersAsTheSDK: every request is answered byte for byte as
// the SDK's handler answers it, whether the handler's own tools/call path
// takes it or hands it to the SDK; and the plain calls are the ones it
// takes.
func TestFastPathAnswersAsTheSDK(t *testing.T) {
	const both = "application/json, text/event-stream"
	call := func(id, params string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":` + params + `}`
	}
	cases := []struct {
		name    string
		version string // Mcp-Protocol-Version
		accept  string
		ctype   string
		body    string
		fast    bool
	}{
		{"integer id", "2025-06-18", both, "application/json", call("7", `{"name":"say","arguments":{"text":"hi"}}`), true},
		{"no version header", "", both, "application/json", call("7", `{"name":"say","arguments":{"text":"hi"}}`), true},
		{"2025-11-25", "2025-11-25", both, "application/json; charset=utf-8", call("7", `{"name":"say","arguments":{"text":"hi"}}`), true},
		{"string id with escapes", "2025-06-18", both, "application/json", call(`"a\u003c\"b\"&>é"`, `{"name":"say","arguments":{"text":"x"}}`), true},
		{"negative id", "2025-06-18", "*/*", "application/json", call("-3", `{"name":"say","arguments":{"text":"x"}}`), true},
		{"html and control characters", "2025-06-18", both, "application/json", call("1", `{"name":"say","arguments":{"text":"<a href=\"x\">&amp;</a>\u0001\u2028 tab\t"}}`), true},
		{"invalid UTF-8 in the result", "2025-06-18", both, "application/json", call("1", "{\"name\":\"say\",\"arguments\":{\"text\":\"bad \xff byte\"}}"), true},
		{"error result", "2025-06-18", both, "application/json", call("2", `{"name":"say","arguments":{"text":"<no>","fail":true}}`), true},
		{"schema violation", "2025-06-18", both, "application/json", call("2", `{"name":"say","arguments":{"text":5}}`), true},
		{"no arguments", "2025-06-18", both, "application/json", call("3", `{"name":"say"}`), true},
		{"null arguments", "2025-06-18", both, "application/json", call("3", `{"name":"say","arguments":null}`), true},
		{"arguments not an object", "2025-06-18", both, "application/json", call("3", `{"name":"say","arguments":[1]}`), true},
		{"spaced arguments", "2025-06-18", both, "application/json", call("3", `{ "name" : "say" , "arguments" : { "text" : "a b" } }`), true},
		{"refused by the gate", "2025-06-18", both, "application/json", call("4", `{"name":"say","arguments":{"text":"refuse me"}}`), true},
		{"rate limited: a JSON-RPC error with the wait", "2025-06-18", both, "application/json", call("6", `{"name":"say","arguments":{"text":"slow down"}}`), true},
		{"unknown tool", "2025-06-18", both, "application/json", call("5", `{"name":"nope","arguments":{}}`), false},
		{"_meta", "2025-06-18", both, "application/json", call("5", `{"name":"say","arguments":{"text":"x"},"_meta":{"progressToken":1}}`), false},
		{"fractional id", "2025-06-18", both, "application/json", call("5.5", `{"name":"say","arguments":{"text":"x"}}`), false},
		{"null id", "2025-06-18", both, "application/json", call("null", `{"name":"say","arguments":{"text":"x"}}`), false},
		{"notification", "2025-06-18", both, "application/json", `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"say"}}`, false},
		{"batch", "2025-03-26", both, "application/json", "[" + call("1", `{"name":"say"}`) + "]", false},
		{"tools/list", "2025-06-18", both, "application/json", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, false},
		{"initialize", "", both, "application/json", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, false},
		{"unknown version", "1999-01-01", both, "application/json", call("1", `{"name":"say"}`), false},
		{"JSON only accepted", "2025-06-18", "application/json", "application/json", call("1", `{"name":"say"}`), false},
		{"not JSON content", "2025-06-18", both, "text/plain", call("1", `{"name":"say"}`), false},
		{"wrong jsonrpc", "2025-06-18", both, "application/json", strings.Replace(call("1", `{"name":"say"}`), `"2.0"`, `"1.0"`, 1), false},
		{"upper-case key", "2025-06-18", both, "application/json", strings.Replace(call("1", `{"name":"say"}`), `"method"`, `"Method"`, 1), false},
		{"escaped key", "2025-06-18", both, "application/json", strings.Replace(call("1", `{"name":"say"}`), `"method"`, `"met\u0068od"`, 1), false},
		{"escaped name", "2025-06-18", both, "application/json", call("1", `{"name":"s\u0061y","arguments":{"text":"x"}}`), false},
		{"duplicate id", "2025-06-18", both, "application/json", strings.Replace(call("1", `{"name":"say"}`), `"id":1`, `"id":1,"id":2`, 1), false},
		{"spaces everywhere", "2025-06-18", both, "application/json", " {\n \"jsonrpc\" : \"2.0\" ,\t\"id\" : 12 , \"method\":\"tools/call\", \"params\" : {\"arguments\" : {\"text\":\"}{][,\\\"\"} , \"name\" : \"say\" } }\r\n", true},
		{"trailing data", "2025-06-18", both, "application/json", call("1", `{"name":"say"}`) + "{}", false},
		{"malformed", "2025-06-18", both, "application/json", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{`, false},
		{"too deep", "2025-06-18", both, "application/json", call("1", `{"name":"say","arguments":{"text":"x","d":`+strings.Repeat("[", 1001)+strings.Repeat("]", 1001)+`}}`), false},
	}
	fast, viaSDK, sdkCalls := testHandlers(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			serve := func(h *Handler) *httptest.ResponseRecorder {
				r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(c.body))
				r.Header.Set("Content-Type", c.ctype)
				r.Header.Set("Accept", c.accept)
				if c.version != "" {
					r.Header.Set("Mcp-Protocol-Version", c.version)
				}
				w := httptest.NewRecorder()
				h.ServeBody(w, r, []byte(c.body))
				return w
			}
			before := sdkCalls.n
			got, want := serve(fast), serve(viaSDK)
			if took := sdkCalls.n == before; took != c.fast {
				t.Errorf("fast path taken: %v, want %v", took, c.fast)
			}
			if got.Code != want.Code || got.Body.String() != want.Body.String() {
				t.Errorf("fast path:\n%d %s\nSDK:\n%d %s", got.Code, got.Body, want.Code, want.Body)
			}
			if !reflect.DeepEqual(got.Header(), want.Header()) {
				t.Errorf("headers: %v, SDK %v", got.Header(), want.Header())
			}
		})
	}
}

// TestFastPathCancel: a client that goes away cancels the call, as the
// SDK's handler does with PropagateRequestCancellation.
func TestFastPathCancel(t *testing.T) {
	started := make(chan struct{})
	var seen error
	invoke := func(ctx context.Context, _ registry.Target, _ []byte) (registry.Result, string) {
		close(started)
		<-ctx.Done()
		seen = ctx.Err()
		return registry.Result{}, "canceled"
	}
	reg := registry.New(registry.Options{})
	if err := reg.Register(sayTool{}); err != nil {
		t.Fatal(err)
	}
	h := NewHandler(Options{Registry: reg, Invoke: invoke})
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"say"}}`
	ctx, cancel := context.WithCancel(context.Background())
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/mcp", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeBody(httptest.NewRecorder(), r, []byte(body))
	}()
	<-started
	cancel()
	<-done
	if !errors.Is(seen, context.Canceled) {
		t.Errorf("the call's context: %v", seen)
	}
}

// TestSDKPathCancel: a call the SDK answers (one with a progress token in
// its _meta, over a protocol version before 2026-07-28, whose calls the
// SDK ties to no request) is canceled as well when its client goes away.
func TestSDKPathCancel(t *testing.T) {
	started := make(chan struct{})
	seen := make(chan error, 1)
	invoke := func(ctx context.Context, _ registry.Target, _ []byte) (registry.Result, string) {
		close(started)
		select {
		case <-ctx.Done():
			seen <- ctx.Err()
		case <-time.After(10 * time.Second):
			seen <- nil
		}
		return registry.Result{}, "canceled"
	}
	reg := registry.New(registry.Options{})
	if err := reg.Register(sayTool{}); err != nil {
		t.Fatal(err)
	}
	h := NewHandler(Options{Registry: reg, Invoke: invoke})
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"say","_meta":{"progressToken":"p1"}}}`
	ctx, cancel := context.WithCancel(context.Background())
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/mcp", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	r.Header.Set("MCP-Protocol-Version", "2025-11-25")
	go h.ServeBody(httptest.NewRecorder(), r, []byte(body))
	<-started
	cancel()
	if err := <-seen; !errors.Is(err, context.Canceled) {
		t.Errorf("the call's context after its client went away: %v", err)
	}
}

func BenchmarkPlainCall(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"small.txt"}}}`)
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := plainCall(r, body); !ok {
			b.Fatal("not plain")
		}
	}
}

// FuzzPlainCall: whatever the body, plainCall does not panic, and a body
// it takes is a tools/call whose name and arguments are what encoding/json
// reads in it.
func FuzzPlainCall(f *testing.F) {
	f.Add(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"say","arguments":{"text":"hi"}}}`)
	f.Add(` {"params":{"arguments":[1,{"a":"}"}],"name":"x"},"method":"tools/call","id":"s","jsonrpc":"2.0"} `)
	f.Add(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"say","arguments":null}}`)
	f.Add(`[{"jsonrpc":"2.0"}]`)
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	f.Fuzz(func(t *testing.T, body string) {
		c, ok := plainCall(r, []byte(body))
		if !ok {
			return
		}
		var m struct {
			Method string `json:"method"`
			Params struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"params"`
		}
		if err := json.Unmarshal([]byte(body), &m); err != nil {
			t.Fatalf("taken but not JSON: %v", err)
		}
		if m.Method != "tools/call" || m.Params.Name != c.name || string(m.Params.Arguments) != string(c.args) {
			t.Fatalf("taken as %q %s; encoding/json reads %+v", c.name, c.args, m)
		}
	})
}

// TestAppendResponseMatchesMarshal: the hand-written response is, byte
// for byte, what encoding/json makes of the same result (the text
// block's MarshalJSON escaping <, > and & as the SDK does).
func TestAppendResponseMatchesMarshal(t *testing.T) {
	code, exit := "path_denied", 3
	texts := []string{
		"", "plain", "[File: a.txt]\n  1| <b>&amp;</b> \"quoted\" \\ back",
		"tab\tcr\rbell\x07nul\x00", "界 \u2028 \u2029 😀", "bad \xff\xfe end",
	}
	for _, id := range []string{`7`, `"id-\u003c1\u003e"`, `-12`} {
		for _, text := range texts {
			for _, res := range []callResult{
				{Content: []textContent{{Type: "text", Text: text, Meta: &callMeta{CallID: "c1", Status: "success", DurationMS: 12}}}},
				{IsError: true, Content: []textContent{{Type: "text", Text: text, Meta: &callMeta{CallID: "c<2>", Status: "error", ErrorCode: &code}}}},
				{Content: []textContent{{Type: "text", Text: text, Meta: &callMeta{CallID: "c3", Status: "success", ExitCode: &exit}}}},
				{IsError: true, Content: []textContent{{Type: "text", Text: "Error: " + text}}},
			} {
				want, err := marshal(response{JSONRPC: "2.0", ID: json.RawMessage(id), Result: res})
				if err != nil {
					t.Fatal(err)
				}
				if got := appendResponse(nil, json.RawMessage(id), res); string(got) != string(want) {
					t.Errorf("appendResponse:\n%s\nwant:\n%s", got, want)
				}
			}
		}
	}
}
