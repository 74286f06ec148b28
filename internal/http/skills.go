package http

import (
	"net/http"
	"os"

	"github.com/go-chi/chi/v5"
	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/skills"
)

// SkillsRoutes returns the routes of the skills listing, for Options.Routes:
// GET /skills lists every skill in the workspace with what it requires and
// whether it can be used, so an agent backend can put them in its system
// prompt. rootOf gives the folder whose skills a key sees (its own folder,
// when its policy gives it one); nil: the loader's for every key.
func SkillsRoutes(l *skills.Loader, rootOf func(key string) (*os.Root, error), log zerolog.Logger) func(chi.Router) {
	return func(r chi.Router) {
		r.Get("/skills", func(w http.ResponseWriter, r *http.Request) {
			kl := l
			if rootOf != nil {
				root, err := rootOf(keyFrom(r.Context()))
				if err != nil {
					log.Error().Err(err).Str("key", keyFrom(r.Context())).Msg("opening the key's folder for its skills")
					writeError(w, kindInternal, "the key's folder could not be opened")
					return
				}
				kl = l.In(root)
			}
			list, err := kl.List()
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
