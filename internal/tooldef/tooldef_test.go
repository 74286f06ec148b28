package tooldef

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/countbot/toolsvc/internal/registry"
)

type item struct {
	Name string   `json:"name" jsonschema:"the item's name"`
	Tags []string `json:"tags,omitempty" jsonschema:"labels"`
}

type exampleArgs struct {
	Path    string  `json:"path" jsonschema:"a file"`
	Mode    string  `json:"mode,omitempty" jsonschema:"how"`
	Depth   *int    `json:"depth,omitempty" jsonschema:"how deep"`
	Numbers *bool   `json:"numbers,omitempty" jsonschema:"show them"`
	Items   []item  `json:"items,omitempty" jsonschema:"the items"`
	Ratio   float64 `json:"ratio,omitempty"`
}

func exampleLimits(p Prop) {
	p.Prop("path").MinLength(1).MaxLength(4096)
	p.Prop("mode").Enum("overwrite", "append")
	p.Prop("depth").Minimum(-1).Maximum(10)
	p.Prop("items").MinItems(1).MaxItems(3).Items().Prop("tags").MaxItems(2).Items().MaxLength(20)
	p.Prop("ratio").Description("between 0 and 1 (default 0.5)")
}

// TestDerivedSchema pins what a declaration gives a model: properties in
// field order, required unless omitempty, types without null, limits and
// descriptions where they were declared, no other property allowed, at
// every depth.
func TestDerivedSchema(t *testing.T) {
	d := New[exampleArgs]("example", "An example.", exampleLimits)
	want := `{"type":"object","properties":{` +
		`"path":{"type":"string","description":"a file","minLength":1,"maxLength":4096},` +
		`"mode":{"type":"string","description":"how","enum":["overwrite","append"]},` +
		`"depth":{"type":"integer","description":"how deep","minimum":-1,"maximum":10},` +
		`"numbers":{"type":"boolean","description":"show them"},` +
		`"items":{"type":"array","items":{"type":"object","properties":{` +
		`"name":{"type":"string","description":"the item's name"},` +
		`"tags":{"type":"array","items":{"type":"string","maxLength":20},"description":"labels","maxItems":2}},` +
		`"required":["name"],"additionalProperties":false},"description":"the items","minItems":1,"maxItems":3},` +
		`"ratio":{"type":"number","description":"between 0 and 1 (default 0.5)"}},` +
		`"required":["path"],"additionalProperties":false}`
	if got := string(d.Parameters()); got != want {
		t.Errorf("schema\n got %s\nwant %s", got, want)
	}
	if d.Name() != "example" || d.Description() != "An example." {
		t.Errorf("declared %q %q", d.Name(), d.Description())
	}
	// The registry takes the schema: it compiles.
	reg := registry.New(registry.Options{})
	if err := reg.Register(exampleTool{d}); err != nil {
		t.Fatal(err)
	}
}

// TestDerivedSchemaIsStable: the bytes are the same for every declaration
// of the same tool, since prompt caches are keyed on them.
func TestDerivedSchemaIsStable(t *testing.T) {
	first := New[exampleArgs]("example", "An example.", exampleLimits).Parameters()
	for range 20 {
		if got := New[exampleArgs]("example", "An example.", exampleLimits).Parameters(); string(got) != string(first) {
			t.Fatalf("schema changed between declarations:\n%s\n%s", first, got)
		}
	}
}

func TestDecode(t *testing.T) {
	d := New[exampleArgs]("example", "An example.", exampleLimits)
	args, err := d.Decode(json.RawMessage(`{"path":"a.txt","depth":3,"items":[{"name":"n","tags":["x"]}]}`))
	if err != nil || args.Path != "a.txt" || *args.Depth != 3 || args.Items[0].Tags[0] != "x" {
		t.Errorf("Decode = %+v, %v", args, err)
	}
	if _, err := d.Decode(json.RawMessage(`{"depth":"deep"}`)); err == nil || !strings.Contains(err.Error(), "depth should be integer, not string") {
		t.Errorf("Decode of a string for an integer: %v", err)
	}
}

