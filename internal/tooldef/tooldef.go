// Package tooldef declares a tool once: its name, its description for a
// model, the Go struct its arguments are decoded into, a sample of those
// arguments, and its title and hints for the clients that show them. The parameters JSON Schema a model is given is derived
// from that struct, so that the schema the registry validates against and
// the struct the tool reads cannot drift apart; the sample lets the tests
// that call every tool do so without a table of arguments per tool.
package tooldef

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/countbot/toolsvc/internal/registry"
)

// Def is the declared part of a tool. A tool embeds it, which gives the
// tool the Name, Description and Parameters methods of registry.Tool and
// the Annotations method of registry.Annotated, and writes Execute, which
// reads its arguments with Decode.
type Def[Args any] struct {
	name        string
	description string
	params      json.RawMessage
	sample      json.RawMessage
	annotations registry.Annotations
}

// Option adds to a declaration what New's arguments do not say.
type Option func(d *declaration) error

// declaration is what the options of one New call see and set.
type declaration struct {
	args        reflect.Type // the Args of New
	sample      json.RawMessage
	annotations registry.Annotations
	// titled and hinted: Title and Hints were given.
	titled, hinted bool
}

// Sample is one arguments object a model could send the tool, given as a
// value of the tool's Args: its required parameters, and an optional one
// only where a call needs it (spawn waits for its sub-agent). Models
// never see it. The tests that call every tool take their arguments from
// it instead of from a table per tool: internal/app's tests check that it
// passes the schema, then call the tool with it, and null for every
// parameter it leaves out, in a temporary workspace that holds a.txt (a
// line of text), accepting any result but an arguments error. So keep it
// quick and local: no real host, no long command. A value of another
// type than Args is a declaration mistake (New panics).
func Sample[A any](args A) Option {
	return func(d *declaration) error {
		if got := reflect.TypeFor[A](); got != d.args {
			return fmt.Errorf("the Sample is a %s, not the arguments struct %s", got, d.args)
		}
		b, err := json.Marshal(args)
		if err != nil {
			return fmt.Errorf("the Sample: %w", err)
		}
		d.sample = b
		return nil
	}
}

// Title is the tool's short name for people ("Read file"), which MCP
// clients show instead of its name. A tool that gives a Title gives its
// Hints too.
func Title(title string) Option {
	return func(d *declaration) error {
		if strings.TrimSpace(title) == "" {
			return fmt.Errorf("an empty Title")
		}
		d.annotations.Title, d.titled = title, true
		return nil
	}
}

// Hint is one thing every call of a tool does, or does not do, to its
// environment.
type Hint int

// The hints. Each must hold for every call the tool could be given: a
// client may run a read-only tool without asking, and ask before a
// destructive one.
const (
	// ReadOnly: a call changes nothing outside the service.
	ReadOnly Hint = iota + 1
	// Destructive: a call may change or delete what exists (never with
	// ReadOnly).
	Destructive
	// Idempotent: a second call with the same arguments has no further
	// effect.
	Idempotent
	// OpenWorld: a call may reach what is outside the service (the
	// internet, a chat platform, a model).
	OpenWorld
)

// Hints are the hints that hold for the tool, for the clients that show
// them or ask before a call (MCP's tool annotations); a hint left out is
// said not to hold, so Hints() with none says that a call changes what is
// here without destroying anything and reaches nothing outside. A tool
// that gives Hints gives its Title too.
func Hints(hints ...Hint) Option {
	return func(d *declaration) error {
		a := &d.annotations
		a.ReadOnly, a.Destructive, a.Idempotent, a.OpenWorld = false, false, false, false
		for _, h := range hints {
			switch h {
			case ReadOnly:
				a.ReadOnly = true
			case Destructive:
				a.Destructive = true
			case Idempotent:
				a.Idempotent = true
			case OpenWorld:
				a.OpenWorld = true
			default:
				return fmt.Errorf("no hint %d", h)
			}
		}
		if a.ReadOnly && a.Destructive {
			return fmt.Errorf("the Hints say ReadOnly and Destructive: a call that changes nothing destroys nothing")
		}
		d.hinted = true
		return nil
	}
}

// New declares the tool name, described to models by description, whose
// arguments are decoded into Args.
//
// The parameters schema is derived from Args (a struct) by jsonschema-go:
// one property per exported field, named by its json tag, described by its
// jsonschema tag; required unless the json tag says omitempty; no other
// property allowed. limits, when not nil, adds what a Go type cannot say:
// bounds, enums, and descriptions that quote Go constants.
//
// opts add the rest of the declaration; every built-in tool gives a
// Sample of its arguments, its Title and its Hints.
//
// A mistake in the declaration (a type jsonschema-go cannot describe, a
// limit on a property Args lacks or of the wrong kind, a sample of another
// type, a Title without Hints or Hints without a Title) panics: it is a programming error, and every test that builds the
// tool finds it.
func New[Args any](name, description string, limits func(p Prop), opts ...Option) Def[Args] {
	params, err := derive[Args](limits)
	if err != nil {
		panic(fmt.Sprintf("tool %s: %v", name, err))
	}
	d := declaration{args: reflect.TypeFor[Args]()}
	for _, o := range opts {
		if err := o(&d); err != nil {
			panic(fmt.Sprintf("tool %s: %v", name, err))
		}
	}
	// Apart, each would tell clients the other's zero value: a tool
	// without a title, or one that claims no hint holds.
	if d.titled != d.hinted {
		panic(fmt.Sprintf("tool %s: give its Title and its Hints together (tooldef.Title(...), tooldef.Hints(...))", name))
	}
	return Def[Args]{name: name, description: description, params: params, sample: d.sample, annotations: d.annotations}
}

