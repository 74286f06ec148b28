package http

import (
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/countbot/toolsvc/internal/agent"
	"github.com/countbot/toolsvc/internal/jsonx"
	"github.com/countbot/toolsvc/internal/runes"
)

// AgentsRoutes returns the routes that follow sub-agents, for
// Options.Routes: GET /agents lists the tasks, GET /agents/{id} shows one
// with its tool calls and answer, GET /agents/{id}/events streams its
// progress, DELETE /agents/{id} cancels it. A task belongs to the key
// that started it: other keys neither list it nor reach it (404), admin
// keys reach every task. A nil manager (no model configured) adds none.
func AgentsRoutes(m *agent.Manager) func(chi.Router) {
	if m == nil {
		return nil
	}
	return func(r chi.Router) {
		r.Get("/agents", func(w http.ResponseWriter, r *http.Request) {
			c := callerOf(r)
			out := []agent.Summary{}
			all, err := m.List(r.Context())
			if err != nil {
				writeError(w, kindUnavailable, storeDown)
				return
			}
			for _, t := range all {
				if c.Sees(t.Owner) {
					out = append(out, t)
				}
			}
			writeJSON(w, http.StatusOK, struct {
				Agents []agent.Summary `json:"agents"`
			}{out})
		})
		r.Get("/agents/{id}", func(w http.ResponseWriter, r *http.Request) {
			id := chi.URLParam(r, "id")
			t, ok, err := visibleTask(r, m, id)
			if err != nil {
				writeError(w, kindUnavailable, storeDown)
				return
			}
			if !ok {
				writeError(w, kindNotFound, "no sub-agent "+strconv.Quote(runes.Shorten(id, 40)))
				return
			}
			writeJSON(w, http.StatusOK, t)
		})
		r.Get("/agents/{id}/events", func(w http.ResponseWriter, r *http.Request) {
			id := chi.URLParam(r, "id")
			var sub *agent.Subscription
			_, ok, err := visibleTask(r, m, id)
			if ok {
				sub, ok, err = m.Subscribe(r.Context(), id)
			}
			if err != nil {
				writeError(w, kindUnavailable, storeDown)
				return
			}
			if !ok {
				writeError(w, kindNotFound, "no sub-agent "+strconv.Quote(runes.Shorten(id, 40)))
				return
			}
			defer sub.Close()
			streamAgent(w, r, m, id, sub)
		})
		r.Delete("/agents/{id}", func(w http.ResponseWriter, r *http.Request) {
			id := chi.URLParam(r, "id")
			var t agent.Task
			_, ok, err := visibleTask(r, m, id)
			if ok {
				t, ok, err = m.Cancel(r.Context(), id)
			}
			if err != nil {
				writeError(w, kindUnavailable, storeDown)
				return
			}
			if !ok {
				writeError(w, kindNotFound, "no sub-agent "+strconv.Quote(runes.Shorten(id, 40)))
				return
			}
			writeJSON(w, http.StatusOK, t)
		})
	}
}

// callerOf is the request's caller. A request that did not pass the gate
// (which never reaches these routes) is nobody: it sees only work without
// an owner, never another key's.
func callerOf(r *http.Request) Caller {
	c, _ := CallerFrom(r.Context())
	return c
}

// visibleTask returns the task id names when the caller may see it. A task
// of another key is answered as one that does not exist, so that its ID
// tells another key nothing, not even that it exists.
func visibleTask(r *http.Request, m *agent.Manager, id string) (agent.Task, bool, error) {
	if !agent.ValidID(id) {
		return agent.Task{}, false, nil
	}
	t, ok, err := m.Find(r.Context(), id)
	if err != nil || !ok || !callerOf(r).Sees(t.Owner) {
		return agent.Task{}, false, err
	}
	return t, true, nil
}

// storeDown is the message of a 503 while the shared database is away.
const storeDown = "the task database (TOOLSVC_DATABASE_URL) cannot be reached; try again shortly"

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

// Bounds of GET /agents/{id}/events.
const (
	agentStall     = 30 * time.Second // one write to the client
	agentKeepAlive = 15 * time.Second // a comment line while nothing happens
)

// streamAgent writes a task's events as server-sent events: "turn" and
// "tool_call" with the event as data, then "end" with the task as GET
// /agents/{id} shows it. A task that has ended gets its "end" at once. The
// task never waits for this client: events it reads too slowly are
// dropped, and a "dropped" event says how many.
func streamAgent(w http.ResponseWriter, r *http.Request, m *agent.Manager, id string, sub *agent.Subscription) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	rc := http.NewResponseController(w)
	write := func(frame []byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(agentStall))
		if _, err := w.Write(frame); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	send := func(event string, v any) bool {
		data, err := jsonx.Marshal(v)
		if err != nil {
			return false
		}
		return write(eventFrame(event, data))
	}
	end := func() {
		t, _, _ := m.Find(r.Context(), id)
		send("end", t)
	}
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return // the headers a GET would have, and no stream
	}
	if !write([]byte(": following " + id + "\n\n")) {
		return
	}
	keep := time.NewTicker(agentKeepAlive)
	defer keep.Stop()
	for {
		select {
		case ev := <-sub.Events():
			if n := sub.Dropped(); n > 0 && !send("dropped", struct {
				Dropped int64 `json:"dropped"`
			}{n}) {
				return
			}
			if ev.Type == agent.EventEnd {
				end()
				return
			}
			if !send(ev.Type, ev) {
				return
			}
		case <-sub.Done():
			// The end event may still be queued behind others; the task's
			// final state says all it would.
			for {
				select {
				case ev := <-sub.Events():
					if ev.Type != agent.EventEnd && !send(ev.Type, ev) {
						return
					}
					continue
				default:
				}
				break
			}
			end()
			return
		case <-keep.C:
			if !write([]byte(": keep-alive\n\n")) {
				return
			}
		case <-r.Context().Done():
			return
		}
	}
}
