package http

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"net/http"
	"path"

	"github.com/go-chi/chi/v5"

	"github.com/countbot/toolsvc/internal/docspage"
)

// approvalsPageFiles are the page a person decides approvals on: its HTML,
// script and style, embedded so that the page loads nothing from
// elsewhere.
//
//go:embed approvals_page
var approvalsPageFiles embed.FS

// approvalsAssetsPath is where the page's script and style are served.
// Its two segments never meet GET /approvals/{id}, which has one.
const approvalsAssetsPath = "/approvals/assets/"

// approvalsPagePolicy lets the page run its own script and style and
// talk to its own origin only: no inline script, no other site's code,
// no form that posts anywhere (the page's forms are handled by its
// script), and no frame around it, so that no other site can lay the
// approve button under a click of its own.
const approvalsPagePolicy = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// approvalsPage is the page and its files, read once.
type approvalsPage struct {
	html   []byte
	assets map[string]pageAsset
}

// pageAsset is one embedded file, with its type and validator.
type pageAsset struct {
	data        []byte
	contentType string
	etag        string
}

func newApprovalsPage() *approvalsPage {
	p := &approvalsPage{assets: map[string]pageAsset{}}
	p.html, _ = approvalsPageFiles.ReadFile("approvals_page/index.html") // embedded: cannot fail
	types := map[string]string{".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
	entries, _ := approvalsPageFiles.ReadDir("approvals_page")
	for _, e := range entries {
		ct, ok := types[path.Ext(e.Name())]
		if !ok {
			continue
		}
		data, _ := approvalsPageFiles.ReadFile("approvals_page/" + e.Name())
		sum := sha256.Sum256(data)
		p.assets[e.Name()] = pageAsset{data: data, contentType: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
	}
	return p
}

// approvalPageRoutes adds GET /approvals and the page's files outside the
// keys, as /docs is: a browser cannot send a bearer token when a person
// opens a link, and the page holds no approval, no key and nothing of the
// setup, only the script that asks for an approver's key and then reads
// and decides the approvals through the doors that need it (the list's
// JSON, POST /approvals/{id}). Every other client of GET /approvals gets
// the JSON list behind the keys, as before. The guard still stands in
// front of all of it: another site's page can neither open nor frame the
// page, nor send its requests.
func (s *server) approvalPageRoutes(r chi.Router) {
	page := newApprovalsPage()
	list := s.gate.authenticate(http.HandlerFunc(s.listApprovals))
	r.Get("/approvals", func(w http.ResponseWriter, req *http.Request) {
		w.Header().Add("Vary", "Accept")
		if wantsHTML(req) {
			page.serve(w)
			return
		}
		list.ServeHTTP(w, req)
	})
	r.Get(approvalsAssetsPath+"{file}", page.serveAsset)
}

// serve writes the page.
func (p *approvalsPage) serve(w http.ResponseWriter) {
	// No frame may hold it: its buttons decide calls.
	w.Header().Set("X-Frame-Options", "DENY")
	docspage.WriteHTML(w, p.html, approvalsPagePolicy)
}

// serveAsset answers with an embedded script or style, 404 for any other
// name.
func (p *approvalsPage) serveAsset(w http.ResponseWriter, r *http.Request) {
	a, ok := p.assets[chi.URLParam(r, "file")]
	if !ok {
		writeError(w, kindNotFound, "no such file of the approvals page")
		return
	}
	docspage.WriteAsset(w, r, a.contentType, a.etag, a.data)
}
