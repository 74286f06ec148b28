package http

import (
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/countbot/toolsvc/internal/agent"
)

// AgentsRoutes returns the routes that follow sub-agents, for
// Options.Routes: GET /agents lists the tasks, GET /agents/{id} shows one
// with its tool calls and answer, DELETE /agents/{id} cancels it. A nil
// manager (no model configured) adds none.
func AgentsRoutes(m *agent.Manager) func(chi.Router) {
	if m == nil {
		return nil
	}
	return func(r chi.Router) {
		r.Get("/agents", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, struct {
				Agents []agent.Summary `json:"agents"`
			}{m.List()})
		})
		r.Get("/agents/{id}", func(w http.ResponseWriter, r *http.Request) {
			id := chi.URLParam(r, "id")
			t, ok := m.Get(id)
			if !agent.ValidID(id) || !ok {
				writeError(w, kindNotFound, "no sub-agent "+strconv.Quote(cut40(id)))
				return
			}
			writeJSON(w, http.StatusOK, t)
		})
		r.Delete("/agents/{id}", func(w http.ResponseWriter, r *http.Request) {
			id := chi.URLParam(r, "id")
			t, ok := m.Cancel(r.Context(), id)
			if !agent.ValidID(id) || !ok {
				writeError(w, kindNotFound, "no sub-agent "+strconv.Quote(cut40(id)))
				return
			}
			writeJSON(w, http.StatusOK, t)
		})
	}
}

// cut40 cuts an ID named in a message, so a long path cannot fill it.
func cut40(id string) string {
	if len(id) > 40 {
		id = id[:40] + "..."
	}
	return id
}

// JoinRoutes returns one Options.Routes function adding every non-nil one.
func JoinRoutes(fns ...func(chi.Router)) func(chi.Router) {
	return func(r chi.Router) {
		for _, f := range fns {
			if f != nil {
				f(r)
			}
		}
	}
}
