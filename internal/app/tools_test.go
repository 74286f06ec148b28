package app

import (
	"context"
	"encoding/json"
	"io"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/countbot/toolsvc/internal/agent/agenttest"
	"github.com/countbot/toolsvc/internal/registry"
)

// everyTool builds the whole service with every optional tool switched on
// over stand-in dependencies: a model endpoint (llmURL; spawn,
// workflow_run, send_message), a webhook channel nobody listens on
// (send_media), a "browser" that is never started (screenshot) and exec
// without a sandbox. A test of every tool thus covers the optional ones,
// and fails when a row is left off here.
func everyTool(t *testing.T, llmURL string) *App {
	t.Helper()
	cfg := testConfig(t, map[string]string{
		"EXEC_SANDBOX": "none", "CHROME_PATH": "/bin/true",
		"LLM_BASE_URL": llmURL, "LLM_MODEL": "m", "XIAOZHI_CONVERSATION": "true",
		"WEBHOOK_URL": "http://127.0.0.1:9/hook",
	})
	a, err := New(cfg, Options{Out: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	for _, s := range toolsets() {
		for _, row := range s.tools {
			if why, off := a.tools.Off[row.name]; off {
				t.Fatalf("the tool of row %s is off (%s): give everyTool what it needs", row.name, why)
			}
		}
	}
	return a
}

// argsType returns the struct a tool decodes its arguments into: the
// result of the Decode method that tooldef.Def gives it.
func argsType(t registry.Tool) (reflect.Type, bool) {
	m := reflect.ValueOf(t).MethodByName("Decode")
	if !m.IsValid() {
		return nil, false
	}
	mt := m.Type()
	if mt.NumIn() != 1 || mt.In(0) != reflect.TypeFor[json.RawMessage]() || mt.NumOut() != 2 || mt.Out(0).Kind() != reflect.Struct {
		return nil, false
	}
	return mt.Out(0), true
}

func hasArgs(t registry.Tool) bool {
	_, ok := argsType(t)
	return ok
}

// TestEveryToolMatchesItsRow builds every tool of the rows and checks
// that each registered under its row's name and declares its arguments
// struct, so that the schema tests below see every tool.
func TestEveryToolMatchesItsRow(t *testing.T) {
	a := everyTool(t, "http://127.0.0.1:9/v1")
	var rows []string
	for _, s := range toolsets() {
		for _, row := range s.tools {
			rows = append(rows, row.name)
		}
	}
	slices.Sort(rows)
	if names := a.reg.Names(); !slices.Equal(names, rows) {
		t.Errorf("registered %q; the rows name %q", names, rows)
	}
	for _, name := range a.reg.Names() {
		if tool, _ := a.reg.Tool(name); !hasArgs(tool) {
			t.Errorf("%s does not declare its arguments with tooldef.New", name)
		}
	}
}

// TestRegisterRefusesMisnamedTool: a row whose tool has another name stops
// start-up, instead of a switch or an agent list naming a tool that is not
// there.
func TestRegisterRefusesMisnamedTool(t *testing.T) {
	a := everyTool(t, "http://127.0.0.1:9/v1")
	tool, _ := a.reg.Tool("read_file")
	reg := registry.New(registry.Options{})
	err := registerRow(reg, toolDef{name: "read_files"}, tool)
	if err == nil || !strings.Contains(err.Error(), `the toolsets row "read_files" built a tool named "read_file"`) {
		t.Errorf("error %v", err)
	}
	if len(reg.Names()) != 0 {
		t.Errorf("the misnamed tool was registered: %q", reg.Names())
	}
}

// TestSchemasMatchArgs holds every tool's parameters schema, as the
// registry serves it, to the Go struct its arguments are decoded into:
// each property decodes into a field of its type, each field is a
// property, a misspelt property is refused, and each property tells the
// model what it is for.
func TestSchemasMatchArgs(t *testing.T) {
	a := everyTool(t, "http://127.0.0.1:9/v1")
	for _, d := range a.reg.Definitions() {
		t.Run(d.Function.Name, func(t *testing.T) {
			tool, _ := a.reg.Tool(d.Function.Name)
			typ, ok := argsType(tool)
			if !ok {
				t.Fatal("no arguments struct")
			}
			var schema map[string]any
			if err := json.Unmarshal(d.Function.Parameters, &schema); err != nil {
				t.Fatal(err)
			}
			for _, p := range compareSchema("", schema, typ) {
				t.Error(p)
			}
			for _, p := range checkDescribed("", schema) {
				t.Error(p)
			}
			if ap, ok := schema["additionalProperties"].(bool); !ok || ap {
				t.Errorf("additionalProperties is %v; want false, so that a misspelt property is reported", schema["additionalProperties"])
			}
			props, _ := schema["properties"].(map[string]any)
			for name, p := range props {
				ps, _ := p.(map[string]any)
				args, _ := json.Marshal(map[string]any{name: sample(ps)})
				v := reflect.New(typ)
				if err := json.Unmarshal(args, v.Interface()); err != nil {
					t.Errorf("%s: %s does not decode: %v", name, args, err)
				} else if v.Elem().IsZero() {
					t.Errorf("%s: %s decodes into nothing", name, args)
				}
			}
		})
	}
}

// TestAgentsGetTheToolsTheirRowsAllow runs a sub-agent (spawn) and the
// conversation agent (send_message) over a model stand-in and reads which
// tools the model was offered: those whose rows allow it, and no other.
func TestAgentsGetTheToolsTheirRowsAllow(t *testing.T) {
	llm := agenttest.New(t, agenttest.Reply(agenttest.Final("done")))
	a := everyTool(t, llm.URL)
	for _, tc := range []struct {
		tool, args string
		want       []string
	}{
		{"spawn", `{"task":"t","wait":true}`, SubagentTools()},
		{"send_message", `{"text":"hello"}`, ConversationTools()},
	} {
		before := len(llm.Requests())
		res := a.reg.Invoke(context.Background(), tc.tool, []byte(tc.args), registry.Meta{SessionID: "s1"})
		if res.Status != registry.StatusSuccess {
			t.Fatalf("%s: %+v", tc.tool, res)
		}
		reqs := llm.Requests()
		if len(reqs) != before+1 {
			t.Fatalf("%s: %d model requests, want 1", tc.tool, len(reqs)-before)
		}
		got := reqs[before].ToolNames()
		want := slices.Clone(tc.want)
		sort.Strings(got)
		sort.Strings(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s's agent was offered %q; the rows allow %q", tc.tool, got, want)
		}
	}
	// The rows of the tools that start agents or reach the user's chats
	// give them to no agent.
	for _, set := range []string{Agents, Channels} {
		for _, s := range Toolsets() {
			if s.Name != set {
				continue
			}
			for _, tool := range s.Tools {
				if slices.Contains(ConversationTools(), tool) || slices.Contains(SubagentTools(), tool) {
					t.Errorf("an agent may use %s", tool)
				}
			}
		}
	}
}

// TestCompareSchemaFindsMismatches shows that the comparison reports each
// kind of drift, so that a passing TestSchemasMatchArgs means something.
func TestCompareSchemaFindsMismatches(t *testing.T) {
	type inner struct {
		A string `json:"a"`
	}
	type args struct {
		Name   string   `json:"name"`
		Count  *int     `json:"count"`
		Ratio  float64  `json:"ratio"`
		On     bool     `json:"on"`
		Items  []string `json:"items"`
		Nested inner    `json:"nested"`
		Skip   string   `json:"-"`
	}
	good := `{"type":"object","properties":{
		"name":{"type":"string"},"count":{"type":"integer"},"ratio":{"type":"number"},"on":{"type":"boolean"},
		"items":{"type":"array","items":{"type":"string"}},
		"nested":{"type":"object","properties":{"a":{"type":"string"}}}}}`
	tests := []struct {
		name, schema string
		want         []string // substrings of the problems, in order
	}{
		{"match", good, nil},
		{"property without field", strings.Replace(good, `"on":{"type":"boolean"}`, `"on":{"type":"boolean"},"extra":{"type":"string"}`, 1),
			[]string{"property extra has no field"}},
		{"field without property", strings.Replace(good, `"on":{"type":"boolean"},`, ``, 1),
			[]string{"field On (json on) has no property"}},
		{"integer for a string", strings.Replace(good, `"name":{"type":"string"}`, `"name":{"type":"integer"}`, 1),
			[]string{"name: schema type integer, Go type string"}},
		{"number for an int", strings.Replace(good, `"count":{"type":"integer"}`, `"count":{"type":"number"}`, 1),
			[]string{"count: schema type number, Go type int"}},
		{"item type", strings.Replace(good, `"items":{"type":"string"}`, `"items":{"type":"boolean"}`, 1),
			[]string{"items[]: schema type boolean, Go type string"}},
		{"nested property", strings.Replace(good, `"a":{"type":"string"}`, `"b":{"type":"string"}`, 1),
			[]string{"nested: field A (json a) has no property", "property nested.b has no field"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var schema map[string]any
			if err := json.Unmarshal([]byte(tt.schema), &schema); err != nil {
				t.Fatal(err)
			}
			got := compareSchema("", schema, reflect.TypeOf(args{}))
			if len(got) != len(tt.want) {
				t.Fatalf("problems %q; want %d matching %q", got, len(tt.want), tt.want)
			}
			for i := range got {
				if !strings.Contains(got[i], tt.want[i]) {
					t.Errorf("problem %d is %q; want it to contain %q", i, got[i], tt.want[i])
				}
			}
		})
	}
}

// compareSchema returns the differences between the schema of one value and
// the Go type it is decoded into, sorted. at names the value ("" for the
// arguments object).
func compareSchema(at string, schema map[string]any, typ reflect.Type) []string {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	where := func(name string) string {
		if at == "" {
			return name
		}
		return at + "." + name
	}
	prefix := ""
	if at != "" {
		prefix = at + ": "
	}
	kind, _ := schema["type"].(string)
	if !kindMatches(kind, typ) {
		return []string{prefix + "schema type " + kind + ", Go type " + typ.String()}
	}
	var problems []string
	switch kind {
	case "array":
		if items, ok := schema["items"].(map[string]any); ok {
			problems = append(problems, compareSchema(at+"[]", items, typ.Elem())...)
		}
	case "object":
		props, _ := schema["properties"].(map[string]any)
		if typ.Kind() != reflect.Struct {
			break // a map takes any property
		}
		fields := map[string]reflect.StructField{}
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" || !f.IsExported() {
				continue
			}
			if name == "" {
				problems = append(problems, prefix+"field "+f.Name+" has no json tag")
				continue
			}
			fields[name] = f
			if _, ok := props[name]; !ok {
				problems = append(problems, prefix+"field "+f.Name+" (json "+name+") has no property")
			}
		}
		for name, p := range props {
			f, ok := fields[name]
			if !ok {
				problems = append(problems, "property "+where(name)+" has no field")
				continue
			}
			ps, _ := p.(map[string]any)
			problems = append(problems, compareSchema(where(name), ps, f.Type)...)
		}
	}
	sort.Strings(problems)
	return problems
}

