// Package jsonx encodes JSON the way the service sends it everywhere:
// without escaping <, > and &, since results, schemas and descriptions are
// code, shell output and prose read by models and people, not embedded in
// HTML, and "\u003c" costs a model tokens and clarity.
package jsonx

import (
	"bytes"
	"encoding/json"
)

// Marshal is json.Marshal without HTML escaping (and without the newline
// json.Encoder adds).
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'}), nil
}
