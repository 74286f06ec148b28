package http

import (
	"net/http"
	"strconv"
	"sync"

	"github.com/countbot/toolsvc/internal/jsonx"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/toolerr"
)

// Kinds of HTTP-level failure. These are for the caller, not the model: a
// tool's own failure is a 200 with status "error" in the body.
const (
	kindUnauthorized     = "unauthorized"
	kindOriginNotAllowed = "origin_not_allowed"
	kindHostNotAllowed   = "host_not_allowed"
	kindNotFound         = "not_found"
	kindGone             = "gone"
	kindUnknownTool      = "unknown_tool"
	kindMethodNotAllowed = "method_not_allowed"
	kindBodyTooLarge     = "body_too_large"
	kindBodyTimeout      = "body_timeout"
	kindBadRequest       = "bad_request"
	kindOverloaded       = "overloaded"
	// kindRateLimited: the key is over its rate or its calls at once
	// (TOOLSVC_POLICY_FILE); Retry-After says when to try again.
	kindRateLimited  = "rate_limited"
	kindShuttingDown = "shutting_down"
	kindNotReady     = "not_ready"
	kindInternal     = "internal_error"
	// kindUnavailable: a dependency (the shared database) cannot be
	// reached.
	kindUnavailable = "unavailable"
	// kindForbidden: the key may not do this (decide approvals, or decide
	// its own call's).
	kindForbidden = "forbidden"
	// kindConflict: the approval is already decided or has expired.
	kindConflict = "conflict"
)

// statusOf is the one table from error kind to HTTP status.
var statusOf = map[string]int{
	kindUnauthorized:     http.StatusUnauthorized,
	kindOriginNotAllowed: http.StatusForbidden,
	kindHostNotAllowed:   http.StatusForbidden,
	kindNotFound:         http.StatusNotFound,
	kindGone:             http.StatusGone,
	kindUnknownTool:      http.StatusNotFound,
	kindMethodNotAllowed: http.StatusMethodNotAllowed,
	kindBodyTooLarge:     http.StatusRequestEntityTooLarge,
	kindBodyTimeout:      http.StatusRequestTimeout,
	kindBadRequest:       http.StatusBadRequest,
	kindOverloaded:       http.StatusServiceUnavailable,
	kindRateLimited:      http.StatusTooManyRequests,
	kindShuttingDown:     http.StatusServiceUnavailable,
	kindNotReady:         http.StatusServiceUnavailable,
	kindInternal:         http.StatusInternalServerError,
	kindUnavailable:      http.StatusServiceUnavailable,
	kindForbidden:        http.StatusForbidden,
	kindConflict:         http.StatusConflict,
}

type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// writeError writes {"error":{"code","message"}} with the kind's status.
func writeError(w http.ResponseWriter, kind, message string) {
	var b errorBody
	b.Error.Code = kind
	b.Error.Message = message
	status, ok := statusOf[kind]
	if !ok {
		status = http.StatusInternalServerError
	}
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="toolsvc"`)
	}
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, status, b)
}

// writeRefused answers a call the key policy refused: an unknown tool's
// 404 for a tool the key may not call, a 429 with Retry-After in whole
// seconds for a key over its rate or its calls at once.
func writeRefused(w http.ResponseWriter, res *registry.Result) {
	if res.Error.Code != toolerr.RateLimited {
		writeError(w, kindUnknownTool, res.Error.Message)
		return
	}
	w.Header().Set("Retry-After", strconv.FormatInt(registry.RetrySeconds(res.RetryAfter), 10))
	writeError(w, kindRateLimited, res.Error.Message)
}

// writeJSON marshals v before writing the header, so an encoding failure
// can still become a 500.
func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := jsonx.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		data = []byte(`{"error":{"code":"internal_error","message":"internal error"}}`)
	}
	writeRaw(w, status, data)
}

// writeResult writes a call's result, a 200 whatever the call's status,
// encoded into a buffer of the pool: the ResponseWriter copies what it is
// given, so the buffer is free again once written.
func writeResult(w http.ResponseWriter, pool *sync.Pool, res *registry.Result) {
	bp, _ := pool.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	data := append(res.AppendJSON((*bp)[:0]), '\n')
	writeBody(w, http.StatusOK, data)
	// A huge result's buffer is left to the collector rather than kept.
	if cap(data) <= 64<<10 {
		*bp = data
		pool.Put(bp)
	}
}

// writeRaw writes a JSON document and a newline.
func writeRaw(w http.ResponseWriter, status int, data []byte) {
	setJSONHeaders(w.Header(), len(data)+1)
	w.WriteHeader(status)
	_, _ = w.Write(data)
	_, _ = w.Write([]byte{'\n'})
}

// writeBody writes a JSON document that ends with its newline.
func writeBody(w http.ResponseWriter, status int, data []byte) {
	setJSONHeaders(w.Header(), len(data))
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

func setJSONHeaders(h http.Header, length int) {
	setHeader(h, "Content-Type", "application/json")
	setHeader(h, "X-Content-Type-Options", "nosniff")
	// A known length lets a client read the whole answer while the server
	// still drains a refused body behind it.
	setHeader(h, "Content-Length", strconv.Itoa(length))
}
