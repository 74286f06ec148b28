// Package openapi builds the service's OpenAPI document from the hand-kept
// contract (api/openapi.yaml) and the registry: the contract's routes as
// written, plus one literal path per tool, /tools/<name>/invoke, whose
// operationId is the tool's name and whose request body is the tool's
// schema. OpenAPI tool-server clients (Open WebUI and the like) turn each
// operation into a function a model can call.
package openapi

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"

	"github.com/countbot/toolsvc/internal/jsonx"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/runes"
)

// ToolTag is the tag of the per-tool operations; the contract's own
// operations carry other tags.
const ToolTag = "tools"

// Build returns the document as JSON: the contract in spec (YAML) with
// info.version set to version when it is not empty, and an operation for
// each tool of defs. With toolsOnly, the contract's own routes are left
// out, for clients that offer every operation to a model as a function
// (Open WebUI does), which should not see /healthz or /metrics among the
// tools. A tool whose name is already an operationId of the contract is an
// error.
func Build(spec []byte, defs []registry.Definition, version string, toolsOnly bool) ([]byte, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(spec, &doc); err != nil {
		return nil, fmt.Errorf("openapi: the contract does not parse: %w", err)
	}
	paths, ok := doc["paths"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("openapi: the contract has no paths")
	}
	if info, ok := doc["info"].(map[string]any); ok && version != "" {
		info["version"] = version
	}
	taken := operationIDs(paths)
	headers, stream := fromGeneric(paths, doc)
	if toolsOnly {
		paths = map[string]any{}
		doc["paths"] = paths
		doc["tags"] = []any{map[string]any{"name": ToolTag, "description": "One operation per tool."}}
	}
	for _, d := range defs {
		name := d.Function.Name
		if taken[name] {
			return nil, fmt.Errorf("openapi: tool %q has the name of an operation of the contract", name)
		}
		var schema any
		if err := json.Unmarshal(d.Function.Parameters, &schema); err != nil {
			return nil, fmt.Errorf("openapi: tool %s: %w", name, err)
		}
		paths["/tools/"+name+"/invoke"] = map[string]any{"post": operation(d, schema, headers, stream)}
	}
	return jsonx.Marshal(doc)
}

// genericPath is the contract's operation that runs any tool; each tool's
// own operation takes its metadata headers and its streamed response.
const genericPath = "/tools/{name}/invoke"

// fromGeneric returns the header parameters of the contract's generic
// invoke operation and its 200 response's text/event-stream content, so
// that every tool's operation states the same headers and streaming as
// the operation it is an instance of (a validating proxy would otherwise
// refuse every streamed call). A parameter given by reference to the
// contract's components is kept as the reference.
func fromGeneric(paths, doc map[string]any) (headers []any, stream any) {
	item, _ := paths[genericPath].(map[string]any)
	post, _ := item["post"].(map[string]any)
	params, _ := post["parameters"].([]any)
	for _, p := range params {
		if m, ok := p.(map[string]any); ok && resolve(doc, m)["in"] == "header" {
			headers = append(headers, m)
		}
	}
	responses, _ := post["responses"].(map[string]any)
	ok, _ := responses["200"].(map[string]any)
	content, _ := ok["content"].(map[string]any)
	return headers, content["text/event-stream"]
}

// resolve returns the parameter p refers to ("$ref":
// "#/components/parameters/Name"), or p itself when it is no reference.
func resolve(doc, p map[string]any) map[string]any {
	ref, ok := p["$ref"].(string)
	if !ok {
		return p
	}
	name, ok := strings.CutPrefix(ref, "#/components/parameters/")
	components, _ := doc["components"].(map[string]any)
	all, _ := components["parameters"].(map[string]any)
	target, _ := all[name].(map[string]any)
	if !ok || target == nil {
		return p
	}
	return target
}

// operation is the operation of one tool: its schema as an optional body
// (an empty body means {}), the generic operation's headers, and a result
// as JSON or, with Accept: text/event-stream, as server-sent events.
func operation(d registry.Definition, schema any, headers []any, stream any) map[string]any {
	okContent := map[string]any{"application/json": map[string]any{
		"schema": map[string]any{"$ref": "#/components/schemas/Result"},
	}}
	if stream != nil {
		okContent["text/event-stream"] = stream
	}
	op := map[string]any{
		"operationId": d.Function.Name,
		"tags":        []any{ToolTag},
		"summary":     Summary(d.Function.Description),
		"description": d.Function.Description,
		"requestBody": map[string]any{
			"required": false,
			"content":  map[string]any{"application/json": map[string]any{"schema": schema}},
		},
		"responses": map[string]any{
			"200": map[string]any{
				"description": "The call ran; `status` says how it went and `result` is what the model reads.",
				"content":     okContent,
			},
			"400": map[string]any{"$ref": "#/components/responses/BadRequest"},
			"401": map[string]any{"$ref": "#/components/responses/Unauthorized"},
			"403": map[string]any{"$ref": "#/components/responses/Forbidden"},
			"408": map[string]any{"$ref": "#/components/responses/RequestTimeout"},
			"413": map[string]any{
				"description": "The body is larger than TOOLSVC_MAX_BODY_BYTES.",
				"content": map[string]any{"application/json": map[string]any{
					"schema": map[string]any{"$ref": "#/components/schemas/HTTPError"},
					// Without an example, Swagger UI makes one up from the
					// schema's first code, which would say unauthorized.
					"example": map[string]any{"error": map[string]any{"code": "body_too_large",
						"message": "the request body is larger than TOOLSVC_MAX_BODY_BYTES. For write_file, send large content in several calls with mode=append."}},
				}},
			},
			"503": map[string]any{"$ref": "#/components/responses/Unavailable"},
		},
	}
	if len(headers) > 0 {
		op["parameters"] = headers
	}
	return op
}

// operationIDs returns every operationId in paths.
func operationIDs(paths map[string]any) map[string]bool {
	ids := map[string]bool{}
	for _, item := range paths {
		ops, _ := item.(map[string]any)
		for _, op := range ops {
			if o, ok := op.(map[string]any); ok {
				if id, ok := o["operationId"].(string); ok {
					ids[id] = true
				}
			}
		}
	}
	return ids
}

// Summary is the first sentence of a description ("e.g." and "i.e." do
// not end it), at most 120 characters, for the short line that clients
// show beside an operation.
func Summary(desc string) string {
	s := strings.TrimSpace(desc)
	for i, r := range s {
		abbrev := strings.HasSuffix(s[:i], "e.g") || strings.HasSuffix(s[:i], "i.e")
		if r == '.' && !abbrev && (i+1 == len(s) || unicode.IsSpace(rune(s[i+1]))) {
			s = s[:i+1]
			break
		}
	}
	return runes.Shorten(s, 120)
}
