package http

import (
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/skills"
)

// SkillsRoutes returns the routes of the skills listing, for Options.Routes:
// GET /skills lists every skill in the workspace with what it requires and
// whether it can be used, so an agent backend can put them in its system
// prompt.
func SkillsRoutes(l *skills.Loader, log zerolog.Logger) func(chi.Router) {
	return func(r chi.Router) {
		r.Get("/skills", func(w http.ResponseWriter, r *http.Request) {
			list, err := l.List()
			if err != nil {
				log.Error().Err(err).Msg("listing skills")
				writeError(w, kindInternal, "the skills folder could not be read")
				return
			}
			writeJSON(w, http.StatusOK, struct {
				Skills []skills.Skill `json:"skills"`
			}{list})
		})
	}
}
