package tracingtest

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Conventions are the OpenTelemetry semantic conventions' model (the
// YAML of ../testdata/semconv/model: MCP, GenAI and the registries and
// HTTP spans they build on), read to check spans against.
type Conventions struct {
	groups map[string]*group
	// attrs are the registry's attribute definitions, by name.
	attrs map[string]*attrDef
}

type group struct {
	ID         string    `yaml:"id"`
	Type       string    `yaml:"type"`
	SpanKind   string    `yaml:"span_kind"`
	Extends    string    `yaml:"extends"`
	Note       string    `yaml:"note"`
	Attributes []attrDef `yaml:"attributes"`
}

// attrDef is an attribute as a group lists it: defined (id, in a
// registry) or referenced (ref, in a span or attribute group).
type attrDef struct {
	ID               string    `yaml:"id"`
	Ref              string    `yaml:"ref"`
	Type             yaml.Node `yaml:"type"`
	RequirementLevel yaml.Node `yaml:"requirement_level"`
}

// OwnPrefix is the namespace of the service's own attributes, for what
// the conventions have no attribute for: allowed on any span, checked by
// nothing here.
const OwnPrefix = "toolsvc."

// ModelDir is the conventions' model folder in this repository.
func ModelDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata", "semconv", "model")
}

// LoadConventions reads every YAML file below dir.
func LoadConventions(dir string) (*Conventions, error) {
	c := &Conventions{groups: map[string]*group{}, attrs: map[string]*attrDef{}}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var f struct {
			Groups []*group `yaml:"groups"`
		}
		if err := yaml.Unmarshal(data, &f); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		for _, g := range f.Groups {
			c.groups[g.ID] = g
			for i := range g.Attributes {
				if a := &g.Attributes[i]; a.ID != "" {
					c.attrs[a.ID] = a
				}
			}
		}
		return nil
	})
	return c, err
}

// Violation is one way a span departs from the conventions.
type Violation struct {
	Span, Problem string
}

func (v Violation) String() string { return v.Span + ": " + v.Problem }

// Classify names the conventions' span group a span of the service is an
// instance of, by its kind and the attributes that say what it is; ""
// for the service's own spans (exec, screenshot), which no convention
// describes.
func Classify(s Span) string {
	_, mcp := s.Attrs["mcp.method.name"]
	_, http := s.Attrs["http.request.method"]
	op, _ := s.Attrs["gen_ai.operation.name"].(string)
	switch {
	case mcp && s.Kind == "SERVER":
		return "span.mcp.server"
	case mcp && s.Kind == "CLIENT":
		return "span.mcp.client"
	case http && s.Kind == "SERVER":
		return "span.http.server"
	case http && s.Kind == "CLIENT":
		return "span.http.client"
	case op == "execute_tool":
		return "span.gen_ai.execute_tool.internal"
	case op != "":
		// The generic inference span, not span.openai.inference.client:
		// that group's note requires gen_ai.provider.name "openai" but
		// its attribute list (openai_based and what it extends) omits
		// it, so no span could satisfy both.
		return "span.gen_ai.inference.client"
	}
	return ""
}

// Check returns every violation of span s: for a span of a convention's
// group, its kind, its name (the format the group's note gives), the
// attributes the group requires, and every attribute outside the
// service's own namespace being one the group lists; for any span, each
// attribute's type and, for an enum, its value, as the registry defines
// them.
func (c *Conventions) Check(s Span) []Violation {
	var out []Violation
	bad := func(format string, args ...any) {
		out = append(out, Violation{Span: s.Name + " [" + s.Kind + "]", Problem: fmt.Sprintf(format, args...)})
	}
	id := Classify(s)
	var listed map[string]string // attribute: requirement level
	if id != "" {
		g := c.groups[id]
		if g == nil {
			bad("no group %s in the conventions", id)
			return out
		}
		if !strings.EqualFold(g.SpanKind, s.Kind) {
			bad("kind %s, %s says %s", s.Kind, id, g.SpanKind)
		}
		if want, ok := c.spanName(g, s); !ok {
			bad("%s gives no span name format", id)
		} else if s.Name != want {
			bad("name %q, %s says %q", s.Name, id, want)
		}
		listed = c.resolve(id)
		for name, level := range listed {
			if _, ok := s.Attrs[name]; level == "required" && !ok {
				bad("lacks %s, required by %s", name, id)
			}
		}
	}
	keys := make([]string, 0, len(s.Attrs))
	for k := range s.Attrs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if strings.HasPrefix(k, OwnPrefix) {
			continue
		}
		def := c.attrs[k]
		if def == nil {
			bad("%s is no attribute of the conventions' registry", k)
			continue
		}
		if _, ok := listed[k]; id != "" && !ok {
			bad("%s is not an attribute of %s", k, id)
		}
		if p := checkValue(def, s.Attrs[k]); p != "" {
			bad("%s=%v: %s", k, s.Attrs[k], p)
		}
	}
	return out
}

