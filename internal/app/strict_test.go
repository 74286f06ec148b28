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

// TestStrictNulls calls every tool as a model under strict function
// calling does: the required parameters given, every optional one null.
// The nulls must read as parameters left out, never as arguments that
// break the schema.
func TestStrictNulls(t *testing.T) {
	llm := agenttest.New(t, agenttest.Reply(agenttest.Final("done")))
	a := everyTool(t, llm.URL)
	if err := os.WriteFile(filepath.Join(a.cfg.Workspace, "a.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	required := map[string]string{
		"read_file":    `{"path":"a.txt"}`,
		"write_file":   `{"path":"b.txt","content":"x"}`,
		"edit_file":    `{"path":"a.txt","old_str":"hello","new_str":"hi"}`,
		"list_dir":     `{}`,
		"file_search":  `{"path":"."}`,
		"exec":         `{"command":"true"}`,
		"web_fetch":    `{"url":"http://127.0.0.1:9/"}`,
		"screenshot":   `{"url":"http://127.0.0.1:9/"}`,
		"memory":       `{"action":"read"}`,
		"spawn":        `{"task":"t","wait":true}`,
		"workflow_run": `{"goal":"g","agents":[{"task":"t"}]}`,
		"send_message": `{"text":"hello"}`,
		"send_media":   `{"file_paths":["a.txt"]}`,
	}
	for _, d := range a.reg.Definitions() {
		name := d.Function.Name
		t.Run(name, func(t *testing.T) {
			base, ok := required[name]
			if !ok {
				t.Fatalf("no arguments for %s: add its required parameters to the table", name)
			}
			var schema map[string]any
			var args any
			if err := json.Unmarshal(d.Function.Parameters, &schema); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(base), &args); err != nil {
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
