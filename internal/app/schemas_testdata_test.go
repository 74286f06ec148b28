package app

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"testing"
)

var update = flag.Bool("update", false, "rewrite ../registry/testdata/tool_schemas.json from the tools' schemas")

// TestToolSchemasTestdata keeps the registry's copy of every built-in
// tool's parameters schema (its tests of validation run over them)
// the same as the tools declare them. Rewrite it with -update.
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
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the tools' schemas; rewrite it with go test ./internal/app -run ToolSchemasTestdata -update", path)
	}
}
