package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/agent"
	"github.com/countbot/toolsvc/internal/agent/agenttest"
)

type providerFixture = agenttest.Fixture

func loadFixtures(t *testing.T) map[string]providerFixture {
	return agenttest.LoadFixtures(t, "testdata/providers")
}

// runTwoToolTask runs the sub-agent loop with read_file and write_file
// against the model at baseURL and checks that it completed the task.
func runTwoToolTask(t *testing.T, baseURL, model string) {
	t.Helper()
	reg, tools, _ := newRegistry(t, "read_file", "write_file", "exec")
	c := agent.NewClient(agent.ClientOptions{BaseURL: baseURL, APIKey: testKey, Model: model, Timeout: time.Minute, MaxRetries: -1})
	loop := &agent.Loop{Model: c, Tools: reg, Allowed: []string{"read_file", "write_file"}, MaxTurns: 5}
	out := loop.Run(context.Background(), "sa-000000000001", "Summarise notes.txt into summary.md.", &nopObserver{})
	if out.Failure != nil || out.Answer != "Wrote summary.md." || out.Turns != 3 {
		t.Fatalf("outcome %+v", out)
	}
	if got := tools["read_file"].calls(); !slices.Equal(got, []string{`{"path": "notes.txt"}`}) {
		t.Errorf("read_file calls %q", got)
	}
	if got := tools["write_file"].calls(); len(got) != 1 || !strings.Contains(got[0], "summary.md") {
		t.Errorf("write_file calls %q", got)
	}
}

// checkRoundTrip checks the requests after the first against the
// fixture: each assistant message carries its reply's MustReturn fields
// unchanged, has either text or tool calls (Mistral's rule, which every
// provider accepts), keeps its calls' ids and drops their stream index,
// and each tool message answers a call of the message before.
func checkRoundTrip(t *testing.T, fx providerFixture, bodies [][]byte) {
	t.Helper()
	if len(bodies) != 3 {
		t.Fatalf("%d requests, want 3", len(bodies))
	}
	for k := 1; k < len(bodies); k++ {
		var req struct{ Messages []map[string]json.RawMessage }
		if err := json.Unmarshal(bodies[k], &req); err != nil {
			t.Fatal(err)
		}
		var asst []map[string]json.RawMessage
		var open []string // call ids not yet answered
		for _, m := range req.Messages {
			switch str(m["role"]) {
			case "assistant":
				asst = append(asst, m)
				for _, c := range calls(m) {
					open = append(open, str(c["id"]))
				}
			case "tool":
				id := str(m["tool_call_id"])
				if i := slices.Index(open, id); i < 0 {
					t.Errorf("request %d: tool message for %q answers no call", k, id)
				} else {
					open = slices.Delete(open, i, i+1)
				}
			}
		}
		if len(asst) != k || len(open) != 0 {
			t.Fatalf("request %d: %d assistant messages (want %d), unanswered calls %v", k, len(asst), k, open)
		}
		for j, sent := range asst {
			checkEcho(t, fmt.Sprintf("request %d, assistant message %d", k, j), fx, sent, fx.ReplyMessage(t, j))
		}
	}
}

func checkEcho(t *testing.T, where string, fx providerFixture, sent, orig map[string]json.RawMessage) {
	t.Helper()
	sentCalls, origCalls := calls(sent), calls(orig)
	if (str(sent["content"]) != "") == (len(sentCalls) > 0) {
		t.Errorf("%s: content %s with %d tool calls; want either text or tool calls", where, sent["content"], len(sentCalls))
	}
	if len(sentCalls) != len(origCalls) {
		t.Fatalf("%s: %d tool calls, want %d", where, len(sentCalls), len(origCalls))
	}
	for i := range sentCalls {
		if str(sentCalls[i]["id"]) != str(origCalls[i]["id"]) || sentCalls[i]["index"] != nil {
			t.Errorf("%s: call %d sent as %v", where, i, sentCalls[i])
		}
	}
	for _, f := range fx.MustReturn {
		if name, ok := strings.CutPrefix(f, "tool_calls[]."); ok {
			for i := range sentCalls {
				if !sameJSON(sentCalls[i][name], origCalls[i][name]) {
					t.Errorf("%s: call %d's %s is %s, want %s unchanged (%s)", where, i, name, sentCalls[i][name], origCalls[i][name], fx.Rule)
				}
			}
		} else if !sameJSON(sent[f], orig[f]) {
			t.Errorf("%s: %s is %s, want %s unchanged (%s)", where, f, sent[f], orig[f], fx.Rule)
		}
	}
	for _, f := range fx.MustDrop {
		if sent[f] != nil {
			t.Errorf("%s: %s sent back as %s (%s)", where, f, sent[f], fx.Rule)
		}
	}
}