// kindMatches reports whether a JSON Schema type decodes into a Go type.
func kindMatches(schemaType string, t reflect.Type) bool {
	switch k := t.Kind(); schemaType {
	case "string":
		return k == reflect.String
	case "integer":
		return k >= reflect.Int && k <= reflect.Uint64
	case "number":
		return k == reflect.Float32 || k == reflect.Float64
	case "boolean":
		return k == reflect.Bool
	case "array":
		return k == reflect.Slice || k == reflect.Array
	case "object":
		return k == reflect.Struct || k == reflect.Map && t.Key().Kind() == reflect.String
	}
	return false
}

// checkDescribed returns the properties, at any depth, without a
// description: a model guesses what they are for.
func checkDescribed(at string, schema map[string]any) []string {
	var problems []string
	props, _ := schema["properties"].(map[string]any)
	for name, p := range props {
		ps, _ := p.(map[string]any)
		where := name
		if at != "" {
			where = at + "." + name
		}
		if d, _ := ps["description"].(string); strings.TrimSpace(d) == "" {
			problems = append(problems, where+" has no description (a jsonschema tag on its field)")
		}
		problems = append(problems, checkDescribed(where, ps)...)
		if items, ok := ps["items"].(map[string]any); ok {
			problems = append(problems, checkDescribed(where+"[]", items)...)
		}
	}
	sort.Strings(problems)
	return problems
}

