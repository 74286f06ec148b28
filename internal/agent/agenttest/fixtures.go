package agenttest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FixtureDir is where the provider fixtures are, relative to this module's
// root.
const FixtureDir = "internal/agent/testdata/providers"

// Fixture is one provider's documented chat-completions replies for a
// two-tool task: read notes.txt, write summary.md, answer "Wrote
// summary.md.". Source names the documents the shape comes from.
type Fixture struct {
	Provider string
	Source   []string
	Rule     string // the provider's documented rule for the requests that follow
	Model    string
	// MustReturn names the reply fields the next requests must carry back
	// unchanged: a message field, or "tool_calls[].<field>" for a field of
	// each tool call.
	MustReturn []string `json:"must_return"`
	// MustDrop names the reply fields the next requests must not carry:
	// the provider refuses an assistant message with them.
	MustDrop []string `json:"must_drop"`
	Replies  []json.RawMessage
	// Reject is the rule as the mock server checks it: a JMESPath
	// expression true for a request that breaks it, and the provider's
	// answer to such a request.
	Reject *struct {
		When   string
		Status int
		Body   json.RawMessage
	}
}

// LoadFixtures reads the fixtures in dir, by file name without .json.
func LoadFixtures(t testing.TB, dir string) map[string]Fixture {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures in %s: %v", dir, err)
	}
	out := map[string]Fixture{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var fx Fixture
		if err := json.Unmarshal(data, &fx); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if len(fx.Source) == 0 || len(fx.Replies) != 3 || fx.Model == "" {
			t.Fatalf("%s: a fixture needs its source, a model and three replies", f)
		}
		out[strings.TrimSuffix(filepath.Base(f), ".json")] = fx
	}
	return out
}

// ReplyMessage returns reply n's choices[0].message as its fields.
func (fx Fixture) ReplyMessage(t testing.TB, n int) map[string]json.RawMessage {
	t.Helper()
	var r struct {
		Choices []struct{ Message map[string]json.RawMessage }
	}
	if err := json.Unmarshal(fx.Replies[n], &r); err != nil || len(r.Choices) == 0 {
		t.Fatalf("reply %d: %v", n, err)
	}
	return r.Choices[0].Message
}

// Steps returns the fixture's replies as a script for New.
func (fx Fixture) Steps() []func(Request) Response {
	var steps []func(Request) Response
	for _, r := range fx.Replies {
		steps = append(steps, Reply(Response{Body: string(r)}))
	}
	return steps
}

// MockRules turns fixtures into mock-llm rules: for each model, a reply
// by the number of tool results so far, then (winning, as the last match)
// a 400 for a request whose tool messages do not answer its calls, then
// the provider's own rule.
func MockRules(fixtures map[string]Fixture) []MockRule {
	var rules []MockRule
	for _, fx := range fixtures {
		model := fmt.Sprintf("body.model == '%s'", fx.Model)
		for n, r := range fx.Replies {
			rules = append(rules, MockRule{Match: fmt.Sprintf("%s && length(body.messages[?role=='tool']) == `%d`", model, n), Status: 200, Body: r})
		}
		rules = append(rules, MockRule{Match: model + " && length(body.messages[?role=='tool']) != length(body.messages[?role=='assistant'].tool_calls[])",
			Status: 400, Body: json.RawMessage(`{"error":{"message":"tool messages must answer the tool calls before them","type":"invalid_request_error"}}`)})
		if fx.Reject != nil {
			rules = append(rules, MockRule{Match: model + " && " + fx.Reject.When, Status: fx.Reject.Status, Body: fx.Reject.Body})
		}
	}
	return rules
}