func calls(m map[string]json.RawMessage) []map[string]json.RawMessage {
	var out []map[string]json.RawMessage
	_ = json.Unmarshal(m["tool_calls"], &out)
	return out
}

func str(raw json.RawMessage) string {
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

// sameJSON: both present and equal but for insignificant space.
func sameJSON(a, b json.RawMessage) bool {
	var x, y bytes.Buffer
	return a != nil && b != nil && json.Compact(&x, a) == nil && json.Compact(&y, b) == nil && bytes.Equal(x.Bytes(), y.Bytes())
}

// TestProviderShapesRoundTrip replays each provider's documented replies
// and checks every later request against the provider's documented rule.
func TestProviderShapesRoundTrip(t *testing.T) {
	for name, fx := range loadFixtures(t) {
		t.Run(name, func(t *testing.T) {
			srv := agenttest.New(t, fx.Steps()...)
			runTwoToolTask(t, srv.URL, fx.Model)
			var bodies [][]byte
			for _, r := range srv.Requests() {
				bodies = append(bodies, r.Body)
			}
			checkRoundTrip(t, fx, bodies)
		})
	}
}

// recordingProxy forwards to target and keeps each request body.
type recordingProxy struct {
	URL    string
	mu     sync.Mutex
	bodies map[string][][]byte // by model
}

func newRecordingProxy(t *testing.T, target string) *recordingProxy {
	u, err := url.Parse(strings.TrimSuffix(target, "/v1"))
	if err != nil {
		t.Fatal(err)
	}
	p := &recordingProxy{bodies: map[string][][]byte{}}
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m struct{ Model string }
		_ = json.Unmarshal(body, &m)
		p.mu.Lock()
		p.bodies[m.Model] = append(p.bodies[m.Model], body)
		p.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p.URL = srv.URL + "/v1"
	return p
}

func (p *recordingProxy) requests(model string) [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.bodies[model]
}

// TestProviderShapesMockLLM runs the same task against mock-llm, a
// third-party OpenAI-compatible server from npm, serving the fixtures
// and refusing, as each provider does, a request that breaks its rule.
// It first shows that the mock does refuse: a follow-up request without
// the fields the provider wants back (or, for Mistral, an assistant
// message with neither text nor calls) gets the provider's error.
func TestProviderShapesMockLLM(t *testing.T) {
	fixtures := loadFixtures(t)
	base := agenttest.MockLLM(t, agenttest.MockRules(fixtures))
	for name, fx := range fixtures {
		if fx.Reject == nil {
			continue
		}
		t.Run("refuses/"+name, func(t *testing.T) {
			var first agent.Message
			if err := json.Unmarshal(fx.Replies[0], &struct {
				Choices []struct{ Message *agent.Message }
			}{Choices: []struct{ Message *agent.Message }{{Message: &first}}}); err != nil {
				t.Fatal(err)
			}
			first.Role = "assistant"
			// A provider that wants fields back refuses a message without
			// them; one that refuses fields (Groq) refuses a message with
			// them, sent by a client told to keep every field.
			var echo []string
			if len(fx.MustDrop) > 0 {
				echo = []string{"*"}
			} else {
				first.Extra = nil
				for i := range first.ToolCalls {
					first.ToolCalls[i].Extra = nil
				}
			}
			msgs := []agent.Message{{Role: "user", Content: "go"}, first}
			for _, c := range first.ToolCalls {
				msgs = append(msgs, agent.Message{Role: "tool", ToolCallID: c.ID, Content: "ok"})
			}
			if name == "mistral" {
				msgs = []agent.Message{{Role: "user", Content: "hi"}, {Role: "assistant", Content: ""}, {Role: "user", Content: "go"}}
			}
			c := agent.NewClient(agent.ClientOptions{BaseURL: base, Model: fx.Model, MaxRetries: -1, EchoFields: echo})
			_, err := c.Chat(context.Background(), msgs, nil)
			var se *agent.StatusError
			if !errors.As(err, &se) || se.Status != fx.Reject.Status {
				t.Fatalf("error %v; want the mock's HTTP %d", err, fx.Reject.Status)
			}
		})
	}
	proxy := newRecordingProxy(t, base)
	for name, fx := range fixtures {
		t.Run(name, func(t *testing.T) {
			runTwoToolTask(t, proxy.URL, fx.Model)
			checkRoundTrip(t, fx, proxy.requests(fx.Model))
		})
	}
}
