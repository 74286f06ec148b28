package registry

import "encoding/json"

// CheckSchema reports whether raw would be accepted as a tool's
// parameters by Register: a JSON Schema with "type": "object" that
// compiles. Tools that come from outside (MCP servers, a tools file) are
// checked with it first, so that one bad schema leaves that tool out
// instead of failing start-up.
func CheckSchema(raw json.RawMessage) error {
	_, err := compileSchema(raw)
	return err
}