// TestDeclarationMistakes: each mistake in a declaration panics at once
// with a message naming the tool and the property.
func TestDeclarationMistakes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		limits func(p Prop)
		want   string
	}{
		{"unknown property", func(p Prop) { p.Prop("pth").MaxLength(1) }, `arguments: no property "pth"`},
		{"length of a number", func(p Prop) { p.Prop("depth").MaxLength(1) }, "depth: maxLength on a integer"},
		{"minimum of a string", func(p Prop) { p.Prop("path").Minimum(1) }, "path: minimum on a string"},
		{"items of a string", func(p Prop) { p.Prop("path").Items() }, "path: items of a string"},
		{"enum of a number", func(p Prop) { p.Prop("ratio").Enum("a") }, "ratio: enum of 1 values on a number"},
		{"nested unknown", func(p Prop) { p.Prop("items").Items().Prop("nme") }, `items[]: no property "nme"`},
		{"items count of an object", func(p Prop) { p.Prop("items").Items().MaxItems(1) }, "items[]: maxItems on a object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				msg, _ := recover().(string)
				if !strings.HasPrefix(msg, "tool example: limits: ") || !strings.Contains(msg, tc.want) {
					t.Errorf("panic %q; want one naming %q", msg, tc.want)
				}
			}()
			New[exampleArgs]("example", "An example.", tc.limits)
		})
	}
	t.Run("not a struct", func(t *testing.T) {
		defer func() {
			if msg, _ := recover().(string); !strings.Contains(msg, "arguments must be a struct, not string") {
				t.Errorf("panic %q", msg)
			}
		}()
		New[string]("example", "An example.", nil)
	})
}

// TestSample: the sample is the arguments value as JSON, the way a model
// sends it (left-out optional parameters absent); a declaration without
// one has none; and a sample of another type than the arguments struct is
// a declaration mistake.
func TestSample(t *testing.T) {
	depth := 2
	d := New[exampleArgs]("example", "An example.", exampleLimits,
		Sample(exampleArgs{Path: "a.txt", Depth: &depth}))
	if got, want := string(d.Sample()), `{"path":"a.txt","depth":2}`; got != want {
		t.Errorf("Sample() = %s, want %s", got, want)
	}
	if got := New[exampleArgs]("example", "An example.", exampleLimits).Sample(); got != nil {
		t.Errorf("Sample() without a Sample = %s, want nil", got)
	}
	defer func() {
		msg, _ := recover().(string)
		if want := "tool example: the Sample is a tooldef.item, not the arguments struct tooldef.exampleArgs"; msg != want {
			t.Errorf("panic %q, want %q", msg, want)
		}
	}()
	New[exampleArgs]("example", "An example.", exampleLimits, Sample(item{Name: "x"}))
}

// TestAnnotations: the Title and Hints reach the registry as the tool's
// annotations, and the mistakes in them (one without the other, an empty
// title, a read-only tool that destroys) panic with what to give.
func TestAnnotations(t *testing.T) {
	d := New[exampleArgs]("example", "An example.", nil, Title("Example"), Hints(ReadOnly, Idempotent, OpenWorld))
	want := registry.Annotations{Title: "Example", ReadOnly: true, Idempotent: true, OpenWorld: true}
	if got := d.Annotations(); got != want {
		t.Errorf("Annotations() = %+v, want %+v", got, want)
	}
	if got := New[exampleArgs]("example", "An example.", nil, Title("Memory"), Hints()).Annotations(); got != (registry.Annotations{Title: "Memory"}) {
		t.Errorf("Annotations() with Hints() = %+v", got)
	}
	if got := New[exampleArgs]("example", "An example.", nil).Annotations(); got != (registry.Annotations{}) {
		t.Errorf("Annotations() without Title and Hints = %+v", got)
	}
	reg := registry.New(registry.Options{})
	if err := reg.Register(exampleTool{d}); err != nil {
		t.Fatal(err)
	}
	if got := reg.Definitions()[0].Annotations; got != want {
		t.Errorf("registered annotations %+v, want %+v", got, want)
	}
	for _, tc := range []struct {
		name string
		opts []Option
		want string
	}{
		{"title alone", []Option{Title("Example")}, "give its Title and its Hints together"},
		{"hints alone", []Option{Hints(ReadOnly)}, "give its Title and its Hints together"},
		{"empty title", []Option{Title(" "), Hints()}, "an empty Title"},
		{"read-only and destructive", []Option{Title("Example"), Hints(ReadOnly, Destructive)}, "ReadOnly and Destructive"},
		{"unknown hint", []Option{Title("Example"), Hints(Hint(0))}, "no hint 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if msg, _ := recover().(string); !strings.HasPrefix(msg, "tool example: ") || !strings.Contains(msg, tc.want) {
					t.Errorf("panic %q; want one naming %q", msg, tc.want)
				}
			}()
			New[exampleArgs]("example", "An example.", nil, tc.opts...)
		})
	}
}

type exampleTool struct{ Def[exampleArgs] }

func (exampleTool) Execute(context.Context, json.RawMessage) (string, error) { return "", nil }