// resolve returns the attributes of group id and of the groups it
// extends, each with its requirement level (the nearest group's).
func (c *Conventions) resolve(id string) map[string]string {
	out := map[string]string{}
	var chain []*group
	for g := c.groups[id]; g != nil; g = c.groups[g.Extends] {
		chain = append(chain, g)
		if g.Extends == "" {
			break
		}
	}
	for i := len(chain) - 1; i >= 0; i-- {
		for _, a := range chain[i].Attributes {
			name := a.Ref
			if name == "" {
				name = a.ID
			}
			level := "recommended"
			if a.RequirementLevel.Kind == yaml.ScalarNode {
				level = a.RequirementLevel.Value
			} else if a.RequirementLevel.Kind == yaml.MappingNode && len(a.RequirementLevel.Content) > 0 {
				level = a.RequirementLevel.Content[0].Value
			} else if prev, ok := out[name]; ok {
				level = prev
			}
			out[name] = level
		}
	}
	return out
}

// nameFormat finds the span name format in a group's note: the first
// `...` after "Span name".
var nameFormat = regexp.MustCompile("(?s)\\*\\*Span name\\*\\*[^`]*`([^`]+)`")

// httpNames are the HTTP conventions' span names, which their YAML leaves
// to the Markdown (docs/http/http-spans.md#name): the method and the
// route on servers, the method alone on clients without a URL template.
var httpNames = map[string]string{
	"span.http.server": "{http.request.method} {http.route}",
	"span.http.client": "{http.request.method}",
}

// spanName is the name the group's format gives s: each {attribute}
// replaced by its value, and MCP's {target} by the tool's or the
// prompt's name, or dropped without either.
func (c *Conventions) spanName(g *group, s Span) (string, bool) {
	format, ok := httpNames[g.ID]
	for cur := g; !ok && cur != nil; cur = c.groups[cur.Extends] {
		if m := nameFormat.FindStringSubmatch(cur.Note); m != nil {
			format, ok = m[1], true
		}
		if cur.Extends == "" {
			break
		}
	}
	if !ok {
		return "", false
	}
	target := ""
	for _, k := range []string{"gen_ai.tool.name", "gen_ai.prompt.name"} {
		if v, ok := s.Attrs[k]; ok && target == "" {
			target = fmt.Sprint(v)
		}
	}
	if target == "" {
		format = strings.ReplaceAll(format, " {target}", "")
	}
	format = strings.ReplaceAll(format, "{target}", target)
	return regexp.MustCompile(`\{[a-z_.]+\}`).ReplaceAllStringFunc(format, func(k string) string {
		return fmt.Sprint(s.Attrs[k[1:len(k)-1]])
	}), true
}

// checkValue checks v against the registry's definition of its attribute:
// its type, and for an enum one of its members' values. error.type's
// members are only its fallback (_OTHER): the conventions let each
// instrumentation name its own errors.
func checkValue(def *attrDef, v any) string {
	if def.Type.Kind == yaml.MappingNode {
		var e struct {
			Members []struct {
				Value any `yaml:"value"`
			} `yaml:"members"`
		}
		if err := def.Type.Decode(&e); err != nil {
			return err.Error()
		}
		if def.ID == "error.type" {
			return ""
		}
		for _, m := range e.Members {
			if fmt.Sprint(m.Value) == fmt.Sprint(v) {
				return ""
			}
		}
		return "not one of the enum's members"
	}
	want := def.Type.Value
	var ok bool
	switch v.(type) {
	case string:
		ok = want == "string" || want == "any" || strings.HasPrefix(want, "template[string")
	case int64:
		ok = want == "int" || want == "any"
	case float64:
		ok = want == "double" || want == "any"
	case bool:
		ok = want == "boolean" || want == "any"
	case []any:
		ok = strings.HasSuffix(want, "[]") || want == "any"
	}
	if !ok {
		return fmt.Sprintf("a %T, the registry says %s", v, want)
	}
	return ""
}
