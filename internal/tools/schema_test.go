package tools

import (
	"encoding/json"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/browser"
	"github.com/countbot/toolsvc/internal/channels"
	"github.com/countbot/toolsvc/internal/config"
	"github.com/countbot/toolsvc/internal/desktop"
	"github.com/countbot/toolsvc/internal/extract"
	"github.com/countbot/toolsvc/internal/memory"
	"github.com/countbot/toolsvc/internal/netguard"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/sandbox"
	"github.com/countbot/toolsvc/internal/shellguard"
	"github.com/countbot/toolsvc/internal/workspace"
)

// toolArgs maps every tool the service registers to the struct its Execute
// decodes the arguments into, and to the properties it cannot do without.
// A property is required when the tool has no default for it: an absent
// path, command or action leaves nothing to act on. Properties required only
// together with others (path or paths, content when action=write) are
// registry rules, stated in the description, not schema requirements.
// A new tool gets a row here; TestSchemasMatchArgs fails until it has one.
var toolArgs = map[string]struct {
	args     any
	required []string
}{
	"read_file":   {readFileArgs{}, nil},                          // exactly one of path and paths: a rule
	"write_file":  {writeFileArgs{}, []string{"content", "path"}}, // "" is content, so absent is not empty
	"edit_file":   {editFileArgs{}, []string{"new_str", "old_str", "path"}},
	"list_dir":    {listDirArgs{}, nil},                 // path defaults to the workspace root
	"file_search": {fileSearchArgs{}, []string{"path"}}, // the folder to search is always named
	"exec":        {execArgs{}, []string{"command"}},    // working_dir and timeout have defaults
	"web_fetch":   {webFetchArgs{}, nil},                // exactly one of url and urls: a rule
	"screenshot":  {screenshotArgs{}, nil},              // type follows from url; desktop otherwise
	"memory":      {memoryArgs{}, []string{"action"}},   // content and keywords: rules per action
	"send_media":  {sendMediaArgs{}, []string{"file_paths"}},
}

// registeredTools builds every tool the service has (internal/app
// registers them from the same constructors) and returns their parameter
// schemas by name. The schemas do not depend on the tools' dependencies,
// so the tools are built over a workspace and little else.
func registeredTools(t *testing.T) map[string]json.RawMessage {
	t.Helper()
	ws, err := workspace.Open(t.TempDir(), true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	guard, err := netguard.New(netguard.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := sandbox.New(sandbox.Options{Mode: sandbox.None, Workspace: ws.Dir()})
	if err != nil {
		t.Fatal(err)
	}
	sg, err := shellguard.New(shellguard.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ex := NewExec(ws, ExecOptions{Guard: sg, Sandbox: sb})
	t.Cleanup(ex.Close)
	list := []registry.Tool{
		NewReadFile(ws, 1000, nil),
		NewWriteFile(ws),
		NewEditFile(ws),
		NewListDir(ws, 100),
		NewFileSearch(ws, 1, time.Second),
		ex,
		NewWebFetch(guard, extract.New(extract.Options{}), WebFetchOptions{}),
		NewScreenshot(ws, browser.New(browser.Options{}), desktop.New(), ScreenshotOptions{}),
		NewMemory(memory.New(ws.Root(), memory.Options{Root: ws.Current})),
		// A channel, so that send_media is built too.
		NewSendMedia(ws, channels.FromConfig(config.Config{WebhookURL: config.SecretAccounts{{Name: "default", Value: "http://127.0.0.1:9/hook"}}}, channels.Options{}), zerolog.Nop()),
	}
	reg := registry.New(registry.Options{Log: zerolog.Nop()})
	for _, tool := range list {
		if err := reg.Register(tool); err != nil {
			t.Fatal(err)
		}
	}
	out := map[string]json.RawMessage{}
	for _, d := range reg.Definitions() {
		out[d.Function.Name] = d.Function.Parameters
	}
	return out
}

// TestSchemasMatchArgs holds every tool's JSON Schema to the Go struct its
// arguments are decoded into: a property the struct lacks would be
// validated and then silently dropped, a field the schema lacks could never
// be set (additionalProperties is false), and a type that differs would
// pass validation and fail decoding.
func TestSchemasMatchArgs(t *testing.T) {
	schemas := registeredTools(t)
	for name := range toolArgs {
		if _, ok := schemas[name]; !ok {
			t.Errorf("toolArgs has %s, which the service does not register", name)
		}
	}
	for name, raw := range schemas {
		t.Run(name, func(t *testing.T) {
			row, ok := toolArgs[name]
			if !ok {
				t.Fatalf("no row in toolArgs for %s: add its arguments struct and required properties", name)
			}
			var schema map[string]any
			if err := json.Unmarshal(raw, &schema); err != nil {
				t.Fatal(err)
			}
			for _, p := range compareSchema("", schema, reflect.TypeOf(row.args)) {
				t.Error(p)
			}
			if got, want := requiredOf(schema), sorted(row.required); !slices.Equal(got, want) {
				t.Errorf("schema requires %q; the tool treats %q as required", got, want)
			}
			if ap, ok := schema["additionalProperties"].(bool); !ok || ap {
				t.Errorf("additionalProperties is %v; want false, so that a misspelt property is reported", schema["additionalProperties"])
			}
		})
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

func requiredOf(schema map[string]any) []string {
	list, _ := schema["required"].([]any)
	out := make([]string, 0, len(list))
	for _, v := range list {
		s, _ := v.(string)
		out = append(out, s)
	}
	return sorted(out)
}

func sorted(s []string) []string {
	out := append([]string{}, s...)
	sort.Strings(out)
	return out
}
