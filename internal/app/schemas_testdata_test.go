package app

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite ../registry/testdata/tool_schemas.json from the tools' schemas")

// regenerateSchemas is the command that rewrites the schemas file; the
// failure message and docs/architecture.md's "Adding a tool" give it.
const regenerateSchemas = "go test ./internal/app -run TestToolSchemasTestdata -update"

// TestToolSchemasTestdata keeps the registry's copy of every built-in
// tool's parameters schema (its tests of validation run over them)
// the same as the tools declare them, byte for byte: model prompt caches
// are keyed on these bytes, so a schema that changes by accident shows
// here. A new tool is added to it with the -update flag.
func TestToolSchemasTestdata(t *testing.T) {
	a := everyTool(t, "http://127.0.0.1:9/v1")
	schemas := map[string]json.RawMessage{}
	for _, d := range a.reg.Definitions() {
		schemas[d.Function.Name] = d.Function.Parameters
	}
	got, err := json.MarshalIndent(schemas, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := "../registry/testdata/tool_schemas.json"
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v; write it with %s", err, regenerateSchemas)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the tools' schemas (%s); if that is intended, rewrite it with %s",
			path, schemaChanges(schemas, want), regenerateSchemas)
	}
}

// schemaChanges says which tools of the file are new, changed or gone.
func schemaChanges(got map[string]json.RawMessage, file []byte) string {
	var old map[string]json.RawMessage
	if err := json.Unmarshal(file, &old); err != nil {
		return "the file is not JSON: " + err.Error()
	}
	var changes []string
	for name, s := range got {
		var was bytes.Buffer
		switch o, ok := old[name]; {
		case !ok:
			changes = append(changes, name+" is new")
		case json.Compact(&was, o) != nil || !bytes.Equal(was.Bytes(), s):
			changes = append(changes, name+"'s schema changed")
		}
	}
	for name := range old {
		if _, ok := got[name]; !ok {
			changes = append(changes, name+" is gone")
		}
	}
	if len(changes) == 0 {
		return "its layout differs"
	}
	slices.Sort(changes)
	return strings.Join(changes, ", ")
}
