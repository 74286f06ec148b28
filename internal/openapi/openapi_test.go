package openapi

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/countbot/toolsvc/internal/registry"
)

const spec = `
openapi: 3.0.3
info: {title: t, version: 0.0.0}
paths:
  /healthz:
    get:
      operationId: healthz
      responses: {"200": {description: ok}}
`

func def(name string) registry.Definition {
	return registry.Definition{Type: "function", Function: registry.FunctionSchema{
		Name: name, Description: "Does a thing. Then more.", Parameters: json.RawMessage(`{"type":"object"}`)}}
}

func TestBuild(t *testing.T) {
	out, err := Build([]byte(spec), []registry.Definition{def("do_it")}, "v9", false)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Info  struct{ Version string }
		Paths map[string]map[string]struct {
			OperationID string `json:"operationId"`
			Summary     string
		}
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	op := doc.Paths["/tools/do_it/invoke"]["post"]
	if doc.Info.Version != "v9" || op.OperationID != "do_it" || op.Summary != "Does a thing." || doc.Paths["/healthz"] == nil {
		t.Errorf("document: %s", out)
	}
	only, err := Build([]byte(spec), []registry.Definition{def("do_it")}, "", true)
	if err != nil || strings.Contains(string(only), "/healthz") || !strings.Contains(string(only), "/tools/do_it/invoke") {
		t.Errorf("tools only: %v %s", err, only)
	}
	// A tool named like an operation of the contract would make two
	// operations with one ID: refused.
	if _, err := Build([]byte(spec), []registry.Definition{def("healthz")}, "", false); err == nil {
		t.Error("a tool named like a contract operation was accepted")
	}
}

func TestSummary(t *testing.T) {
	for in, want := range map[string]string{
		"Read a file. Then more.":       "Read a file.",
		"Uses e.g. a file.name here.":   "Uses e.g. a file.name here.",
		"No full stop":                  "No full stop",
		strings.Repeat("word ", 40):     strings.TrimSpace(strings.Repeat("word ", 40))[:119] + "…",
		"  Trimmed first.  And second.": "Trimmed first.",
	} {
		if got := Summary(in); got != want {
			t.Errorf("Summary(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestToolOperationsTakeTheGenericHeaders: each tool's operation states
// the header parameters of the generic invoke operation, given inline or
// by reference to the components (kept as the reference), and not its
// path parameter.
func TestToolOperationsTakeTheGenericHeaders(t *testing.T) {
	const generic = `
openapi: 3.0.3
info: {title: t, version: 0.0.0}
paths:
  /tools/{name}/invoke:
    post:
      operationId: invoke
      parameters:
        - $ref: "#/components/parameters/ToolName"
        - $ref: "#/components/parameters/SessionID"
        - {name: X-Inline, in: header, schema: {type: string}}
      responses: {"200": {description: ok}}
components:
  parameters:
    ToolName: {name: name, in: path, required: true, schema: {type: string}}
    SessionID: {name: X-Session-ID, in: header, schema: {type: string}}
`
	out, err := Build([]byte(generic), []registry.Definition{def("do_it")}, "", true)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]struct {
			Parameters []map[string]any
		}
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range doc.Paths["/tools/do_it/invoke"]["post"].Parameters {
		if ref, ok := p["$ref"].(string); ok {
			got = append(got, ref)
		} else {
			got = append(got, p["name"].(string))
		}
	}
	if want := []string{"#/components/parameters/SessionID", "X-Inline"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("the tool's parameters are %q, want %q", got, want)
	}
	if !strings.Contains(string(out), `"SessionID":{`) {
		t.Errorf("the tools-only document lost the components its references need: %s", out)
	}
}
