package mcpmount

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/sandbox"
	"github.com/countbot/toolsvc/internal/toolerr"
)

// callWithin calls the tool name of s with args, bounded by d.
func callWithin(t *testing.T, s *Server, name, args string, d time.Duration) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return toolByName(t, s, name).Execute(ctx, json.RawMessage(args))
}

// TestBlockedCalls: a call the server never answers does not hold the
// others: a second call of another tool answers while it waits, and it
// ends with its own timeout; the server still answers pings, so it is
// kept. A server that stops answering altogether (it stops reading its
// stdin) is restarted once a call timed out and a ping got no answer
// either, and calls work again, on a new process. A server whose calls
// time out maxTimeouts times in a row is restarted too, even though it
// answers pings.
func TestBlockedCalls(t *testing.T) {
	e := newEnv(t, sandbox.None)
	e.deps.PingTimeout = 300 * time.Millisecond
	s := e.start(t, "fake", fakeConfig(t, "raw", nil))

	// One call hangs; another answers meanwhile.
	slow := make(chan error, 1)
	go func() {
		_, err := callWithin(t, s, "fake__slow", `{}`, 2*time.Second)
		slow <- err
	}()
	time.Sleep(100 * time.Millisecond) // the slow call is sent first
	begin := time.Now()
	if out, err := callWithin(t, s, "fake__echo", `{"text":"beside"}`, 5*time.Second); err != nil || out != "beside" {
		t.Fatalf("echo beside a hanging call: %q %v", out, err)
	}
	if took := time.Since(begin); took > time.Second {
		t.Errorf("echo beside a hanging call took %s", took)
	}
	select {
	case err := <-slow:
		t.Fatalf("the slow call ended before its timeout: %v", err)
	default:
	}
	if err := <-slow; toolerr.ErrorCode(err) != toolerr.Timeout {
		t.Fatalf("the slow call: %v", err)
	}
	// The ping after the timeout is answered: the same process serves on.
	time.Sleep(2 * e.deps.PingTimeout)
	first, _ := callWithin(t, s, "fake__count", `{}`, 5*time.Second)
	second, _ := callWithin(t, s, "fake__count", `{}`, 5*time.Second)
	if first == "" || second == "" || first == second || second == "1" {
		t.Fatalf("count %q then %q: the server was restarted after one slow call", first, second)
	}

	// Stuck for good: restarted after the call's timeout and a ping's.
	begin = time.Now()
	if _, err := callWithin(t, s, "fake__freeze", `{}`, time.Second); toolerr.ErrorCode(err) != toolerr.Timeout {
		t.Fatalf("freeze: %v", err)
	}
	// A call sent before the ping found it stuck ends when it is stopped,
	// saying why; the next one runs on the new process.
	out, err := callWithin(t, s, "fake__echo", `{"text":"after the restart"}`, 20*time.Second)
	if err != nil {
		if toolerr.ErrorCode(err) != toolerr.Unavailable || !strings.Contains(err.Error(), "it stopped answering") || !strings.Contains(err.Error(), "Next: retry") {
			t.Fatalf("a call cut by the restart: %v", err)
		}
		out, err = callWithin(t, s, "fake__echo", `{"text":"after the restart"}`, 20*time.Second)
	}
	if err != nil || out != "after the restart" {
		t.Fatalf("echo after a stuck server: %q %v\n%s", out, err, e.logs.String())
	}
	t.Logf("a stuck server served again %s after the call that found it stuck began", time.Since(begin))
	if n, _ := callWithin(t, s, "fake__count", `{}`, 5*time.Second); n != "1" {
		t.Errorf("count after the restart = %q, want 1 (a new process)", n)
	}
	if !strings.Contains(e.logs.String(), "a call got no answer within its timeout, and a ping none within 300ms") {
		t.Errorf("the log does not say why the server was restarted:\n%s", e.logs.String())
	}

	// maxTimeouts calls in a row time out: restarted, pings or not.
	for range maxTimeouts {
		if _, err := callWithin(t, s, "fake__slow", `{}`, 200*time.Millisecond); toolerr.ErrorCode(err) != toolerr.Timeout {
			t.Fatalf("slow: %v", err)
		}
	}
	waitFor := time.Now().Add(20 * time.Second)
	for {
		n, err := callWithin(t, s, "fake__count", `{}`, 20*time.Second)
		if err == nil && n == "1" {
			break
		}
		if time.Now().After(waitFor) {
			t.Fatalf("count after %d timeouts in a row = %q %v, want 1 (a new process)", maxTimeouts, n, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(e.logs.String(), "3 calls in a row got no answer within their timeout") {
		t.Errorf("the log does not say why the server was restarted:\n%s", e.logs.String())
	}
}

// TestDefaultsNotRequired: a property with a default that the schema
// also requires (Playwright MCP's "scale") is not required in the schema
// offered and checked, at any depth; the others stay required; nothing is
// filled in, so the server gets only what the model sent and applies its
// own default.
func TestDefaultsNotRequired(t *testing.T) {
	e := newEnv(t, sandbox.None)
	s := e.start(t, "fake", fakeConfig(t, "raw", nil))
	var schema struct {
		Required   []string
		Properties struct {
			Opts struct{ Required []string }
		}
	}
	shot := toolByName(t, s, "fake__shot")
	if err := json.Unmarshal(shot.Parameters(), &schema); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(schema.Required, []string{"name"}) || !slices.Equal(schema.Properties.Opts.Required, []string{"r"}) {
		t.Errorf("required %v, opts.required %v; want [name] and [r]: %s", schema.Required, schema.Properties.Opts.Required, shot.Parameters())
	}
	if !strings.Contains(string(shot.Parameters()), `"default":"css"`) {
		t.Errorf("the default is gone from the schema: %s", shot.Parameters())
	}
	reg := registryOf(t, s)
	r := invoke(reg, context.Background(), "fake__shot", `{"name":"page","opts":{"r":1}}`)
	if r.Status != registry.StatusSuccess || r.Result != `{"name":"page","opts":{"r":1}}` {
		t.Errorf("a call without the defaulted properties: %+v", r)
	}
	if r := invoke(reg, context.Background(), "fake__shot", `{"scale":"device","opts":{"r":1}}`); r.Error == nil || r.Error.Code != toolerr.InvalidArguments || !strings.Contains(r.Result, "name") {
		t.Errorf("a call without a required property: %+v", r)
	}
}

// TestOptionalDefaults covers the schema shapes optionalDefaults meets.
func TestOptionalDefaults(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"type":"object","properties":{"a":{"default":1}},"required":["a"]}`, `{"properties":{"a":{"default":1}},"type":"object"}`},
		{`{"type":"object","properties":{"a":{"default":1},"b":{}},"required":["a","b"]}`, `{"properties":{"a":{"default":1},"b":{}},"required":["b"],"type":"object"}`},
		{`{"type":"object","properties":{"a":{}},"required":["a","missing"]}`, `{"properties":{"a":{}},"required":["a","missing"],"type":"object"}`},
		{`{"type":"object","properties":{"l":{"type":"array","items":{"type":"object","properties":{"x":{"default":0}},"required":["x"]}}}}`,
			`{"properties":{"l":{"items":{"properties":{"x":{"default":0}},"type":"object"},"type":"array"}},"type":"object"}`},
		// A default that looks like a schema is a value: left as it is.
		{`{"type":"object","properties":{"o":{"default":{"properties":{"p":{"default":1}},"required":["p"]}}}}`,
			`{"properties":{"o":{"default":{"properties":{"p":{"default":1}},"required":["p"]}}},"type":"object"}`},
	} {
		var v any
		if err := json.Unmarshal([]byte(tc.in), &v); err != nil {
			t.Fatal(err)
		}
		optionalDefaults(v)
		got, _ := json.Marshal(v)
		if string(got) != tc.want {
			t.Errorf("%s\n got %s\nwant %s", tc.in, got, tc.want)
		}
	}
}
