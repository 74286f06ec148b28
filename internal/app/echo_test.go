package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/runes"
)

// maxEcho bounds a failed call's result text and message when the call
// carried an oversized value: a few sentences and a short quote of the
// value, never the value itself.
const maxEcho = 2048

// echoService runs the service with every tool this machine can offer on:
// exec without a sandbox; the agent tools, send_message and send_media
// (to a webhook) with a model endpoint and a receiver that answer every
// request with an error repeating the whole request.
func echoService(t *testing.T) *registry.Registry {
	t.Helper()
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		w.WriteHeader(http.StatusBadRequest)
		_, _ = fmt.Fprintf(w, "bad request: %s %s", r.URL, body)
	}))
	t.Cleanup(receiver.Close)
	cfg := testConfig(t, map[string]string{
		"EXEC_SANDBOX": "none", "LLM_BASE_URL": receiver.URL + "/v1", "LLM_MODEL": "m",
		"XIAOZHI_CONVERSATION": "true", "WEBHOOK_URL": receiver.URL + "/hook",
		"AGENT_TIMEOUT": "5s",
	})
	a, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return a.Registry()
}

// schemaNode is the part of a JSON Schema the echo test walks.
type schemaNode struct {
	Type       string                 `json:"type"`
	Enum       []any                  `json:"enum"`
	Properties map[string]*schemaNode `json:"properties"`
	Required   []string               `json:"required"`
	Items      *schemaNode            `json:"items"`
	MinLength  *int                   `json:"minLength"`
	MaxLength  *int                   `json:"maxLength"`
	Minimum    *float64               `json:"minimum"`
	MinItems   *int                   `json:"minItems"`
}

// small is a small valid value of n (an object with its required members
// only).
func (n *schemaNode) small() any {
	switch {
	case len(n.Enum) > 0:
		return n.Enum[0]
	case n.Type == "integer" || n.Type == "number":
		if n.Minimum != nil {
			return *n.Minimum
		}
		return 1
	case n.Type == "boolean":
		return false
	case n.Type == "array":
		k := 1
		if n.MinItems != nil {
			k = max(*n.MinItems, 1)
		}
		out := make([]any, k)
		for i := range out {
			out[i] = n.Items.small()
		}
		return out
	case n.Type == "object":
		out := map[string]any{}
		for _, r := range n.Required {
			out[r] = n.Properties[r].small()
			if alt, ok := smallStrings[r]; ok {
				out[r] = alt
			}
		}
		return out
	}
	return "x.txt"
}

// smallStrings are the small values of the string parameters that must
// differ from the others' "x.txt" for a call to get anywhere (edit_file
// refuses to replace text with itself).
var smallStrings = map[string]string{"new_str": "y.txt"}

// stringLeaf is a free-text string parameter, nested or not: the path of
// property names and array indexes (0) that leads to it, and its schema.
type stringLeaf struct {
	path []string
	node *schemaNode
}

// stringLeaves lists the string parameters without an enum under n.
func stringLeaves(n *schemaNode, path []string) []stringLeaf {
	var out []stringLeaf
	switch n.Type {
	case "string":
		if len(n.Enum) == 0 {
			out = append(out, stringLeaf{slices.Clone(path), n})
		}
	case "array":
		out = append(out, stringLeaves(n.Items, append(path, "0"))...)
	case "object":
		names := make([]string, 0, len(n.Properties))
		for k := range n.Properties {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			out = append(out, stringLeaves(n.Properties[k], append(path, k))...)
		}
	}
	return out
}

