// Package docspage serves the interactive page at GET /docs: Swagger UI
// over the service's own /openapi.json, where a person can read every
// door and try every tool in a browser, with the key. Swagger UI comes
// from npm's swagger-ui-dist at a pinned version (assets/swagger-ui/VERSION,
// Apache-2.0: assets/swagger-ui/LICENSE), embedded in the binary and
// refreshed by scripts/swagger-ui.sh; the page loads nothing from
// elsewhere, which its Content-Security-Policy enforces. The document is
// behind the keys, and the page asks for a key before it shows it (see
// assets/docs.js), rather than let Swagger UI fail to load it.
package docspage

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"
)

//go:embed assets
var embedded embed.FS

// assetsPath is where the page's files are served, under /docs.
const assetsPath = "/docs/assets/"

// policy lets the page run its own scripts and styles and fetch from its
// own origin only: no CDN, no inline script, no frame around it, and no
// Swagger validator badge (a request to validator.swagger.io). Swagger
// UI's syntax highlighting sets style attributes, hence 'unsafe-inline'
// for styles (styles cannot run code); its icons are data: SVGs.
const policy = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// asset is one embedded file, with its type and validator.
type asset struct {
	data        []byte
	contentType string
	etag        string
}

// Page is the /docs page and its files, read and rendered once.
type Page struct {
	html   []byte
	assets map[string]asset
}

// New renders the page for the build's version, linking the written
// documentation at docsURL.
func New(version, docsURL string) *Page {
	p := &Page{assets: map[string]asset{}}
	types := map[string]string{".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
	_ = fs.WalkDir(embedded, "assets", func(name string, d fs.DirEntry, err error) error {
		ct, ok := types[path.Ext(name)]
		if err != nil || d.IsDir() || !ok {
			return err
		}
		data, err := embedded.ReadFile(name)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		p.assets[path.Base(name)] = asset{data: data, contentType: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	}) // embedded files: cannot fail
	var buf bytes.Buffer
	_ = page.Execute(&buf, struct{ Version, Docs, Assets string }{version, docsURL, assetsPath}) // a fixed template over strings
	p.html = buf.Bytes()
	return p
}

var page = template.Must(template.New("docs").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>toolsvc {{.Version}}: API</title>
<link rel="stylesheet" href="{{.Assets}}swagger-ui.css">
<link rel="stylesheet" href="{{.Assets}}docs.css">
</head><body>
<header id="toolsvc-bar">
<h1>toolsvc {{.Version}}</h1>
<form id="key-form" autocomplete="off">
<label>API key <input id="key" type="password" placeholder="one of TOOLSVC_API_KEYS; none without keys"></label>
<button type="submit">Use key</button> <span id="key-state"></span>
</form>
<p>Every door and tool of this service, from <a href="/openapi.json">/openapi.json</a>: open one,
fill its body and press Execute. Documentation: <a href="{{.Docs}}">{{.Docs}}</a>.</p>
<details id="doors-box"><summary>Doors this service answers</summary><ul id="doors"><li>Give the key to see them.</li></ul></details>
<p id="need-key" role="status">Loading the API definition&hellip;</p>
</header>
<div id="swagger-ui"></div>
<script src="{{.Assets}}swagger-ui-bundle.js"></script>
<script src="{{.Assets}}docs.js"></script>
</body></html>
`))

// ServePage answers GET /docs with the page.
func (p *Page) ServePage(w http.ResponseWriter, _ *http.Request) {
	WriteHTML(w, p.html, policy)
}

// WriteHTML answers with an embedded page: its Content-Security-Policy
// csp, no sniffing, no referrer, revalidated at each load. The service's
// pages for people (/docs, /approvals) are written by it.
func WriteHTML(w http.ResponseWriter, html []byte, csp string) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
	h.Set("Content-Length", strconv.Itoa(len(html)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(html)
}

// ServeAsset answers GET /docs/assets/<file> with an embedded file, 404
// for any other name.
func (p *Page) ServeAsset(w http.ResponseWriter, r *http.Request) {
	a, ok := p.assets[strings.TrimPrefix(r.URL.Path, assetsPath)]
	if !ok {
		http.NotFound(w, r)
		return
	}
	WriteAsset(w, r, a.contentType, a.etag, a.data)
}

// WriteAsset answers with an embedded script, style or image of a page:
// revalidated by its ETag at each load, never sniffed.
func WriteAsset(w http.ResponseWriter, r *http.Request, contentType, etag string, data []byte) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", etag)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
}
