package http

import (
	"net/http"
	"regexp"
	"sync"
	"time"

	"github.com/go-chi/chi/v5/middleware"
	"github.com/google/uuid"
	"github.com/rs/zerolog"
)

var requestIDPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`) })

// requestID takes a sane X-Request-ID from the client or makes one, and
// echoes it in the response.
func requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := header(r.Header, "X-Request-Id")
		if id == "" || !requestIDPattern().MatchString(id) { // most clients send none
			id = uuid.NewString()
		}
		setHeader(w.Header(), "X-Request-Id", id)
		r, st := withState(r)
		st.id = id
		next.ServeHTTP(w, r)
	})
}

// quietProbe reports the answers to monitors that poll every few seconds
// (/healthz, /readyz, /metrics): their lines are logged at debug level so
// that they do not bury the calls. A probe that fails otherwise than with
// the expected "not ready" 503 (a scraper without the key, a fault) is
// logged as any request.
func quietProbe(path string, status int) bool {
	switch path {
	case "/healthz", "/readyz", "/metrics":
		return status < 400 || status == http.StatusServiceUnavailable
	}
	return false
}

// accessLog writes one JSON line per request.
func accessLog(log zerolog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
			r, st := withState(r)
			next.ServeHTTP(ww, r)
			status := ww.Status()
			if status == 0 {
				status = http.StatusOK
			}
			ev := log.Info()
			switch {
			case quietProbe(r.URL.Path, status):
				ev = log.Debug()
			case status >= 500:
				ev = log.Error()
			}
			ev = ev.Str("request_id", st.id).
				Str("method", r.Method).
				Str("path", logPath(r.URL.Path)).
				Int("status", status).
				Int("bytes", ww.BytesWritten()).
				Dur("duration", time.Since(start)).
				Str("remote", r.RemoteAddr)
			if st.caller.Key != "" {
				ev = ev.Str("key", st.caller.Key)
			}
			ev.Msg("request")
		})
	}
}

// recoverer turns a panic in a handler into a 500 that tells nothing of the
// internals, and a log line that tells everything.
func recoverer(log zerolog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				if p := recover(); p != nil {
					if p == http.ErrAbortHandler {
						panic(p)
					}
					log.Error().Str("request_id", requestIDFrom(r.Context())).
						Interface("panic", p).Str("path", logPath(r.URL.Path)).Msg("handler panicked")
					writeError(w, kindInternal, "internal error; the request ID is in the X-Request-ID header")
				}
			}()
			next.ServeHTTP(w, r)
		})
	}
}
