package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/agent"
	"github.com/countbot/toolsvc/internal/agent/agenttest"
)

func conversations(t *testing.T, srv *agenttest.Server, dir string, mod func(*agent.ConversationOptions)) *agent.Conversations {
	t.Helper()
	reg, _, _ := newRegistry(t, "read_file", "exec", "spawn", "workflow_run", "send_message", "send_media")
	o := agent.ConversationOptions{Dir: dir, Model: newClient(srv, nil), Tools: reg, Allowed: []string{"read_file", "exec"}, MaxTurns: 5, MaxConcurrent: 2}
	if mod != nil {
		mod(&o)
	}
	c, err := agent.NewConversations(o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// roles returns the messages of a model request as "role: content".
func roles(t *testing.T, r agenttest.Request) []string {
	var out []string
	for _, raw := range r.Messages {
		var m struct{ Role, Content string }
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		if m.Role != "system" {
			out = append(out, m.Role+": "+m.Content)
		}
	}
	return out
}

// TestConversationContinues: a second message in the same session is sent
// to the model after the first exchange; another session starts afresh;
// the agent has every tool but those that start agents or message users.
func TestConversationContinues(t *testing.T) {
	n := 0
	var mu sync.Mutex
	srv := agenttest.New(t, func(agenttest.Request) agenttest.Response {
		mu.Lock()
		defer mu.Unlock()
		n++
		return agenttest.Final(fmt.Sprintf("reply %d", n))
	})
	dir := t.TempDir()
	c := conversations(t, srv, dir, nil)
	for _, m := range []struct{ session, text, want string }{
		{"dev-1", "what is the weather", "reply 1"},
		{"dev-1", "and tomorrow", "reply 2"},
		{"dev-2", "hello", "reply 3"},
	} {
		out, err := c.Send(t.Context(), "", m.session, m.text, nil)
		if err != nil || out.Answer != m.want {
			t.Fatalf("Send(%s, %s) = %q, %v", m.session, m.text, out.Answer, err)
		}
	}
	reqs := srv.Requests()
	if got := roles(t, reqs[1]); !slices.Equal(got, []string{"user: what is the weather", "assistant: reply 1", "user: and tomorrow"}) {
		t.Errorf("second message of dev-1 sent as %q", got)
	}
	if got := roles(t, reqs[2]); !slices.Equal(got, []string{"user: hello"}) {
		t.Errorf("dev-2 sent as %q", got)
	}
	if got := reqs[0].ToolNames(); !slices.Equal(got, []string{"exec", "read_file"}) {
		t.Errorf("conversation tools %v", got)
	}
	// A restart keeps the history: it is on disk.
	c2 := conversations(t, srv, dir, nil)
	if _, err := c2.Send(t.Context(), "", "dev-1", "thanks", nil); err != nil {
		t.Fatal(err)
	}
	reqs = srv.Requests()
	if got := roles(t, reqs[3]); len(got) != 5 || got[3] != "assistant: reply 2" {
		t.Errorf("after a restart dev-1 sent as %q", got)
	}
}

// TestConversationHistoryBounds: only the most recent messages are kept
// (20 messages, 32 KiB), the history always starts with a user message,
// and any session ID names a file inside the folder.
func TestConversationHistoryBounds(t *testing.T) {
	srv := agenttest.New(t, agenttest.Reply(agenttest.Final("ok")))
	dir := t.TempDir()
	c := conversations(t, srv, dir, nil)
	for i := range 15 {
		if _, err := c.Send(t.Context(), "", "../../etc/passwd", fmt.Sprintf("message %d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	reqs := srv.Requests()
	got := roles(t, reqs[len(reqs)-1])
	if len(got) != 21 || got[0] != "user: message 4" || got[20] != "user: message 14" {
		t.Errorf("last request: %d messages, first %q", len(got), got[0])
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(files) != 1 || !strings.HasPrefix(filepath.Base(files[0]), "etcpasswd-") {
		t.Fatalf("files %v", files)
	}
	if agent.SessionFile("a/b") == agent.SessionFile("ab") {
		t.Errorf("two sessions share a file")
	}
	// Big messages: the history stays within 32 KiB.
	big := strings.Repeat("x", 10<<10)
	for range 5 {
		if _, err := c.Send(t.Context(), "", "big", big, nil); err != nil {
			t.Fatal(err)
		}
	}
	reqs = srv.Requests()
	size := 0
	for _, m := range roles(t, reqs[len(reqs)-1]) {
		size += len(m)
	}
	if size > 32<<10+len(big)+100 {
		t.Errorf("last request carries %d bytes of history", size)
	}
	data, err := os.ReadFile(filepath.Join(dir, agent.SessionFile("big")))
	if err != nil || len(data) > 40<<10 {
		t.Errorf("history file: %d bytes, %v", len(data), err)
	}
}

// TestConversationTimeout: a model that does not answer within the
// conversation's time gives ErrConversationTimeout, and nothing is added
// to the history.
func TestConversationTimeout(t *testing.T) {
	srv := agenttest.New(t, agenttest.Reply(agenttest.Response{Hang: true}))
	dir := t.TempDir()
	c := conversations(t, srv, dir, func(o *agent.ConversationOptions) { o.Timeout = 200 * time.Millisecond })
	_, err := c.Send(context.Background(), "", "s", "hello", nil)
	if !errors.Is(err, agent.ErrConversationTimeout) {
		t.Fatalf("Send() = %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, agent.SessionFile("s"))); !os.IsNotExist(err) {
		t.Errorf("a failed exchange was kept: %v", err)
	}
}

// TestConversationBusy: beyond MaxConcurrent messages being answered, one
// more is refused at once with ErrBusy rather than queued.
func TestConversationBusy(t *testing.T) {
	arrived, release := make(chan struct{}), make(chan struct{})
	srv := agenttest.New(t, func(agenttest.Request) agenttest.Response {
		close(arrived)
		<-release
		return agenttest.Final("ok")
	})
	c := conversations(t, srv, t.TempDir(), func(o *agent.ConversationOptions) { o.MaxConcurrent = 1 })
	first := make(chan error, 1)
	go func() {
		_, err := c.Send(context.Background(), "", "a", "one", nil)
		first <- err
	}()
	<-arrived
	if _, err := c.Send(context.Background(), "", "b", "two", nil); !errors.Is(err, agent.ErrBusy) {
		t.Errorf("second message: %v, want ErrBusy", err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Errorf("first message: %v", err)
	}
}

// TestConversationBelongsToKey: a conversation is its key's own. Another
// key naming the same session starts afresh and leaves the first one's
// history as it was; a history of before keys had names (no owner) goes
// on without keys and is no key's; the agent's tool calls carry the key.
func TestConversationBelongsToKey(t *testing.T) {
	n := 0
	var mu sync.Mutex
	srv := agenttest.New(t, func(agenttest.Request) agenttest.Response {
		mu.Lock()
		defer mu.Unlock()
		n++
		return agenttest.Final(fmt.Sprintf("reply %d", n))
	})
	dir := t.TempDir()
	c := conversations(t, srv, dir, nil)
	for _, m := range []struct{ owner, text string }{
		{"", "before keys"}, {"alice", "secret plan"}, {"bob", "what did alice say"}, {"alice", "go on"}, {"", "still there?"},
	} {
		if _, err := c.Send(t.Context(), m.owner, "dev-1", m.text, nil); err != nil {
			t.Fatal(err)
		}
	}
	reqs := srv.Requests()
	for i, want := range [][]string{
		{"user: before keys"},
		{"user: secret plan"},
		{"user: what did alice say"},
		{"user: secret plan", "assistant: reply 2", "user: go on"},
		{"user: before keys", "assistant: reply 1", "user: still there?"},
	} {
		if got := roles(t, reqs[i]); !slices.Equal(got, want) {
			t.Errorf("message %d sent as %q, want %q", i+1, got, want)
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "dev-1-*.json"))
	if len(files) != 3 {
		t.Errorf("files %v: want one per key and one without", files)
	}
	// A file in alice's place that records another owner is not alice's.
	byOwner := map[string]string{}
	for _, f := range files {
		var h struct{ Owner string }
		raw, _ := os.ReadFile(f)
		if err := json.Unmarshal(raw, &h); err != nil {
			t.Fatal(err)
		}
		byOwner[h.Owner] = f
	}
	raw, err := os.ReadFile(byOwner["bob"])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(byOwner["alice"], raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(t.Context(), "alice", "dev-1", "anyone?", nil); err != nil {
		t.Fatal(err)
	}
	reqs = srv.Requests()
	if got := roles(t, reqs[len(reqs)-1]); !slices.Equal(got, []string{"user: anyone?"}) {
		t.Errorf("alice with bob's file in her place sent as %q", got)
	}
}

// mistralRule answers as Mistral does a request with an assistant message
// that has neither text nor tool calls, or both
// (https://docs.mistral.ai/capabilities/function_calling/; the API's
// 400 "Assistant message must have either content or tool_calls, but not
// none."), and otherwise with next.
func mistralRule(t *testing.T, next func(agenttest.Request) agenttest.Response) func(agenttest.Request) agenttest.Response {
	return func(r agenttest.Request) agenttest.Response {
		for _, m := range messagesOf(t, r) {
			if m.Role == "assistant" && (m.Content != "") == (len(m.ToolCalls) > 0) {
				return agenttest.Response{Status: 400, Body: `{"object":"error","message":"Assistant message must have either content or tool_calls, but not none.","type":"invalid_request_error","param":null,"code":null}`}
			}
		}
		return next(r)
	}
}

// TestConversationSurvivesEmptyAnswer: a Mistral session whose model once
// answers with nothing goes on working, and so does a session whose file
// an older version left with an empty answer in it.
func TestConversationSurvivesEmptyAnswer(t *testing.T) {
	var mu sync.Mutex
	answers := []string{"", "It is sunny.", "Tomorrow too."}
	srv := agenttest.New(t, mistralRule(t, func(agenttest.Request) agenttest.Response {
		mu.Lock()
		defer mu.Unlock()
		a := answers[0]
		if len(answers) > 1 {
			answers = answers[1:]
		}
		return agenttest.Final(a)
	}))
	dir := t.TempDir()
	c := conversations(t, srv, dir, nil)
	for _, m := range []struct{ text, want string }{
		{"hello", ""},
		{"what is the weather", "It is sunny."},
		{"and tomorrow", "Tomorrow too."},
	} {
		out, err := c.Send(t.Context(), "", "dev-1", m.text, nil)
		if err != nil || out.Answer != m.want {
			t.Fatalf("Send(%q) = %q, %v; want %q", m.text, out.Answer, err, m.want)
		}
	}
	reqs := srv.Requests()
	if got := roles(t, reqs[2]); !slices.Equal(got, []string{"user: what is the weather", "assistant: It is sunny.", "user: and tomorrow"}) {
		t.Errorf("third message sent as %q", got)
	}

	// A file with an empty answer, a lone user message and an unknown role.
	broken := `{"session_id":"dev-2","updated_at":"2026-01-01T00:00:00Z","messages":[
		{"role":"user","content":"hi"},{"role":"assistant","content":""},
		{"role":"user","content":"lost"},
		{"role":"user","content":"name?"},{"role":"assistant","content":"Ada."},
		{"role":"tool","content":"x"}]}`
	if err := os.WriteFile(filepath.Join(dir, agent.SessionFile("dev-2")), []byte(broken), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := c.Send(t.Context(), "", "dev-2", "and again", nil)
	if err != nil || out.Answer != "Tomorrow too." {
		t.Fatalf("Send on a broken history = %q, %v", out.Answer, err)
	}
	reqs = srv.Requests()
	if got := roles(t, reqs[len(reqs)-1]); !slices.Equal(got, []string{"user: name?", "assistant: Ada.", "user: and again"}) {
		t.Errorf("repaired history sent as %q", got)
	}
}
