package http

import (
	"bytes"
	"html/template"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/countbot/toolsvc/internal/jsonx"
)

// DocsURL is where the documentation lives: the repository's docs folder,
// named after the module path.
const DocsURL = "https://github.com/countbot/toolsvc/tree/main/docs"

// door is one entry of the index: its name, the path a client uses (with
// {placeholders}), and a concrete method and path the router must answer
// for the door to be listed.
type door struct {
	name, path, method, probe string
}

// doors are the index's candidates. Those the router does not serve (no
// model: no /agents; no metrics handler) are left out, so the index says
// what this process answers, not what the code could.
var doors = []door{
	{"tools", "/tools", http.MethodGet, "/tools"},
	{"tool", "/tools/{name}", http.MethodGet, "/tools/x"},
	{"invoke", "/tools/{name}/invoke", http.MethodPost, "/tools/x/invoke"},
	{"mcp", "/mcp", http.MethodPost, "/mcp"},
	{"openapi", "/openapi.json", http.MethodGet, "/openapi.json"},
	{"docs", "/docs", http.MethodGet, "/docs"},
	{"agents", "/agents", http.MethodGet, "/agents"},
	{"approvals", "/approvals", http.MethodGet, "/approvals"},
	{"skills", "/skills", http.MethodGet, "/skills"},
	{"metrics", "/metrics", http.MethodGet, "/metrics"},
	{"health", "/healthz", http.MethodGet, "/healthz"},
	{"ready", "/readyz", http.MethodGet, "/readyz"},
}

// indexBody is GET / as JSON.
type indexBody struct {
	Name    string            `json:"name"`
	Version string            `json:"version"`
	Doors   map[string]string `json:"doors"`
	Docs    string            `json:"docs"`
}

// index is GET / (and GET /docs), rendered once: the routes do not change
// for the life of the handler.
type index struct {
	json, html []byte
}

// newIndex lists the doors routes serves, as JSON and as an HTML page.
func newIndex(routes chi.Routes, version string) *index {
	body := indexBody{Name: "toolsvc", Version: version, Doors: map[string]string{}, Docs: DocsURL}
	var rows []indexRow
	for _, d := range doors {
		if !routes.Match(chi.NewRouteContext(), d.method, d.probe) {
			continue
		}
		body.Doors[d.name] = d.path
		rows = append(rows, indexRow{Name: d.name, Method: d.method, Path: d.path, Link: d.method == http.MethodGet && !strings.Contains(d.path, "{")})
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Name < rows[j].Name })
	idx := &index{}
	idx.json, _ = jsonx.Marshal(body) // strings only: cannot fail
	var buf bytes.Buffer
	_ = indexPage.Execute(&buf, struct {
		Version, Docs string
		Rows          []indexRow
	}{version, DocsURL, rows}) // a fixed template over strings: cannot fail
	idx.html = buf.Bytes()
	return idx
}

type indexRow struct {
	Name, Method, Path string
	Link               bool
}

// indexPage is the page a browser gets. It has no script and loads nothing,
// and is served with a policy that allows neither.
var indexPage = template.Must(template.New("index").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>toolsvc</title></head>
<body>
<h1>toolsvc {{.Version}}</h1>
<p>An AI agent's tools over HTTP/JSON. Documentation: <a href="{{.Docs}}">{{.Docs}}</a>.</p>
<table>
<tr><th>door</th><th>method</th><th>path</th></tr>
{{range .Rows}}<tr><td>{{.Name}}</td><td>{{.Method}}</td><td>{{if .Link}}<a href="{{.Path}}">{{.Path}}</a>{{else}}{{.Path}}{{end}}</td></tr>
{{end}}</table>
</body></html>
`))

// welcomePage is GET / for a browser that sends no key to a service with
// keys: opening the address sends none, and the index it would get with one
// stays behind the keys (which doors answer tells how the service is set
// up). It holds only what /healthz and the page at /docs give anyone (the
// name and version), says where to go, and has no script.
var welcomePage = template.Must(template.New("welcome").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>toolsvc</title></head>
<body>
<h1>toolsvc {{.Version}}</h1>
<p>An AI agent's tools over HTTP/JSON.</p>
<p>Open <a href="/docs">/docs</a> to read this service's API and try it: give an API key
(one of TOOLSVC_API_KEYS) there, and the page sends it with every request it makes.</p>
<p>Everything else here needs the key, sent as <code>Authorization: Bearer &lt;key&gt;</code>.
Documentation: <a href="{{.Docs}}">{{.Docs}}</a>.</p>
</body></html>
`))

// front is GET /: with keys set, a browser that sends no key gets the
// welcome page, a 200 that points at /docs, where the key can be given;
// everything else goes through the keys to the index as before, so API
// clients without a key, and anyone with a wrong one, get the 401.
type front struct {
	welcome []byte
	keyed   bool
	index   http.Handler // the index behind the keys
}

// newFront returns GET / for a service whose gate is g, serving the index
// through serveIndex once a key passes.
func newFront(g *gate, version string, serveIndex http.HandlerFunc) *front {
	var buf bytes.Buffer
	_ = welcomePage.Execute(&buf, struct{ Version, Docs string }{version, DocsURL}) // a fixed template over strings: cannot fail
	return &front{welcome: buf.Bytes(), keyed: len(g.keys) > 0, index: g.authenticate(serveIndex)}
}

func (f *front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// With keys, the answer depends on both: no cache may give one
	// caller's to another.
	vary(w.Header(), "Accept")
	if f.keyed {
		vary(w.Header(), "Authorization")
	}
	if !f.keyed || !wantsHTML(r) || header(r.Header, "Authorization") != "" {
		f.index.ServeHTTP(w, r)
		return
	}
	writePage(w, f.welcome)
}

// wantsHTML reports whether the client asks for a page: a browser's
// Accept names text/html.
func wantsHTML(r *http.Request) bool { return strings.Contains(r.Header.Get("Accept"), "text/html") }

// serve answers with HTML when the client asks for it (a browser's Accept
// names text/html), else with JSON.
func (idx *index) serve(w http.ResponseWriter, r *http.Request) {
	vary(w.Header(), "Accept")
	if !wantsHTML(r) {
		writeRaw(w, http.StatusOK, idx.json)
		return
	}
	writePage(w, idx.html)
}

// vary adds name to the Vary header unless it names it already.
func vary(h http.Header, name string) {
	for _, v := range h.Values("Vary") {
		for _, f := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(f), name) {
				return
			}
		}
	}
	h.Add("Vary", name)
}

// writePage answers with a page that runs no script and loads nothing,
// under a policy that allows neither, nor a frame around it.
func writePage(w http.ResponseWriter, page []byte) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
	h.Set("Content-Length", strconv.Itoa(len(page)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(page)
}
