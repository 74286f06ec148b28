package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
)

// The go-sdk answers some requests in ways a client cannot act on. Each is
// corrected here, where the answer leaves the SDK; each belongs upstream
// (github.com/modelcontextprotocol/go-sdk) and can go when the SDK does it:
//
//   - A request for a method the server does not have gets a plain-text
//     400 ("JSON RPC not handled") before protocol 2026-07-28, where
//     JSON-RPC asks for an error response with code -32601. It gets that
//     here over every version, in a 200 (a 404 means "session gone" to
//     clients of those versions); a notification of such a method is
//     accepted (202) and ignored, as JSON-RPC has it.
//   - Params that do not decode (a number as the tool name) get a -32602
//     whose message quotes Go's decoder: Go struct and package names
//     (mcp.CallToolParamsRaw) that say nothing to a client. The message
//     is rewritten to name the parameter and the JSON type it needs.
const notHandledPrefix = "JSON RPC not handled"

// fixErrors wraps the SDK's handler h with the corrections above.
func fixErrors(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			h.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "failed to read body", http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		fw := &fixingWriter{ResponseWriter: w, body: body}
		h.ServeHTTP(fw, r)
		fw.finish()
	})
}

// fixingWriter passes the SDK's answer through, except a plain-text 400,
// which it holds to see whether it is the "not handled" one, and a
// JSON-RPC -32602 error, whose message it rewrites.
type fixingWriter struct {
	http.ResponseWriter
	body    []byte // the request's
	held    *bytes.Buffer
	status  int
	written bool // the first Write has been seen
}

func (f *fixingWriter) WriteHeader(code int) {
	if code == http.StatusBadRequest && strings.HasPrefix(f.Header().Get("Content-Type"), "text/plain") {
		f.held, f.status = &bytes.Buffer{}, code
		return
	}
	f.ResponseWriter.WriteHeader(code)
}

func (f *fixingWriter) Write(p []byte) (int, error) {
	if f.held != nil {
		return f.held.Write(p)
	}
	first := !f.written
	f.written = true
	if first && strings.HasPrefix(f.Header().Get("Content-Type"), "application/json") {
		if fixed, ok := fixParamsError(p); ok {
			f.Header().Del("Content-Length")
			if _, err := f.ResponseWriter.Write(fixed); err != nil {
				return 0, err
			}
			return len(p), nil
		}
	}
	return f.ResponseWriter.Write(p)
}

// Flush lets the SDK's streamed answers through.
func (f *fixingWriter) Flush() {
	if fl, ok := f.ResponseWriter.(http.Flusher); ok && f.held == nil {
		fl.Flush()
	}
}

// Unwrap gives http.ResponseController the connection's writer.
func (f *fixingWriter) Unwrap() http.ResponseWriter { return f.ResponseWriter }

// finish sends a held answer: as JSON-RPC -32601 when it was the SDK's
// "not handled" for a request (a message with an ID), else as it was.
func (f *fixingWriter) finish() {
	if f.held == nil {
		return
	}
	text := strings.TrimSpace(f.held.String())
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if strings.HasPrefix(text, notHandledPrefix) && json.Unmarshal(f.body, &req) == nil && len(req.ID) > 0 && string(req.ID) != "null" {
		msg := fmt.Sprintf("method %q is not offered: this server answers initialize, ping, tools/list and tools/call", req.Method)
		out, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID,
			"error": map[string]any{"code": -32601, "message": msg}}) // plain values: cannot fail
		h := f.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Content-Length", strconv.Itoa(len(out)))
		f.ResponseWriter.WriteHeader(http.StatusOK)
		_, _ = f.ResponseWriter.Write(out)
		return
	}
	if strings.HasPrefix(text, notHandledPrefix) && req.Method != "" && len(req.ID) == 0 {
		// A notification of a method the server does not know is
		// ignored, as JSON-RPC has it: there is no one to answer.
		f.Header().Del("Content-Type")
		f.Header().Set("Content-Length", "0")
		f.ResponseWriter.WriteHeader(http.StatusAccepted)
		return
	}
	f.ResponseWriter.WriteHeader(f.status)
	_, _ = f.ResponseWriter.Write(f.held.Bytes())
}

var (
	errorMarker = []byte(`"error":{"code":-32602`)
	resultKey   = []byte(`"result":`)
	// goField is Go's decoder naming a field: `Go struct field
	// mcp.CallToolParamsRaw.name of type string`.
	goField = regexp.MustCompile(`Go struct field \w+\.\w+\.([\w.]+) of type ([\w\[\]*.]+)`)
	method  = regexp.MustCompile(`^handling '([^']+)'`)
)

// fixParamsError rewrites a JSON-RPC -32602 response whose message quotes
// Go's decoder, and reports whether it did. A result's text cannot hold
// the marker unescaped, so responses with a result are let through
// without decoding them.
func fixParamsError(p []byte) ([]byte, bool) {
	i := bytes.Index(p, errorMarker)
	if i < 0 || bytes.Contains(p[:i], resultKey) {
		return nil, false
	}
	var resp struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id,omitempty"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(p, &resp) != nil || !strings.Contains(resp.Error.Message, "Go ") && !strings.Contains(resp.Error.Message, "unmarshal") {
		return nil, false
	}
	resp.Error.Message = paramsMessage(resp.Error.Message)
	out, err := json.Marshal(resp)
	return append(out, '\n'), err == nil
}

// paramsMessage says in JSON terms what Go's decoder said of the params.
func paramsMessage(goMsg string) string {
	m := "the request"
	if g := method.FindStringSubmatch(goMsg); g != nil {
		m = "'" + g[1] + "'"
	}
	if g := goField.FindStringSubmatch(goMsg); g != nil {
		return fmt.Sprintf("invalid params of %s: %s must be %s", m, strings.ToLower(g[1][:1])+g[1][1:], jsonType(g[2]))
	}
	return fmt.Sprintf("invalid params of %s: params must be an object with the members the method takes (see the MCP schema)", m)
}

// jsonType names the JSON type a Go type decodes from.
func jsonType(goType string) string {
	switch t := strings.TrimLeft(goType, "*"); {
	case t == "string":
		return "a string"
	case t == "bool":
		return "true or false"
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"), strings.HasPrefix(t, "float"):
		return "a number"
	case strings.HasPrefix(t, "[]"):
		return "an array"
	default:
		return "an object"
	}
}