// enumChoices is every combination of the top-level enum parameters'
// values, each also left out when it is optional, so that a long value
// reaches every branch of a tool that an action or mode selects.
func enumChoices(n *schemaNode) []map[string]any {
	out := []map[string]any{{}}
	names := make([]string, 0, len(n.Properties))
	for k, p := range n.Properties {
		if len(p.Enum) > 0 {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, k := range names {
		var next []map[string]any
		for _, base := range out {
			if !slices.Contains(n.Required, k) {
				next = append(next, base)
			}
			for _, v := range n.Properties[k].Enum {
				m := maps(base)
				m[k] = v
				next = append(next, m)
			}
		}
		out = next
	}
	return out
}

func maps(m map[string]any) map[string]any {
	out := make(map[string]any, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

// set puts v at path in args, creating the containers it passes through
// from the schema's small values.
func set(args map[string]any, root *schemaNode, path []string, v any) {
	var cur any = args
	node := root
	for i, p := range path {
		last := i == len(path)-1
		switch c := cur.(type) {
		case map[string]any:
			node = node.Properties[p]
			if last {
				c[p] = v
				return
			}
			if _, ok := c[p]; !ok {
				c[p] = node.small()
			}
			cur = c[p]
		case []any:
			node = node.Items
			if last {
				c[0] = v
				return
			}
			cur = c[0]
		}
	}
}

// longValues are the oversized values tried in a string parameter: n
// characters of plain text, of text in two- and four-byte characters, of an address
// the network guard refuses, of a host name no resolver is asked about,
// of a path, and of text with quotes and control characters that a quote
// escapes into longer text.
func longValues(n int) []string {
	pad := func(prefix, unit, suffix string) string {
		k := max(n-len([]rune(prefix))-len([]rune(suffix)), 1)
		return prefix + repeatRunes(unit, k) + suffix
	}
	return []string{
		pad("", "a", ""),
		pad("", "é", ""),
		pad("", "😀", ""),
		pad("http://127.0.0.1:9/", "a", ""),
		pad("https://", "b", ".example/"),
		pad("dir/", "c/", ".png"),
		pad("", "\"\x01\n", ""),
	}
}

// repeatRunes is k characters made of unit repeated.
func repeatRunes(unit string, k int) string {
	r := []rune(strings.Repeat(unit, k/len([]rune(unit))+1))
	return string(r[:k])
}

// TestErrorsDoNotEchoLongValues calls every tool the service registers
// with an oversized value in each of its free-text string parameters, one
// at a time, the other parameters at small valid values, under every
// combination of its actions and modes: once far beyond the parameter's
// maxLength (the schema refuses it) and once at exactly its maxLength (the
// tool itself sees it). Whatever fails says so in a bounded result: an
// error quotes at most a short piece of what the caller sent.
func TestErrorsDoNotEchoLongValues(t *testing.T) {
	reg := echoService(t)
	// A file for the parameters that name one, so that a call gets past
	// "not found" to what the tool does with its other values.
	if res := reg.Invoke(context.Background(), "write_file", []byte(`{"path":"x.txt","content":"hello x.txt\n"}`), registry.Meta{}); res.Status != "success" {
		t.Fatal(res.Result)
	}
	// And files with the longest names a path parameter takes, so that
	// messages about an existing file (not text, no such line, old_str not
	// found) are reached with a long path too.
	made := 0
	for i, v := range longValues(4096) {
		content := "hello\n"
		if i%2 == 1 {
			content = "\x00binary"
		}
		body, _ := json.Marshal(map[string]string{"path": v, "content": content})
		if res := reg.Invoke(context.Background(), "write_file", body, registry.Meta{}); res.Status == "success" {
			made++
		}
	}
	if made == 0 {
		t.Fatal("no file with a long path could be made")
	}
	defs := reg.Definitions()
	if len(defs) < 12 {
		t.Errorf("only %d tools registered; the test should reach every tool", len(defs))
	}
	calls, failures, largest, longest := 0, 0, 0, ""
	for _, d := range defs {
		t.Run(d.Function.Name, func(t *testing.T) {
			var root schemaNode
			if err := json.Unmarshal(d.Function.Parameters, &root); err != nil {
				t.Fatal(err)
			}
			leaves := stringLeaves(&root, nil)
			if len(leaves) == 0 {
				t.Skip("no free-text string parameter")
			}
			for _, leaf := range leaves {
				lengths := []int{20000}
				if leaf.node.MaxLength != nil && *leaf.node.MaxLength < 20000 {
					lengths = append(lengths, *leaf.node.MaxLength)
				}
				for _, base := range enumChoices(&root) {
					for _, n := range lengths {
						for _, v := range longValues(n) {
							args := root.small().(map[string]any)
							for k, e := range base {
								args[k] = e
							}
							set(args, &root, leaf.path, v)
							body, err := json.Marshal(args)
							if err != nil {
								t.Fatal(err)
							}
							ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
							res := reg.Invoke(ctx, d.Function.Name, body, registry.Meta{})
							cancel()
							calls++
							if res.Status != "error" {
								continue
							}
							failures++
							if len(res.Result) > maxEcho || len(res.Error.Message) > maxEcho {
								t.Errorf("%s=%.40q... (%d characters, base %v): %d-byte result: %.300s",
									strings.Join(leaf.path, "."), v, n, base, len(res.Result), res.Result)
							}
							if utf8.RuneCountInString(v) > runes.Echo && strings.Contains(res.Result, runes.Prefix(v, runes.Echo+1)) {
								t.Errorf("%s=%.40q... (%d characters, base %v): the result repeats more than %d characters of it: %.300s",
									strings.Join(leaf.path, "."), v, n, base, runes.Echo, res.Result)
							}
							if len(res.Result) > largest {
								largest, longest = len(res.Result), fmt.Sprintf("%s %s=%.20q...", d.Function.Name, strings.Join(leaf.path, "."), v)
							}
						}
					}
				}
			}
		})
	}
	t.Logf("%d calls, %d failed; the longest error result had %d bytes (%s)", calls, failures, largest, longest)
}
