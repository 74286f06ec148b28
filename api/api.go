// Package api holds the HTTP contract, openapi.yaml, kept by hand. The
// service builds GET /openapi.json from it, adding one operation per tool,
// so that the two cannot drift apart.
package api

import _ "embed"

// OpenAPI returns the contract as written in openapi.yaml.
func OpenAPI() []byte { return spec }

//go:embed openapi.yaml
var spec []byte
