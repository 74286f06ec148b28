package http

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/countbot/toolsvc/internal/medialink"
)

// media serves GET /media/{token}: the one workspace file a signed link
// names, read-only, to a chat platform's servers (QQ fetches the files it
// is sent from there). The token is the only credential: the route needs no
// key, and is not in the index or /tools. A token that is not ours answers
// 404, a link that expired or whose file changed 410; neither says which
// file. Every answer is logged, without the token.
func (s *server) media(w http.ResponseWriter, r *http.Request) {
	log := s.opts.Log.With().Str("request_id", requestIDFrom(r.Context())).Str("remote", r.RemoteAddr).Logger()
	f, err := s.opts.Media.Open(chi.URLParam(r, "token"))
	switch {
	case errors.Is(err, medialink.ErrGone):
		log.Info().Str("reason", err.Error()).Msg("media link refused")
		writeError(w, kindGone, "the media link has expired or its file has changed")
		return
	case err != nil:
		log.Warn().Str("reason", err.Error()).Msg("media link refused")
		writeError(w, kindNotFound, "no such media link")
		return
	}
	defer f.Close()
	log.Info().Str("file", f.Display).Int64("size", f.Size).Msg("media link served")
	h := w.Header()
	h.Set("Content-Type", f.ContentType)
	// The file is shown as what its name says and nothing else: never
	// sniffed into a page, never run as one, never cached past the link.
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "sandbox; default-src 'none'")
	h.Set("Cache-Control", "private, no-store")
	h.Set("Content-Disposition", "inline; filename*=UTF-8''"+escapeFilename(f.Name))
	http.ServeContent(w, r, f.Name, f.ModTime, f)
}

// escapeFilename percent-encodes a file name for Content-Disposition's
// filename* (RFC 5987): everything but unreserved characters.
func escapeFilename(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._~", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// logPath is a request's path as logs show it: a media link's token is a
// credential for its file while it lives, so it is left out.
func logPath(p string) string {
	if strings.HasPrefix(p, medialink.Route) {
		return medialink.Route + "[token]"
	}
	return p
}