// sample is a value of a property's type, not a zero value, so that
// decoding it shows which field it reached.
func sample(schema map[string]any) any {
	if enum, ok := schema["enum"].([]any); ok && len(enum) > 0 {
		return enum[0]
	}
	switch schema["type"] {
	case "string":
		return "x"
	case "integer", "number":
		if m, ok := schema["minimum"].(float64); ok && m != 0 {
			return m
		}
		return 1
	case "boolean":
		return true
	case "array":
		items, _ := schema["items"].(map[string]any)
		return []any{sample(items)}
	case "object":
		out := map[string]any{}
		props, _ := schema["properties"].(map[string]any)
		for name, p := range props {
			ps, _ := p.(map[string]any)
			out[name] = sample(ps)
		}
		return out
	}
	return nil
}

// TestRowsHaveHints: every built-in tool, as registered, has a title and
// hints that agree with one another (a read-only tool destroys nothing):
// MCP clients show the title, and may run a read-only tool without asking.
func TestRowsHaveHints(t *testing.T) {
	a := everyTool(t, "http://127.0.0.1:9/v1")
	for _, def := range a.reg.Definitions() {
		h, name := def.Annotations, def.Function.Name
		switch {
		case h.Title == "":
			t.Errorf("%s has no title or hints: add tooldef.Title(\"...\") and tooldef.Hints(...) (those of tooldef.ReadOnly, Destructive, Idempotent, OpenWorld that hold for every call) to its tooldef.New", name)
		case h.ReadOnly && h.Destructive:
			t.Errorf("%s: hints %+v: a read-only tool destroys nothing", name, h)
		}
	}
}