// Name implements registry.Tool.
func (d Def[Args]) Name() string { return d.name }

// Description implements registry.Tool.
func (d Def[Args]) Description() string { return d.description }

// Parameters implements registry.Tool: the schema derived from Args. The
// bytes are the same on every call and in every process, because model
// prompt caches are keyed on them.
func (d Def[Args]) Parameters() json.RawMessage { return d.params }

// Sample returns the arguments of the declaration's Sample as JSON, or
// nil when it has none.
func (d Def[Args]) Sample() json.RawMessage { return d.sample }

// Annotations implements registry.Annotated: the Title and Hints of the
// declaration, or none.
func (d Def[Args]) Annotations() registry.Annotations { return d.annotations }

// Decode reads arguments that passed the schema into Args (see
// registry.Decode).
func (d Def[Args]) Decode(raw json.RawMessage) (Args, error) { return registry.Decode[Args](raw) }

func derive[Args any](limits func(p Prop)) (json.RawMessage, error) {
	if k := reflect.TypeFor[Args]().Kind(); k != reflect.Struct {
		return nil, fmt.Errorf("arguments must be a struct, not %s", k)
	}
	s, err := jsonschema.For[Args](nil)
	if err != nil {
		return nil, err
	}
	notNull(s)
	if limits != nil {
		var errs []string
		limits(Prop{s: s, at: "", errs: &errs})
		if len(errs) > 0 {
			return nil, fmt.Errorf("limits: %s", strings.Join(errs, "; "))
		}
	}
	return json.Marshal(s)
}

// notNull turns the ["null", T] that jsonschema-go gives pointers and
// slices into T: a model is asked to leave a parameter out, not to send
// null, and Go decodes an absent value and null alike.
func notNull(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	if len(s.Types) == 2 && s.Types[0] == "null" {
		s.Type, s.Types = s.Types[1], nil
	}
	for _, p := range s.Properties {
		notNull(p)
	}
	notNull(s.Items)
}

// Prop is one value of the schema being derived: the arguments object
// itself, a property, or an array's items. Its methods set the JSON
// Schema keyword they are named after and return the Prop, so that the
// limits of one property read as one line.
type Prop struct {
	s    *jsonschema.Schema
	at   string // for messages: "" is the arguments object, then "path", "agents[]"...
	errs *[]string
}

func (p Prop) fail(format string, a ...any) Prop {
	at := p.at
	if at == "" {
		at = "arguments"
	}
	*p.errs = append(*p.errs, at+": "+fmt.Sprintf(format, a...))
	return Prop{s: &jsonschema.Schema{}, at: p.at, errs: p.errs}
}

func (p Prop) want(kinds ...string) bool {
	for _, k := range kinds {
		if p.s.Type == k {
			return true
		}
	}
	return false
}

// Prop is the property name of an object.
func (p Prop) Prop(name string) Prop {
	at := name
	if p.at != "" {
		at = p.at + "." + name
	}
	s, ok := p.s.Properties[name]
	if !ok {
		return p.fail("no property %q (the struct has no field with that json name)", name)
	}
	return Prop{s: s, at: at, errs: p.errs}
}

// Items is the schema of an array's items.
func (p Prop) Items() Prop {
	if !p.want("array") || p.s.Items == nil {
		return p.fail("items of a %s", p.s.Type)
	}
	return Prop{s: p.s.Items, at: p.at + "[]", errs: p.errs}
}

// Description replaces the description (from the jsonschema tag), for one
// that quotes Go constants.
func (p Prop) Description(text string) Prop {
	p.s.Description = text
	return p
}

// MinLength is the fewest characters a string may have.
func (p Prop) MinLength(n int) Prop {
	if !p.want("string") {
		return p.fail("minLength on a %s", p.s.Type)
	}
	p.s.MinLength = &n
	return p
}

// MaxLength is the most characters a string may have.
func (p Prop) MaxLength(n int) Prop {
	if !p.want("string") {
		return p.fail("maxLength on a %s", p.s.Type)
	}
	p.s.MaxLength = &n
	return p
}

// Minimum is the least value of a number.
func (p Prop) Minimum(n int) Prop {
	if !p.want("integer", "number") {
		return p.fail("minimum on a %s", p.s.Type)
	}
	f := float64(n)
	p.s.Minimum = &f
	return p
}

// Maximum is the greatest value of a number.
func (p Prop) Maximum(n int) Prop {
	if !p.want("integer", "number") {
		return p.fail("maximum on a %s", p.s.Type)
	}
	f := float64(n)
	p.s.Maximum = &f
	return p
}

// MinItems is the fewest items an array may have.
func (p Prop) MinItems(n int) Prop {
	if !p.want("array") {
		return p.fail("minItems on a %s", p.s.Type)
	}
	p.s.MinItems = &n
	return p
}

// MaxItems is the most items an array may have.
func (p Prop) MaxItems(n int) Prop {
	if !p.want("array") {
		return p.fail("maxItems on a %s", p.s.Type)
	}
	p.s.MaxItems = &n
	return p
}

// Enum is the strings a string may be, in the order a model is shown them.
func (p Prop) Enum(values ...string) Prop {
	if !p.want("string") || len(values) == 0 {
		return p.fail("enum of %d values on a %s", len(values), p.s.Type)
	}
	p.s.Enum = make([]any, len(values))
	for i, v := range values {
		p.s.Enum[i] = v
	}
	return p
}
