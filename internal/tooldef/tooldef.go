// Package tooldef declares a tool once: its name, its description for a
// model, and the Go struct its arguments are decoded into. The parameters
// JSON Schema a model is given is derived from that struct, so that the
// schema the registry validates against and the struct the tool reads
// cannot drift apart.
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
// tool the Name, Description and Parameters methods of registry.Tool, and
// writes Execute, which reads its arguments with Decode.
type Def[Args any] struct {
	name        string
	description string
	params      json.RawMessage
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
// A mistake in the declaration (a type jsonschema-go cannot describe, a
// limit on a property Args lacks or of the wrong kind) panics: it is a
// programming error, and every test that builds the tool finds it.
func New[Args any](name, description string, limits func(p Prop)) Def[Args] {
	params, err := derive[Args](limits)
	if err != nil {
		panic(fmt.Sprintf("tool %s: %v", name, err))
	}
	return Def[Args]{name: name, description: description, params: params}
}

// Name implements registry.Tool.
func (d Def[Args]) Name() string { return d.name }

// Description implements registry.Tool.
func (d Def[Args]) Description() string { return d.description }

// Parameters implements registry.Tool: the schema derived from Args. The
// bytes are the same on every call and in every process, because model
// prompt caches are keyed on them.
func (d Def[Args]) Parameters() json.RawMessage { return d.params }

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
