package app

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countbot/toolsvc/internal/agent/agenttest"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/toolerr"
)

// withNulls adds null for every optional property v lacks, at every level
// of objects (and objects in arrays) the schema s describes: what a model
// sends under strict function calling for the parameters it leaves out.
func withNulls(s map[string]any, v any) {
	switch x := v.(type) {
	case map[string]any:
		props, _ := s["properties"].(map[string]any)
		for name, p := range props {
			ps, _ := p.(map[string]any)
			if val, ok := x[name]; ok {
				withNulls(ps, val)
			} else {
				x[name] = nil
			}
		}
	case []any:
		items, _ := s["items"].(map[string]any)
		for _, el := range x {
			withNulls(items, el)
		}
	}
}

// sampleOf returns the arguments of tool's tooldef.Sample, or fails t
// with what to add.
func sampleOf(t *testing.T, tool registry.Tool) json.RawMessage {
	t.Helper()
	s, ok := tool.(interface{ Sample() json.RawMessage })
	if !ok || len(s.Sample()) == 0 {
		t.Fatalf("%s has no sample arguments: add a Sample to %s's tooldef.New, e.g. tooldef.Sample(%sArgs{...}) with its required parameters",
			tool.Name(), tool.Name(), lowerCamel(tool.Name()))
	}
	return s.Sample()
}

// lowerCamel turns a tool name into the name its arguments struct has by
// convention: line_count, lineCount.
func lowerCamel(name string) string {
	parts := strings.Split(name, "_")
	for i := 1; i < len(parts); i++ {
		if parts[i] != "" {
			parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
		}
	}
	return strings.Join(parts, "")
}

// schemaOnly is a tool's name, description and schema with an Execute
// that does nothing: a registry of them checks arguments without running
// anything.
type schemaOnly struct{ registry.Tool }

func (schemaOnly) Execute(context.Context, json.RawMessage) (string, error) { return "ok", nil }

// schemaRuled is schemaOnly with the rules of a tool that has them.
type schemaRuled struct {
	schemaOnly
	rules []registry.Rule
}

func (s schemaRuled) Rules() []registry.Rule { return s.rules }

// TestSamples: every built-in tool declares sample arguments, and they
// pass its schema (and rules) as the registry checks them, so that the
// tests that call every tool with its sample call it, not its argument
// checks.
func TestSamples(t *testing.T) {
	a := everyTool(t, "http://127.0.0.1:9/v1")
	for _, name := range a.reg.Names() {
		t.Run(name, func(t *testing.T) {
			tool, _ := a.reg.Tool(name)
			sample := sampleOf(t, tool)
			var stub registry.Tool = schemaOnly{tool}
			if r, ok := tool.(registry.Ruled); ok {
				stub = schemaRuled{schemaOnly{tool}, r.Rules()}
			}
			reg := registry.New(registry.Options{})
			if err := reg.Register(stub); err != nil {
				t.Fatal(err)
			}
			if res := reg.Invoke(context.Background(), name, sample, registry.Meta{}); res.Status != registry.StatusSuccess {
				t.Errorf("the Sample of %s's tooldef.New, %s, does not pass its schema: %s", name, sample, res.Result)
			}
		})
	}
}

// TestStrictNulls calls every tool as a model under strict function
// calling does: its sample's parameters given, every other one null. The
// nulls must read as parameters left out, never as arguments that break
// the schema. The arguments come from each tool's tooldef.Sample.
func TestStrictNulls(t *testing.T) {
	llm := agenttest.New(t, agenttest.Reply(agenttest.Final("done")))
	a := everyTool(t, llm.URL)
	if err := os.WriteFile(filepath.Join(a.cfg.Workspace, "a.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, d := range a.reg.Definitions() {
		name := d.Function.Name
		t.Run(name, func(t *testing.T) {
			tool, _ := a.reg.Tool(name)
			base := sampleOf(t, tool)
			var schema map[string]any
			var args any
			if err := json.Unmarshal(d.Function.Parameters, &schema); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(base, &args); err != nil {
				t.Fatal(err)
			}
			withNulls(schema, args)
			body, _ := json.Marshal(args)
			res := a.reg.Invoke(context.Background(), name, body, registry.Meta{SessionID: "strict"})
			if res.Error != nil && (res.Error.Code == toolerr.InvalidArguments || res.Error.Code == toolerr.MalformedArguments || strings.Contains(res.Error.Message, "null")) {
				t.Errorf("%s with nulls %s: %s", name, body, res.Result)
			}
		})
	}
}
